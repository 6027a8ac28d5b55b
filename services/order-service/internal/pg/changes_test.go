package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
)

// TestTheAuditTrailKeepsEachChangeOnceNewestFirst: 30 changes of two
// queues, each event recorded twice at once (a redelivery racing the
// first delivery): 30 rows. Listing every queue, one queue, a time window
// and pages of 7 gives the changes newest first, each once, and the
// pages join without a gap or a repeat. Bad filters and events are
// refused.
func TestTheAuditTrailKeepsEachChangeOnceNewestFirst(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	trail := audit.New(db)
	ctx := context.Background()
	base := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	event := func(i int) *waitingroomv1.QueueChanged {
		q := "sale-a"
		if i%3 == 0 {
			q = "sale-b"
		}
		before := ""
		if i > 1 {
			before = fmt.Sprintf(`{"admissionRatePerSec": %d}`, i-1)
		}
		return &waitingroomv1.QueueChanged{EventId: fmt.Sprintf("%s:1:v%d.changed", q, i), OccurredAt: timestamppb.New(base.Add(time.Duration(i) * time.Second)),
			QueueId: q, UserId: "ann@ops", Action: waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CONFIGURED,
			BeforeJson: before, AfterJson: fmt.Sprintf(`{"admissionRatePerSec": %d}`, i), ClientAddress: "203.0.113.7", Etag: fmt.Sprintf(`"%d"`, i)}
	}
	const n = 30
	news := make([]bool, 2*n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		for k := range 2 {
			wg.Go(func() { news[2*(i-1)+k], errs[2*(i-1)+k] = trail.Record(ctx, event(i)) })
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
	if fresh != n || count(t, raw, `SELECT count(*) FROM queue_changes`) != n {
		t.Fatalf("%d recorded as new, %d rows; want %d and %d", fresh, count(t, raw, `SELECT count(*) FROM queue_changes`), n, n)
	}

	all, err := trail.List(ctx, audit.Filter{Limit: 1000})
	if err != nil || len(all.Changes) != n || all.Next != "" {
		t.Fatalf("every change: %d, next %q, %v; want %d on one page", len(all.Changes), all.Next, err, n)
	}
	for i, c := range all.Changes {
		if want := base.Add(time.Duration(n-i) * time.Second); !c.At.Equal(want) {
			t.Fatalf("change %d at %v, want %v (newest first)", i, c.At, want)
		}
	}
	first := all.Changes[n-1]
	if first.Before != nil || string(first.After) != `{"admissionRatePerSec": 1}` || first.Actor != "ann@ops" || first.Address != "203.0.113.7" || first.Action != "CONFIGURED" {
		t.Errorf("the oldest change: %+v (before %s, after %s)", first, first.Before, first.After)
	}
	b, err := trail.List(ctx, audit.Filter{QueueID: "sale-b"})
	if err != nil || len(b.Changes) != n/3 {
		t.Fatalf("sale-b's changes: %d, %v; want %d", len(b.Changes), err, n/3)
	}
	window, err := trail.List(ctx, audit.Filter{Since: base.Add(10 * time.Second), Until: base.Add(20 * time.Second)})
	if err != nil || len(window.Changes) != 10 {
		t.Fatalf("changes in [10 s, 20 s): %d, %v; want 10", len(window.Changes), err)
	}
	seen := map[string]bool{}
	pages := 0
	for after := ""; ; pages++ {
		p, err := trail.List(ctx, audit.Filter{Limit: 7, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Changes {
			if seen[c.EventID] {
				t.Fatalf("%s on two pages", c.EventID)
			}
			seen[c.EventID] = true
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if len(seen) != n || pages != 4 {
		t.Fatalf("pages of 7: %d changes on %d pages, want %d on 5", len(seen), pages+1, n)
	}

	for _, f := range []audit.Filter{{Limit: 1001}, {Limit: -1}, {QueueID: "Bad Queue"}, {After: "nope"},
		{Since: base.Add(time.Hour), Until: base}} {
		if _, err := trail.List(ctx, f); !errors.Is(err, audit.ErrInvalidFilter) {
			t.Errorf("filter %+v: %v, want ErrInvalidFilter", f, err)
		}
	}
	bad := event(1)
	bad.AfterJson = "not json"
	if _, err := trail.Record(ctx, bad); !errors.Is(err, audit.ErrInvalidEvent) {
		t.Errorf("an event with no knobs: %v, want ErrInvalidEvent", err)
	}
}
