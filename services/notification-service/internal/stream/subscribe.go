package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
)

// Subscribe's refusals, besides queue.ErrNotFound and the hub's ErrShut,
// ErrUserCap and ErrIPCap.
var (
	ErrInvalidQueue = errors.New("stream: not a valid queue id")
	ErrForeignUser  = errors.New("stream: a stream can only be opened for the token's own user")
	// ErrUnavailable wraps the store's error: the standing could not be read.
	ErrUnavailable = errors.New("stream: the position store is not answering")
	// ErrTicketInvalid: the queue ticket shown was not issued to this
	// user for this queue.
	ErrTicketInvalid = errors.New("stream: queue ticket not valid for this queue and user")
)

// Request asks for a stream.
type Request struct {
	Queue string
	// User is the authenticated user; ForUser the user the client named
	// (empty: its own).
	User, ForUser string
	// ClientIP is the client's address, for the per-address cap.
	ClientIP string
	// Ticket is the user's queue ticket (?ticket=), or empty: with one,
	// the stream's positions come from the admission frontier while the
	// place is far from the front.
	Ticket string
}

// Subscription is an open stream: the frames it opens with, then the live
// ones, which wait in the hub until the sink Attached takes them. Close
// it when the client is gone.
type Subscription struct {
	// First are the opening frames: the admission, when the user's token
	// is out (a reconnecting client learns of one it missed while away),
	// then the position.
	First []hub.Message

	svc *Service
	st  *hub.Stream
}

// Subscribe opens a stream for r and counts a refusal by its reason. The
// current standing is read first: it decides not-found and unavailable
// before the stream opens, and its admission goes first.
func (s *Service) Subscribe(ctx context.Context, r Request) (*Subscription, error) {
	sub, err := s.subscribe(ctx, r)
	if err != nil {
		s.m.Rejected(reason(err))
	}
	return sub, err
}

func (s *Service) subscribe(ctx context.Context, r Request) (*Subscription, error) {
	if !queue.ValidID(r.Queue) {
		return nil, ErrInvalidQueue
	}
	if r.ForUser != "" && r.ForUser != r.User {
		return nil, ErrForeignUser
	}
	if r.Ticket != "" && s.tickets != nil {
		pl, err := s.tickets.Check(r.Queue, r.User, r.Ticket)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTicketInvalid, err)
		}
		s.places.set(r.Queue, r.User, pl)
	}
	st, ok := s.fromFrontier(r.Queue, r.User)
	var err error
	if !ok {
		st, err = s.pos.Position(ctx, r.Queue, r.User)
	}
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return nil, fmt.Errorf("stream: %w", err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	hs, err := s.hub.Open(r.Queue, r.User, r.ClientIP)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	sub := &Subscription{svc: s, st: hs}
	if st.State == queue.Admitted && st.Token != nil && hs.MarkAdmitted(st.Token.ID) {
		sub.First = append(sub.First, admittedMessage(r.Queue, st.Token.ID, st.Token.ActivateAt, st.Token.ExpiresAt, now))
	}
	sub.First = append(sub.First, positionMessage(st, time.Time{}))
	return sub, nil
}

// reason is a refusal's label: invalid, foreign, ticket, not_found,
// unavailable, shutting_down, user_cap or ip_cap.
func reason(err error) string {
	switch {
	case errors.Is(err, ErrInvalidQueue):
		return "invalid"
	case errors.Is(err, ErrForeignUser):
		return "foreign"
	case errors.Is(err, ErrTicketInvalid):
		return "ticket"
	case errors.Is(err, queue.ErrNotFound):
		return "not_found"
	case errors.Is(err, hub.ErrShut):
		return "shutting_down"
	case errors.Is(err, hub.ErrUserCap):
		return "user_cap"
	case errors.Is(err, hub.ErrIPCap):
		return "ip_cap"
	default:
		return "unavailable"
	}
}

// Attach hands the live messages to w: w.Ready when some wait (Take them),
// w.Closed once the stream is dropped (slow reader, shutdown) or closed.
func (sub *Subscription) Attach(w hub.Sink) { sub.st.Attach(w) }

// Take removes and returns the live messages waiting, oldest first.
func (sub *Subscription) Take() []hub.Message { return sub.st.Take() }

// Closed reports whether the stream was dropped or closed.
func (sub *Subscription) Closed() bool { return sub.st.Closed() }

// Delivered counts a live message written to the client.
func (sub *Subscription) Delivered(m hub.Message) {
	sub.svc.m.Delivered(m.Event)
	if !m.At.IsZero() {
		sub.svc.m.Lag(m.Event, time.Since(m.At))
	}
}

// WriteFailed counts the stream as dropped: the client's socket did not
// take a write.
func (sub *Subscription) WriteFailed() { sub.svc.m.Dropped("write") }

// Close unregisters the stream.
func (sub *Subscription) Close() { sub.svc.hub.Close(sub.st) }
