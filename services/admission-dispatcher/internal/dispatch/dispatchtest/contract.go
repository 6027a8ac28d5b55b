package dispatchtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// NewStoreFunc makes an empty store for one case, with its Harness.
type NewStoreFunc func(t *testing.T) (dispatch.Store, Harness)

// Harness is what the contract needs beyond dispatch.Store: queues made,
// people let in and queues closed the way the gateway does, and the
// store's clock. Each method fails the test on an error.
type Harness interface {
	// Configure creates queue q with c, or changes it to c (an
	// operator's PUT).
	Configure(t *testing.T, q string, c queue.Config)
	// Enter gives user a place in q's line, or in its pre-queue before
	// its start time.
	Enter(t *testing.T, q, user string)
	// Close stops entries to q and drops its line.
	Close(t *testing.T, q string)
	// LoseLineCopy deletes line's copy of q's config, as a config write
	// whose writer died before copying it leaves the line.
	LoseLineCopy(t *testing.T, q string, line int)
	// Now is the store's clock.
	Now(t *testing.T) time.Time
	// Wait lets d pass on the store's clock.
	Wait(t *testing.T, d time.Duration)
}

// Harness is the fake's Harness: Wait advances its clock, without sleeping.
func (s *Store) Harness() Harness { return fakeHarness{s} }

type fakeHarness struct{ s *Store }

func (f fakeHarness) Configure(t *testing.T, q string, c queue.Config) {
	t.Helper()
	if err := f.s.Configure(q, c); err != nil {
		t.Fatal(err)
	}
}

func (f fakeHarness) Enter(t *testing.T, q, user string) {
	t.Helper()
	if err := f.s.Enter(q, user); err != nil {
		t.Fatal(err)
	}
}

func (f fakeHarness) Close(t *testing.T, q string) {
	t.Helper()
	if _, err := f.s.Close(q); err != nil {
		t.Fatal(err)
	}
}

func (f fakeHarness) LoseLineCopy(_ *testing.T, q string, line int) { f.s.LoseLineCopy(q, line) }
func (f fakeHarness) Now(*testing.T) time.Time                      { return f.s.Now() }
func (f fakeHarness) Wait(_ *testing.T, d time.Duration)            { f.s.Advance(d) }

// RunStoreContract states what the dispatcher relies on from dispatch.Store,
// in the three groups the port splits into: leases (who leads which queue,
// fenced by epochs), ticks (admission and the draw) and the outbox (the
// relay's reads, claims and acknowledgements). Every case starts from an
// empty store and runs in parallel with the others; times are the store's
// own clock, which real stores let pass in real time, so the cases wait
// seconds at most.
func RunStoreContract(t *testing.T, newStore NewStoreFunc) {
	t.Run("Leases", func(t *testing.T) { RunLeasesContract(t, newStore) })
	t.Run("Ticks", func(t *testing.T) { RunTicksContract(t, newStore) })
	t.Run("Outbox", func(t *testing.T) { RunOutboxContract(t, newStore) })
}

// tickLen is the tick the cases' issue calls name: the batch cap is
// counted in it.
const tickLen = 10 * time.Millisecond

// settle is how long the cases wait between two ticks that admit: at
// 1000/s it is credit for 50, and the batch cap is 51.
const settle = 50 * time.Millisecond

// caseConfig is a queue of the cases: open, 1000/s, tokens active at once.
func caseConfig(mut func(*queue.Config)) queue.Config {
	c := queue.DefaultConfig()
	c.AdmissionRatePerSec, c.MaxAdmissionRatePerSec, c.ActivationSpreadMs = 1000, 1000, 0
	if mut != nil {
		mut(&c)
	}
	return c
}

// newQueue makes a queue of its own for the case, with its config changed
// by mut.
func newQueue(t *testing.T, h Harness, mut func(*queue.Config)) string {
	t.Helper()
	q := queuetest.ID(t)
	h.Configure(t, q, caseConfig(mut))
	return q
}

// enter lets n people into q one after the other and returns their ids in
// that order.
func enter(t *testing.T, h Harness, q string, n int) []string {
	t.Helper()
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
		h.Enter(t, q, users[i])
	}
	return users
}

// lead takes q's lease for owner, which must be free.
func lead(t *testing.T, s dispatch.Store, q, owner string, ttl time.Duration) int64 {
	t.Helper()
	r := s.AcquireLeases(context.Background(), owner, []string{q}, ttl)[0]
	if r.Err != nil || r.Epoch <= 0 {
		t.Fatalf("%s takes the free lease of %s: epoch %d %v, want one", owner, q, r.Epoch, r.Err)
	}
	return r.Epoch
}

// grants makes n fresh grants.
func grants(t *testing.T, n int) []queue.Grant {
	t.Helper()
	g, err := queue.Grants(n)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// issue runs one tick of line of q at epoch with the grants given.
func issue(s dispatch.Store, q string, line int, epoch int64, g []queue.Grant, mut func(*queue.IssueRequest)) queue.IssueReply {
	r := queue.IssueRequest{Epoch: epoch, Tick: tickLen, Grants: g}
	if mut != nil {
		mut(&r)
	}
	return s.IssueAll(context.Background(), []queue.IssueCall{{QueueID: q, Line: line, IssueRequest: r}})[0]
}

// mustIssue is issue that fails the test on an error.
func mustIssue(t *testing.T, s dispatch.Store, q string, epoch int64, g []queue.Grant) queue.IssueResult {
	t.Helper()
	r := issue(s, q, 0, epoch, g, nil)
	if r.Err != nil {
		t.Fatalf("issue %s at epoch %d: %v", q, epoch, r.Err)
	}
	return r.IssueResult
}

// newEvents reads what id's outbox got since the last call for the case
// (each case's reader is a consumer of its own), without acknowledging.
func newEvents(t *testing.T, s dispatch.Store, id string) []queue.Event {
	t.Helper()
	ctx := context.Background()
	if err := s.EnsureOutboxGroup(ctx, id); err != nil {
		t.Fatalf("outbox group %s: %v", id, err)
	}
	b, err := s.ReadOutboxes(ctx, "reader-"+t.Name(), 0, []queue.OutboxRead{{QueueID: id}})
	if err != nil || b[0].Err != nil {
		t.Fatalf("read outbox %s: %v %v", id, err, b[0].Err)
	}
	return b[0].Events
}

// outboxLen is the number of events in id's outbox.
func outboxLen(t *testing.T, s dispatch.Store, id string) int64 {
	t.Helper()
	n, err := s.OutboxLens(context.Background(), []string{id})
	if err != nil {
		t.Fatalf("outbox length %s: %v", id, err)
	}
	return n[id]
}

func users(evs []queue.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.UserID
	}
	return out
}

func types(evs []queue.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
