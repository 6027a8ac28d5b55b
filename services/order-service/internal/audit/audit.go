// Package audit is the trail of the operators' changes to the queues: the
// QueueChanged events the gateway writes with each change (who, from where,
// the knobs before and after), stored once each and listed newest first.
// The order-service keeps it because it is the one owner of PostgreSQL.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Change is one operator's change of a queue.
type Change struct {
	EventID string
	QueueID string
	// Actor is the operator: their admin JWT's subject.
	Actor string
	// Address is where the change came from, as the gateway trusted it.
	Address string
	// Action is "CREATED" or "CONFIGURED".
	Action string
	// Before is the knobs before (nil for a create), After after: JSON
	// objects as the admin API shows them.
	Before, After json.RawMessage
	// ETag is the knobs' version after the change (for a refused one,
	// the version that stayed, when known).
	ETag string
	// Outcome is "APPLIED" or "REFUSED"; Refusal, for a refused change,
	// the problem type the admin API answered. After is then the change
	// asked for (nil when the request was not JSON).
	Outcome, Refusal string
	At               time.Time
}

// Filter picks changes: of one queue (QueueID, or every queue), in
// [Since, Until), at most Limit, older than the cursor After (a page's
// Next).
type Filter struct {
	QueueID      string
	Since, Until time.Time
	Limit        int
	After        string
}

// Limits of a listing.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Cursor is a position in the newest-first listing: the change's time and
// id, which is how the store orders them.
type Cursor struct {
	At      time.Time
	EventID string
}

// Store keeps the changes (pg.DB).
type Store interface {
	// SaveChange stores c once (by its event id) and reports whether it
	// was new.
	SaveChange(ctx context.Context, c Change) (bool, error)
	// Changes lists the changes f picks, newest first, from after (nil:
	// the newest).
	Changes(ctx context.Context, f Filter, after *Cursor, limit int) ([]Change, error)
}

// ErrInvalidFilter refuses a listing's parameters.
var ErrInvalidFilter = errors.New("audit: invalid filter")

// Service records and lists the changes.
type Service struct{ store Store }

// New returns the service over store.
func New(store Store) *Service { return &Service{store: store} }

// Record stores the change an event reports; a redelivered event is a
// no-op. An event that is not a change of a valid queue by someone is
// refused (ErrInvalidEvent): it will never be one.
func (s *Service) Record(ctx context.Context, e *waitingroomv1.QueueChanged) (bool, error) {
	c, err := fromEvent(e)
	if err != nil {
		return false, err
	}
	return s.store.SaveChange(ctx, c)
}

// ErrInvalidEvent is an event that cannot be recorded, redelivered or not.
var ErrInvalidEvent = errors.New("audit: not a recordable QueueChanged")

func fromEvent(e *waitingroomv1.QueueChanged) (Change, error) {
	refused := e.GetOutcome() == waitingroomv1.QueueChangeOutcome_QUEUE_CHANGE_OUTCOME_REFUSED
	after := e.GetAfterJson()
	if e.GetEventId() == "" || !queue.ValidID(e.GetQueueId()) || e.GetOccurredAt() == nil || (after == "" && !refused) ||
		(after != "" && !json.Valid([]byte(after))) {
		return Change{}, fmt.Errorf("%w: event %q of queue %q", ErrInvalidEvent, e.GetEventId(), e.GetQueueId())
	}
	c := Change{
		EventID: e.GetEventId(), QueueID: e.GetQueueId(), Actor: e.GetUserId(), Address: e.GetClientAddress(),
		Action: strings.TrimPrefix(e.GetAction().String(), "QUEUE_CHANGE_ACTION_"),
		ETag:   e.GetEtag(), At: e.GetOccurredAt().AsTime(), Outcome: "APPLIED",
	}
	if after != "" {
		c.After = json.RawMessage(after)
	}
	if refused {
		c.Outcome, c.Refusal = "REFUSED", e.GetRefusal()
	}
	if b := e.GetBeforeJson(); b != "" {
		if !json.Valid([]byte(b)) {
			return Change{}, fmt.Errorf("%w: event %q: knobs before are not JSON", ErrInvalidEvent, e.GetEventId())
		}
		c.Before = json.RawMessage(b)
	}
	return c, nil
}

// Page is one page of a listing, newest first; Next, when not empty, is
// the After of the next page.
type Page struct {
	Changes []Change
	Next    string
}

// List returns the changes f picks, newest first, a page at a time.
func (s *Service) List(ctx context.Context, f Filter) (Page, error) {
	if f.QueueID != "" && !queue.ValidID(f.QueueID) {
		return Page{}, fmt.Errorf("%w: queueId", ErrInvalidFilter)
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit < 1 || f.Limit > MaxLimit {
		return Page{}, fmt.Errorf("%w: limit must be 1 to %d", ErrInvalidFilter, MaxLimit)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return Page{}, fmt.Errorf("%w: since must be before until", ErrInvalidFilter)
	}
	var after *Cursor
	if f.After != "" {
		c, err := parseCursor(f.After)
		if err != nil {
			return Page{}, err
		}
		after = &c
	}
	// One more than the page, to know whether there is a next one.
	cs, err := s.store.Changes(ctx, f, after, f.Limit+1)
	if err != nil {
		return Page{}, err
	}
	p := Page{Changes: cs}
	if len(cs) > f.Limit {
		p.Changes = cs[:f.Limit]
		last := p.Changes[f.Limit-1]
		p.Next = strconv.FormatInt(last.At.UnixMicro(), 10) + "." + last.EventID
	}
	return p, nil
}

func parseCursor(s string) (Cursor, error) {
	us, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return Cursor{}, fmt.Errorf("%w: after is not a cursor a page gave", ErrInvalidFilter)
	}
	return Cursor{At: time.UnixMicro(n).UTC(), EventID: id}, nil
}
