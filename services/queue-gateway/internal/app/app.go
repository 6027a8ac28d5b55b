// Package app holds the queue-gateway's use cases: enter, position, leave and
// the queue admin operations. It checks the input and applies the domain rules;
// the store adapter does the atomic work.
package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

// Store is the persistence the gateway needs, in the ports of its two use
// cases: the line a person stands in, and the queues an operator runs.
// redisstore.Store implements both.
type Store interface {
	Line
	Queues
}

// Line is a person's side: a place, where it stands, leaving, and the
// challenge a queue asks of a new entrant.
type Line interface {
	EnterWithProof(ctx context.Context, q, user string, proof queue.Proof) (queue.Standing, error)
	Position(ctx context.Context, q, user string) (queue.Standing, error)
	Leave(ctx context.Context, q, user string) (bool, error)
	// Challenge reads q's enter challenge and difficulty, in one cheap read.
	Challenge(ctx context.Context, q string) (queue.EnterChallenge, int64, error)
}

// Queues is the operator's side (and the public view of a queue): the
// knobs, the live figures, closing and removing, the list.
type Queues interface {
	// UpdateConfigBy writes a change of q's knobs and, for an operator's
	// change (by not zero), its QueueChanged event, in one transaction.
	UpdateConfigBy(ctx context.Context, q string, by queue.Change, update func(cur queue.Config, exists bool) (queue.Config, error)) (queue.Config, bool, error)
	// RefuseChange records that an operator's change of q was refused
	// (reason: the problem type answered), when q exists.
	RefuseChange(ctx context.Context, q string, by queue.Change, reason string) (bool, error)
	Config(ctx context.Context, q string) (queue.Config, queue.Stats, error)
	// CloseBy closes q; an operator's close (by not zero) writes its
	// QueueChanged with it.
	CloseBy(ctx context.Context, q string, by queue.Change) (int64, error)
	Unregister(ctx context.Context, q string) (bool, error)
	Queues(ctx context.Context) ([]string, error)
	// Waiting reads the line length of each of ids.
	Waiting(ctx context.Context, ids []string) (map[string]int64, error)
}

// Input errors.
var (
	ErrInvalidQueueID = errors.New("invalid queue id")
	ErrInvalidUserID  = errors.New("invalid user id")
	// ErrChallengeNotRequired: a challenge was asked of a queue that
	// takes entrants without one.
	ErrChallengeNotRequired = errors.New("this queue asks for no enter challenge")
	// ErrTicketInvalid: the queue ticket shown was not issued to this
	// user for this queue.
	ErrTicketInvalid = errors.New("queue ticket not valid for this queue and user")
)

// Frontiers are the queues' admission frontiers kept in memory;
// redisstore.FrontierCache implements it. Lookup returns nil when it has
// none fresh for q.
type Frontiers interface {
	Lookup(q string) *queue.Frontier
}

// InvalidConfigError lists every bad knob of a configuration request.
type InvalidConfigError struct {
	Fields []queue.FieldError
}

func (e *InvalidConfigError) Error() string {
	return fmt.Sprintf("invalid queue configuration (%d bad fields)", len(e.Fields))
}

// Service runs the gateway's use cases; every port (HTTP, the queue length
// gauge) reaches the store and the limiters only through it.
type Service struct {
	line    Line
	queues  Queues
	signer  *challenge.Signer
	limits  Limits
	configs Configs
	m       Metrics

	tickets   *ticket.Signer
	frontiers Frontiers
	// passes, when set, gives the passes of BYPASS standings (bypass.go).
	passes *passBook
	// sightings, when set, takes the signs of life of the people of
	// queues with presence on (seen).
	sightings Sightings

	public *memo[publicView]
	// texts, when set, keeps the queues' own wordings of the page (texts.go).
	texts *textsCache
}

// WithTickets makes s hand out queue tickets (signed by tickets) with every
// WAITING standing, and answer a poll with a ticket whose place is far from
// the front from frontiers, without the store. It returns s.
func (s *Service) WithTickets(tickets *ticket.Signer, frontiers Frontiers) *Service {
	s.tickets, s.frontiers = tickets, frontiers
	return s
}

// Sightings take the signs of life of people in line (presence); a
// presence.Book batches them for Redis. Saw must not block.
type Sightings interface {
	Saw(q, user string)
}

// WithPresence makes s note every enter and poll of a person in line of a
// queue with presence on in sightings, and bound their poll interval
// (queue.MaxPollFor); the queue's knob is read from the configuration
// cache. It returns s.
func (s *Service) WithPresence(sightings Sightings) *Service {
	s.sightings = sightings
	return s
}

// seen notes user's sign of life in q and bounds st's poll interval, when
// st is a place in line (or the pre-queue) of a queue with presence on.
func (s *Service) seen(q, user string, st queue.Standing, err error) queue.Standing {
	if err != nil || s.sightings == nil || s.configs == nil || (st.State != queue.Waiting && st.State != queue.PreQueue) {
		return st
	}
	cfg, ok := s.configs.Get(q)
	if !ok || cfg.AwayAfterSeconds <= 0 {
		return st
	}
	s.sightings.Saw(q, user)
	st.MaxPoll = queue.MaxPollFor(cfg.AwayAfterSeconds)
	return st
}

// withTicket signs st's place into its ticket, when it has one.
func (s *Service) withTicket(q, user string, st queue.Standing) queue.Standing {
	if s.tickets != nil && st.State == queue.Waiting && st.Seq > 0 {
		st.Ticket = s.tickets.Sign(q, user, ticket.Place{Generation: st.Generation, Seq: st.Seq})
	}
	return st
}

// New returns a Service over store; signer issues and checks the enter
// challenges of queues that ask for one. The limits may be nil (off).
// configs, the queue configurations kept in memory, lets a queue that fails
// OPEN answer BYPASS while Redis is down; nil answers every outage with
// queue.ErrUnavailable. A nil m records nothing.
func New(store Store, signer *challenge.Signer, limits Limits, configs Configs, m Metrics) (*Service, error) {
	if store == nil || signer == nil {
		return nil, errors.New("app: store and challenge signer are required")
	}
	if m == nil {
		m = nopMetrics{}
	}
	return &Service{line: store, queues: store, signer: signer, limits: limits, configs: configs, m: m, public: newMemo[publicView](publicTTL, publicForgetAt)}, nil
}

func checkIDs(q, user string) error {
	if !queue.ValidID(q) {
		return ErrInvalidQueueID
	}
	if !queue.ValidUserID(user) {
		return ErrInvalidUserID
	}
	return nil
}
