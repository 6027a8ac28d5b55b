// Package stream holds the rules of the notification-service's event
// streams: who may open one, what it opens with ("admitted" when the user's
// token is already out, then the position), an "admitted" the moment a
// token is issued or restored, never twice for one token on one stream, and
// a "position" every few seconds. The HTTP port (httpapi) writes the frames.
package stream

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/ticket"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
)

// Positions reads users' standings. redisstore.Store implements it.
type Positions interface {
	Position(ctx context.Context, q, user string) (queue.Standing, error)
	PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error)
}

// Metrics observes what happens to streams; wire implements it with
// Prometheus series. Its methods are called from many streams at once and
// must not block.
type Metrics interface {
	// Delivered: a live message of this event was written to a stream.
	Delivered(event string)
	// Lag: from the event's time to its write on the stream.
	Lag(event string, d time.Duration)
	// Dropped: the server dropped a stream, "slow" (buffer full) or
	// "write" (socket stuck or gone).
	Dropped(reason string)
	// Rejected: a stream request was refused (Reason names why).
	Rejected(reason string)
}

// Options tune the streams.
type Options struct {
	// Heartbeat is the comment interval that keeps proxies from closing an
	// idle stream.
	Heartbeat time.Duration
	// PositionEvery is the position event period.
	PositionEvery time.Duration
	// Retry is the reconnect delay suggested to EventSource.
	Retry time.Duration
	// WriteTimeout drops a client whose socket does not take a write.
	WriteTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.PositionEvery <= 0 {
		o.PositionEvery = 3 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 3 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
}

// Service delivers events to the hub's streams.
type Service struct {
	hub *hub.Hub
	pos Positions
	log *slog.Logger
	m   Metrics
	o   Options

	tickets   *ticket.Signer
	frontiers Frontiers
	places    places
	sightings Sightings
}

// Sightings take the signs of life of people in line (presence): an open
// stream is one, in the background tab where a browser slows the page's
// timers too. wire's implementation batches them for the queues with
// presence on.
type Sightings interface {
	Saw(q, user string)
}

// WithSightings makes every position round note each person it finds in
// line (or pre-queued) as seen: a stream kept open keeps its holder present.
// It returns s.
func (s *Service) WithSightings(sightings Sightings) *Service {
	s.sightings = sightings
	return s
}

// New returns a Service; a nil m records nothing.
func New(h *hub.Hub, pos Positions, log *slog.Logger, m Metrics, o Options) *Service {
	o.defaults()
	if m == nil {
		m = nopMetrics{}
	}
	return &Service{hub: h, pos: pos, log: log, m: m, o: o}
}

// Options are the service's options, defaults filled in.
func (s *Service) Options() Options { return s.o }

// nopMetrics records nothing: the Service's Metrics when given none.
type nopMetrics struct{}

func (nopMetrics) Delivered(string)          {}
func (nopMetrics) Lag(string, time.Duration) {}
func (nopMetrics) Dropped(string)            {}
func (nopMetrics) Rejected(string)           {}

// admission is the data of an "admitted" event. The secret is not in it:
// the page fetches it from the gateway's position call, so it never crosses
// the broker.
type admission struct {
	QueueID    string `json:"queueId"`
	TokenID    string `json:"tokenId"`
	ActivateAt string `json:"activateAt"`
	ExpiresAt  string `json:"expiresAt"`
}

func admittedMessage(q, tokenID string, activateAt, expiresAt, at time.Time) hub.Message {
	b, _ := json.Marshal(admission{QueueID: q, TokenID: tokenID,
		ActivateAt: activateAt.UTC().Format(time.RFC3339Nano), ExpiresAt: expiresAt.UTC().Format(time.RFC3339Nano)})
	return hub.Message{Event: "admitted", ID: tokenID, Data: b, At: at}
}

// positionMessage is a "position" event: the standing as the public view
// shows it, without the token's secret.
func positionMessage(st queue.Standing, at time.Time) hub.Message {
	v, _ := queue.NewView(st, false)
	return hub.Message{Event: "position", Data: v.AppendJSON(make([]byte, 0, 384)), At: at}
}

// Admitted announces a user's issued or restored token on every stream the
// user has open here (each replica sees every event; most have no stream
// for the user and do nothing).
func (s *Service) Admitted(q, user, tokenID string, activateAt, expiresAt, at time.Time) {
	m := admittedMessage(q, tokenID, activateAt, expiresAt, at)
	for _, st := range s.hub.Streams(q, user) {
		if st.MarkAdmitted(tokenID) {
			s.offer(st, m)
		}
	}
}

// offer puts m on st without blocking. A stream whose buffer is full is
// dropped, and counted: it is not reading, and waiting for it would delay
// everybody else.
func (s *Service) offer(st *hub.Stream, m hub.Message) {
	if !hub.Offer(st, m) {
		s.m.Dropped("slow")
		s.hub.Close(st)
	}
}
