package pg_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

func TestDatabaseCutIsUnavailableThenRecovers(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresURL(t)
	raw := rawDB(t, dsn) // direct, not through the proxy
	proxy := testenv.StartProxy(t, testenv.PostgresAddr(t, dsn))
	o := testOptions(t)
	o.TxTimeout = 2 * time.Second
	db := open(t, testenv.PostgresURLVia(t, dsn, proxy.Addr()), o)
	ctx := context.Background()
	p := mustUpsert(t, db, product("p", "q1", 100))
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 0, 1), Event: createdEvent}); err != nil {
		t.Fatalf("order before the cut: %v", err)
	}

	proxy.Cut()
	start := time.Now()
	_, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 1, 1), Event: createdEvent})
	took := time.Since(start)
	if !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("order while cut: %v, want ErrUnavailable", err)
	}
	// The TxTimeout context fires at 2s at the latest; allow scheduling slack.
	if took > o.TxTimeout+time.Second {
		t.Fatalf("order while cut took %v, want it bounded by TxTimeout %v", took, o.TxTimeout)
	}
	t.Logf("order while cut failed after %v: %v", took, err)
	if err := db.Ping(ctx); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("Ping while cut: %v, want ErrUnavailable", err)
	}
	if _, _, err := db.OrderByToken(ctx, "token-0"); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("OrderByToken while cut: %v, want ErrUnavailable", err)
	}
	if n := count(t, raw, `SELECT stock FROM products WHERE id = 'p'`); n != 99 {
		t.Fatalf("stock %d after the failed order, want 99", n)
	}

	proxy.Restore()
	// The pool drops its dead connections by itself: no reopening. Allow a
	// few attempts for a connection that died silently while idle.
	deadline := time.Now().Add(10 * time.Second)
	attempts := 0
	for {
		attempts++
		_, err = db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 2, 1), Event: createdEvent})
		if err == nil {
			break
		}
		if !errors.Is(err, order.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("order after Restore (attempt %d): %v", attempts, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("order after Restore succeeded at attempt %d", attempts)
	if n := count(t, raw, `SELECT stock FROM products WHERE id = 'p'`); n != 98 {
		t.Fatalf("stock %d, want 98", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders`); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
}

func TestCanceledContextPassesThrough(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	p := mustUpsert(t, db, product("p", "q1", 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 1, 1), Event: createdEvent})
	if !errors.Is(err, context.Canceled) || errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("PlaceOrder with a canceled context: %v, want context.Canceled and not ErrUnavailable", err)
	}
	if got, _ := db.Product(context.Background(), "p"); got.Stock != 1 {
		t.Fatalf("stock %d, want 1", got.Stock)
	}
}

// isCommit matches a transaction's COMMIT (pgx sends it as a simple query).
func isCommit(req []byte) bool {
	return bytes.Contains(bytes.ToLower(req), []byte("commit"))
}

// lateCommits are the two ways a COMMIT comes late: its answer held, or
// the COMMIT itself received late.
var lateCommits = []struct {
	name  string
	fault func(p *testenv.Proxy, d time.Duration)
}{
	{"answer held", func(p *testenv.Proxy, d time.Duration) { p.HoldNextReply(isCommit, d) }},
	{"commit received late", func(p *testenv.Proxy, d time.Duration) { p.DelayRequests(isCommit, d, 1) }},
}

// lateCommitRig is a database reached through a proxy that can hold its
// COMMIT (late, TxTimeout 1 s), the same database unhindered (db, the
// failure path's) and a plain connection to check it (raw).
func lateCommitRig(t *testing.T) (late, db *pg.DB, raw *sql.DB, proxy *testenv.Proxy) {
	t.Helper()
	dsn := testenv.PostgresURL(t)
	raw = rawDB(t, dsn)
	proxy = testenv.StartProxy(t, testenv.PostgresAddr(t, dsn))
	o := testOptions(t)
	o.TxTimeout = time.Second
	return open(t, testenv.PostgresURLVia(t, dsn, proxy.Addr()), o), open(t, dsn, testOptions(t)), raw, proxy
}

// TestLateCommitResolvesTheAttemptOnce: an order transaction whose COMMIT
// reaches the database but whose answer does not come back in time (held
// past TxTimeout), or whose COMMIT itself reaches the database late, after
// the caller gave up. The caller then records the attempt failed
// (AddEvent of its OrderFailed, from another connection): the outbox takes
// one event per attempt, so exactly one of the two stands, and a committed
// order is never also reported failed (which would give its token back
// for a second order).
func TestLateCommitResolvesTheAttemptOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range lateCommits {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			late, db, raw, proxy := lateCommitRig(t)
			ctx := context.Background()
			p := mustUpsert(t, db, product("p", "q1", 10))

			ord := newOrder(p, 1, 1)
			ord.ID = "order-late"
			tc.fault(proxy, 3*time.Second)
			_, err := late.PlaceOrder(ctx, order.Placement{Order: ord, Event: createdEvent})
			if err == nil {
				t.Fatalf("PlaceOrder answered in time; the fault did not strike (held %d, delayed %d)", proxy.Held(), proxy.Delayed())
			}
			t.Logf("PlaceOrder: %v", err)
			failed := order.Failed{QueueID: "q1", UserID: ord.UserID, TokenID: ord.EntryTokenID, OrderID: ord.ID,
				Reason: order.ReasonTimeout, Restorable: true, RemainingTTL: time.Minute, At: time.Now()}
			added, aerr := db.AddEvent(ctx, failed)

			orders := count(t, raw, `SELECT count(*) FROM orders WHERE id = 'order-late'`)
			failures := count(t, raw, `SELECT count(*) FROM outbox WHERE type = 'waitingroom.v1.OrderFailed' AND attempt = 'order-late'`)
			creates := count(t, raw, `SELECT count(*) FROM outbox WHERE type = 'waitingroom.v1.OrderCreated' AND attempt = 'order-late'`)
			stock := count(t, raw, `SELECT stock FROM products WHERE id = 'p'`)
			t.Logf("AddEvent: %v %v; orders %d, OrderCreated %d, OrderFailed %d, stock %d", added, aerr, orders, creates, failures, stock)
			switch {
			case orders == 1:
				if !errors.Is(aerr, order.ErrOrderPlaced) || creates != 1 || failures != 0 || stock != 9 {
					t.Fatalf("the order committed, and AddEvent %v %v, OrderCreated %d, OrderFailed %d, stock %d; want ErrOrderPlaced, 1, 0, 9",
						added, aerr, creates, failures, stock)
				}
			case orders == 0:
				if aerr != nil || !added || creates != 0 || failures != 1 || stock != 10 {
					t.Fatalf("no order, and AddEvent %v %v, OrderCreated %d, OrderFailed %d, stock %d; want added, 0, 1, 10",
						added, aerr, creates, failures, stock)
				}
			default:
				t.Fatalf("%d orders with one id", orders)
			}
			// A late commit of this very attempt can no longer land: a
			// second try of it resolves as the first did.
			if _, err := db.PlaceOrder(ctx, order.Placement{Order: ord, Event: createdEvent}); err == nil {
				t.Fatalf("the attempt ordered again")
			}
			if n := count(t, raw, `SELECT count(*) FROM outbox WHERE attempt = 'order-late'`); n != 1 {
				t.Fatalf("%d events resolve the attempt, want 1", n)
			}
		})
	}
}

// An order attempt recorded failed before its transaction reaches the
// database (the reaper, after its lease ran out) does not commit: the
// order is refused with ErrAttemptFailed and takes nothing.
func TestAttemptRecordedFailedFirstDoesNotCommit(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	p := mustUpsert(t, db, product("p", "q1", 10))
	ord := newOrder(p, 1, 1)
	ord.ID = "order-reaped"
	if added, err := db.AddEvent(ctx, order.Failed{QueueID: "q1", UserID: ord.UserID, TokenID: ord.EntryTokenID, OrderID: ord.ID,
		Reason: order.ReasonAbandoned, Restorable: true, RemainingTTL: time.Minute, At: time.Now()}); err != nil || !added {
		t.Fatalf("AddEvent: %v %v", added, err)
	}
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: ord, Event: createdEvent}); !errors.Is(err, order.ErrAttemptFailed) {
		t.Fatalf("PlaceOrder of the reaped attempt: %v, want ErrAttemptFailed", err)
	}
	if n, s := count(t, raw, `SELECT count(*) FROM orders`), count(t, raw, `SELECT stock FROM products WHERE id = 'p'`); n != 0 || s != 10 {
		t.Fatalf("%d orders, stock %d; want 0 and 10", n, s)
	}
}

// A shared transaction whose COMMIT is answered late, or received late:
// every order of the batch is told it may have committed, and recording
// each attempt failed then resolves them all as one, as they were
// committed: all stand (ErrOrderPlaced, stock taken) or none does (the
// OrderFailed stored, stock kept).
func TestLateCommitOfABatchResolvesEveryAttemptAlike(t *testing.T) {
	t.Parallel()
	for _, tc := range lateCommits {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			late, db, raw, proxy := lateCommitRig(t)
			ctx := context.Background()
			p := mustUpsert(t, db, product("p", "q1", 10))

			ps := make([]order.Placement, 5)
			for i := range ps {
				ord := newOrder(p, i, 1)
				ord.ID = fmt.Sprintf("order-late-%d", i)
				ps[i] = order.Placement{Order: ord, Event: createdEvent}
			}
			tc.fault(proxy, 3*time.Second)
			_, errs := queued(t, late, "q1", "p", ps)
			placed := 0
			for i, err := range errs {
				if err == nil {
					t.Fatalf("order %d answered in time; the fault did not strike (held %d, delayed %d)", i, proxy.Held(), proxy.Delayed())
				}
				if errors.Is(err, order.ErrNothingStored) {
					t.Fatalf("order %d: %v; the COMMIT was out, so it may have committed", i, err)
				}
				ord := ps[i].Order
				_, aerr := db.AddEvent(ctx, order.Failed{QueueID: "q1", UserID: ord.UserID, TokenID: ord.EntryTokenID, OrderID: ord.ID,
					Reason: order.ReasonTimeout, Restorable: true, RemainingTTL: time.Minute, At: time.Now()})
				switch {
				case errors.Is(aerr, order.ErrOrderPlaced):
					placed++
				case aerr != nil:
					t.Fatalf("AddEvent of order %d: %v", i, aerr)
				}
			}
			orders, stock := count(t, raw, `SELECT count(*) FROM orders`), count(t, raw, `SELECT stock FROM products WHERE id = 'p'`)
			creates := count(t, raw, `SELECT count(*) FROM outbox WHERE type = 'waitingroom.v1.OrderCreated'`)
			failures := count(t, raw, `SELECT count(*) FROM outbox WHERE type = 'waitingroom.v1.OrderFailed'`)
			t.Logf("%d of 5 resolved placed; orders %d, OrderCreated %d, OrderFailed %d, stock %d", placed, orders, creates, failures, stock)
			switch placed {
			case 5:
				if orders != 5 || creates != 5 || failures != 0 || stock != 5 {
					t.Fatalf("all committed, yet orders %d, OrderCreated %d, OrderFailed %d, stock %d; want 5, 5, 0, 5", orders, creates, failures, stock)
				}
			case 0:
				if orders != 0 || creates != 0 || failures != 5 || stock != 10 {
					t.Fatalf("none committed, yet orders %d, OrderCreated %d, OrderFailed %d, stock %d; want 0, 0, 5, 10", orders, creates, failures, stock)
				}
			default:
				t.Fatalf("%d of one transaction's 5 orders resolved placed", placed)
			}
		})
	}
}
