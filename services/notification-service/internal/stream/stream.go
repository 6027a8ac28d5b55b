// Package stream serves Server-Sent Events to waiting browsers: "admitted"
// the moment a user's token is issued or restored, "position" every few
// seconds, heartbeats in between.
package stream

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
)

// Positions reads users' standings. redisstore.Store implements it.
type Positions interface {
	Position(ctx context.Context, q, user string) (queue.Standing, error)
	PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error)
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
	m   *Metrics
	o   Options
}

// New returns a Service.
func New(h *hub.Hub, pos Positions, log *slog.Logger, m *Metrics, o Options) *Service {
	o.defaults()
	return &Service{hub: h, pos: pos, log: log, m: m, o: o}
}

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

// Admitted announces a user's issued or restored token on every stream the
// user has open here (each replica sees every event; most have no stream
// for the user and do nothing).
func (s *Service) Admitted(q, user, tokenID string, activateAt, expiresAt, at time.Time) {
	m := admittedMessage(q, tokenID, activateAt, expiresAt, at)
	for _, st := range s.hub.Streams(q, user) {
		if !st.MarkAdmitted(tokenID) {
			continue
		}
		if !hub.Offer(st, m) {
			s.m.dropped.WithLabelValues("slow").Inc()
			s.hub.Close(st)
		}
	}
}

// RunPositions sends every connected user a position event each period, read
// from Redis in one pipelined round per queue. It is also the safety net for
// admissions: a user the read finds admitted whose token was not announced
// on a stream (an event missed while this replica reconnected to the broker)
// is announced now.
func (s *Service) RunPositions(ctx context.Context) {
	t := time.NewTicker(s.o.PositionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for q, users := range s.hub.Users() {
			s.positions(ctx, q, users)
		}
	}
}

func (s *Service) positions(ctx context.Context, q string, users []string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	sts, err := s.pos.PositionMany(rctx, q, users)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("position round", "queue", q, "users", len(users), "err", err)
		}
		return
	}
	now := time.Now()
	for user, st := range sts {
		if st.State == queue.Admitted && st.Token != nil {
			s.Admitted(q, user, st.Token.ID, st.Token.ActivateAt, st.Token.ExpiresAt, now)
		}
		v, _ := queue.NewView(st, false)
		b, _ := json.Marshal(v)
		s.hub.Send(q, user, hub.Message{Event: "position", Data: b, At: now})
	}
}
