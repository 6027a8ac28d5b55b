package pg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// TestHistoryKeepsEachPartOnceAndAddsThemUp: the parts of two queues'
// minutes (two lines of one queue, a minute in two parts, every event
// delivered twice at once) are stored once each; a queue's minutes are
// its parts added up, histograms bucket by bucket and the longest wait the
// longest; the retention pass deletes the minutes before its cut-off.
func TestHistoryKeepsEachPartOnceAndAddsThemUp(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	hist := history.New(db)
	ctx := context.Background()
	m0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	part := func(id, q, line string, minute time.Time, arrivals uint64, hist []uint64, maxMs int64) *waitingroomv1.QueueMinute {
		var admitted uint64
		for _, n := range hist {
			admitted += n
		}
		return &waitingroomv1.QueueMinute{EventId: id, OccurredAt: timestamppb.New(minute.Add(time.Minute)), QueueId: q, LineId: line,
			Minute: timestamppb.New(minute), Arrivals: arrivals, Admitted: admitted, ExpiredUnused: 1, Left: 2, Abandoned: 3,
			WaitHistogram: hist, WaitMaxMs: maxMs}
	}
	parts := []*waitingroomv1.QueueMinute{
		part("a.0.1", "sale-a", "sale-a", m0, 10, []uint64{0, 4}, 120),
		part("a1.0.1", "sale-a", "sale-a:1", m0, 7, []uint64{1, 0, 0, 2}, 150),
		part("a.0.2", "sale-a", "sale-a", m0, 1, nil, 0), // the closed queue's last part
		part("a.2.3", "sale-a", "sale-a", m0.Add(2*time.Minute), 5, []uint64{0, 0, 0, 0, 0, 6}, 240),
		part("b.0.1", "sale-b", "sale-b", m0, 99, []uint64{9}, 90),
	}
	news := make([]bool, 2*len(parts))
	errs := make([]error, 2*len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		for k := range 2 {
			wg.Go(func() { news[2*i+k], errs[2*i+k] = hist.Record(ctx, p) })
		}
	}
	wg.Wait()
	fresh := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if news[i] {
			fresh++
		}
	}
	if rows := count(t, raw, `SELECT count(*) FROM queue_minutes`); fresh != len(parts) || rows != len(parts) {
		t.Fatalf("%d stored as new, %d rows, want %d each", fresh, rows, len(parts))
	}
	got, err := db.Minutes(ctx, "sale-a", m0, m0.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Start.Equal(m0) || !got[1].Start.Equal(m0.Add(2*time.Minute)) {
		t.Fatalf("minutes %+v, want %s and 2 minutes later", got, m0)
	}
	c := got[0].Counts
	if c.Arrivals != 18 || c.Admitted != 7 || c.ExpiredUnused != 3 || c.Left != 6 || c.Abandoned != 9 ||
		fmt.Sprint(c.WaitHistogram) != "[1 4 0 2]" || c.WaitMax != 150*time.Millisecond {
		t.Fatalf("first minute %+v, want 18 arrivals, 7 admitted, 3/6/9, histogram [1 4 0 2], longest 150ms", c)
	}
	if got[1].Counts.Arrivals != 5 || got[1].Counts.Admitted != 6 {
		t.Fatalf("third minute %+v, want 5 arrivals, 6 admitted", got[1].Counts)
	}

	// Not recordable: said so, nothing stored.
	for name, e := range map[string]*waitingroomv1.QueueMinute{
		"no id":        part("", "sale-a", "sale-a", m0, 1, nil, 0),
		"bad queue id": part("x.1", "Sale A", "Sale A", m0, 1, nil, 0),
		"no line":      part("x.2", "sale-a", "", m0, 1, nil, 0),
		"no minute":    {EventId: "x.3", QueueId: "sale-a", LineId: "sale-a"},
		"histogram":    part("x.4", "sale-a", "sale-a", m0, 1, make([]uint64, 73), 0),
	} {
		if _, err := hist.Record(ctx, e); err == nil {
			t.Errorf("%s: recorded", name)
		}
	}
	if rows := count(t, raw, `SELECT count(*) FROM queue_minutes`); rows != len(parts) {
		t.Fatalf("%d rows after the refused events, want %d", rows, len(parts))
	}

	// Retention: everything before m0 + 1 minute goes (both queues' first
	// minute: 4 rows), the rest stays.
	if n, err := db.PruneHistory(ctx, m0.Add(time.Minute), 2); err != nil || n != 4 {
		t.Fatalf("pruned %d, %v; want 4", n, err)
	}
	if rows := count(t, raw, `SELECT count(*) FROM queue_minutes`); rows != 1 {
		t.Fatalf("%d rows after the retention pass, want 1", rows)
	}
}

// TestOrdersAreRolledUpPerQueueAndMinute: the orders and failures of two
// queues in the outbox are counted per queue and minute of their time; a
// second pass (another replica's) writes the same counts, and one after
// more orders counts them too.
func TestOrdersAreRolledUpPerQueueAndMinute(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	a := mustUpsert(t, db, order.Product{ID: "pa-" + t.Name()[:8], QueueID: "roll-a", Name: "A", Stock: 100, PriceCents: 100})
	b := mustUpsert(t, db, order.Product{ID: "pb-" + t.Name()[:8], QueueID: "roll-b", Name: "B", Stock: 100, PriceCents: 100})
	start := time.Now().UTC().Truncate(time.Minute)
	place := func(p order.Product, n int) {
		t.Helper()
		if _, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, n, 1), Event: createdEvent}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		place(a, i)
	}
	place(b, 10)
	for i := range 2 {
		if _, err := db.AddEvent(ctx, order.Failed{QueueID: "roll-a", UserID: "u", TokenID: fmt.Sprintf("tf-%d", i), OrderID: fmt.Sprintf("of-%d", i),
			Reason: order.ReasonSoldOut, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	sums := func(q string) (created, failed int64) {
		t.Helper()
		ms, err := db.Minutes(ctx, q, start.Add(-time.Hour), start.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			created, failed = created+m.OrdersCreated, failed+m.OrdersFailed
		}
		return created, failed
	}
	for pass := range 2 {
		if _, err := db.RollUpOrders(ctx, start.Add(-history.RollUpWindow), start.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if c, f := sums("roll-a"); c != 3 || f != 2 {
			t.Fatalf("pass %d: roll-a %d created, %d failed; want 3 and 2", pass, c, f)
		}
		if c, f := sums("roll-b"); c != 1 || f != 0 {
			t.Fatalf("pass %d: roll-b %d created, %d failed; want 1 and 0", pass, c, f)
		}
	}
	if rows := count(t, raw, `SELECT count(*) FROM order_minutes WHERE queue_id IN ('roll-a', 'roll-b')`); rows < 2 || rows > 4 {
		t.Fatalf("%d order minutes for 2 queues within a minute or two, want 2 to 4", rows)
	}
	place(a, 20)
	if _, err := db.RollUpOrders(ctx, start.Add(-history.RollUpWindow), start.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c, _ := sums("roll-a"); c != 4 {
		t.Fatalf("roll-a %d created after a fourth order, want 4", c)
	}
}
