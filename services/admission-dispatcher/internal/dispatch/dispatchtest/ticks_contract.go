package dispatchtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// RunTicksContract states what the dispatcher's admission relies on: a
// tick admits the head of the line in the order people came, never more
// than its grants, its credit (the rate over the time since the last
// tick), its catch-up cap, the outbox bound or maxActive allow; a fenced
// off leader admits nobody; every admission and no-show is an event in
// the outbox; and the draw places a pre-queue in drawn order ahead of
// everyone who came after the start (draw_contract.go).
func RunTicksContract(t *testing.T, newStore NewStoreFunc) {
	queuetest.RunContract(t, newStore, []queuetest.Case[dispatch.Store, Harness]{
		{Name: "FirstTickAdmitsNobodyAndStartsTheCredit", Run: firstTick},
		{Name: "TicksAdmitTheHeadInEnterOrderWithTheirGrants", Run: enterOrder},
		{Name: "TickIsBoundedByGrantsRateCatchUpAndLine", Run: bounded},
		{Name: "CatchUpCarriesNoCreditOver", Run: catchUpCarriesNothing},
		{Name: "StaleEpochIssuesNothing", Run: staleEpoch},
		{Name: "MaxActiveCapsSlotsUntilTheyExpire", Run: maxActive},
		{Name: "PausedQueueAdmitsNobodyUntilReopened", Run: paused},
		{Name: "OutboxBoundHoldsAdmissionUntilAcknowledged", Run: outboxBound},
		{Name: "AdaptiveRateStaysWithinItsRange", Run: adaptive},
		{Name: "ClosedQueueIsGoneOnceItsSlotsAndEventsAre", Run: gone},
		{Name: "LinesAdmitTheirOwnPeopleWithLineTokens", Run: linesAdmit},
		{Name: "FencedOffLeaderIssuesOnNoFollowedLine", Run: fencedLines},
		{Name: "LinesTickOnTheQueuesConfigCopiedToThem", Run: lineCopies},
		{Name: "DrawPlacesThePreQueueInDrawnOrderAheadOfLaterEntrants", Run: drawOrder},
		{Name: "SplitQueueDrawIsAnnouncedOnceWithTheQueuesTotals", Run: drawLines},
		{Name: "DrawStepsAreFencedAndFindNothingWithoutADraw", Run: drawNothing},
	})
}

// waiting is how many wait in q (all its lines).
func waiting(t *testing.T, s dispatch.Store, q string) int64 {
	t.Helper()
	_, st, err := s.Config(context.Background(), q)
	if err != nil {
		t.Fatalf("config %s: %v", q, err)
	}
	return st.Waiting
}

func firstTick(t *testing.T, s dispatch.Store, h Harness) {
	q := newQueue(t, h, nil)
	enter(t, h, q, 5)
	e := lead(t, s, q, "a", 10*time.Second)
	r := mustIssue(t, s, q, e, grants(t, 5))
	if r.Issued != 0 || r.Waiting != 5 || r.Rate != 1000 || r.Mode != queue.AdmissionFixed || r.Interval != 0 || r.ConfigVersion <= 0 {
		t.Fatalf("first tick: %+v, want nobody issued, 5 waiting, rate 1000 FIXED, interval 0, a config version", r)
	}
	if n := outboxLen(t, s, q); n != 0 {
		t.Fatalf("outbox after the first tick: %d events, want 0", n)
	}
}

func enterOrder(t *testing.T, s dispatch.Store, h Harness) {
	q := newQueue(t, h, nil)
	want := enter(t, h, q, 8)
	e := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, e, nil)
	var given []queue.Grant
	for _, tc := range []struct{ grants, issued, waiting int }{{3, 3, 5}, {3, 3, 2}, {10, 2, 0}} {
		h.Wait(t, settle)
		g := grants(t, tc.grants)
		r := mustIssue(t, s, q, e, g)
		if r.Issued != tc.issued || r.Waiting != int64(tc.waiting) {
			t.Fatalf("tick with %d grants: issued %d, %d waiting; want %d, %d", tc.grants, r.Issued, r.Waiting, tc.issued, tc.waiting)
		}
		given = append(given, g[:tc.issued]...)
	}
	evs := newEvents(t, s, q)
	if got := users(evs); !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want the enter order %v", got, want)
	}
	ttl := time.Duration(caseConfig(nil).TokenTTLSeconds) * time.Second
	for i, ev := range evs {
		g := given[i]
		if ev.Type != queue.EventTokenIssued || ev.QueueID != q || ev.TokenID != g.TokenID || ev.ID != g.TokenID+".issued" ||
			ev.ExpiresAt.Sub(ev.ActivateAt) != ttl || !ev.ActivateAt.Equal(ev.OccurredAt) || (i > 0 && ev.Seq <= evs[i-1].Seq) {
			t.Fatalf("event %d: %+v; want TokenIssued of %s with grant %d's token, %v to live from the tick, after seq %d",
				i, ev, q, i, ttl, evs[max(i-1, 0)].Seq)
		}
	}
	for _, u := range want[:2] {
		h.Enter(t, q, u) // admitted: they keep their tokens, no second place
	}
	if _, st, err := s.Config(context.Background(), q); err != nil || st.IssuedTotal != 8 || st.Active != 8 || st.Waiting != 0 {
		t.Fatalf("stats: %+v %v, want 8 issued, 8 active, nobody waiting", st, err)
	}
}

func bounded(t *testing.T, s dispatch.Store, h Harness) {
	// Ten ticks of tickLen are a tenth of a second: the span a tick makes
	// up is a second all the same (queue.CatchUpSpan).
	catchUp := queue.BatchCap(10, queue.CatchUpSpan(tickLen)) // ceil(10/s x 1 s) + 1
	for _, tc := range []struct {
		name            string
		rate, share     float64
		tick, wait      time.Duration
		people, grants  int
		atLeast, atMost int
	}{
		{name: "by its grants", rate: 1000, tick: tickLen, wait: settle, people: 20, grants: 3, atLeast: 3, atMost: 3},
		{name: "by the line", rate: 1000, tick: tickLen, wait: settle, people: 4, grants: 20, atLeast: 4, atMost: 4},
		// 10/s for a second: 10 (11 if the second took a tenth longer).
		{name: "by the rate", rate: 10, tick: 100 * time.Millisecond, wait: time.Second, people: 20, grants: 20, atLeast: 10, atMost: 11},
		// A gap of 130 ticks (1.3 s) catches up a second.
		{name: "by the catch-up cap", rate: 10, tick: tickLen, wait: 1300 * time.Millisecond, people: 20, grants: 20,
			atLeast: catchUp, atMost: catchUp},
		{name: "by the line's share of the rate", rate: 1000, share: 0.01, tick: tickLen, wait: 1300 * time.Millisecond, people: 20,
			grants: 20, atLeast: catchUp, atMost: catchUp},
		// A slow tick of 50 ms ticks (800 ms, Redis busy) makes up all its
		// time, not ten ticks' 500 ms: 80 to 101 (the wait may run long).
		{name: "by its own span at 50 ms ticks", rate: 100, tick: 50 * time.Millisecond, wait: 800 * time.Millisecond,
			people: 200, grants: 200, atLeast: 80, atMost: queue.BatchCap(100, time.Second)},
	} {
		q := newQueue(t, h, func(c *queue.Config) { c.AdmissionRatePerSec = tc.rate })
		enter(t, h, q, tc.people)
		e := lead(t, s, q, "a", 10*time.Second)
		tick := func(g []queue.Grant) queue.IssueReply {
			return issue(s, q, 0, e, g, func(r *queue.IssueRequest) { r.Tick, r.Share = tc.tick, tc.share })
		}
		if r := tick(nil); r.Err != nil {
			t.Fatalf("%s: first tick: %v", tc.name, r.Err)
		}
		h.Wait(t, tc.wait)
		r := tick(grants(t, tc.grants))
		if r.Err != nil || r.Issued < tc.atLeast || r.Issued > tc.atMost || r.Waiting != int64(tc.people-r.Issued) {
			t.Fatalf("%s: issued %d, %d waiting, %v; want %d to %d issued of %d", tc.name, r.Issued, r.Waiting, r.Err, tc.atLeast, tc.atMost, tc.people)
		}
	}
}

func catchUpCarriesNothing(t *testing.T, s dispatch.Store, h Harness) {
	// 10/s: a tick after a gap of 1.5 s catches up a second, ceil(10/s x
	// 1 s) + 1, and carries nothing of the other half second over: the
	// next tick admits nobody until another tenth of a second passed.
	q := newQueue(t, h, func(c *queue.Config) { c.AdmissionRatePerSec = 10 })
	enter(t, h, q, 20)
	e := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, e, nil)
	h.Wait(t, 1500*time.Millisecond)
	for _, want := range []int{queue.BatchCap(10, queue.CatchUpSpan(tickLen)), 0} {
		if r := mustIssue(t, s, q, e, grants(t, 20)); r.Issued != want {
			t.Fatalf("issued %d, want %d", r.Issued, want)
		}
	}
}

func staleEpoch(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, nil)
	enter(t, h, q, 5)
	ea := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, ea, nil)
	if err := s.ReleaseLease(ctx, q, "a", ea); err != nil {
		t.Fatal(err)
	}
	eb := lead(t, s, q, "b", 10*time.Second)
	h.Wait(t, settle)
	for _, epoch := range []int64{ea, 0, eb + 1} {
		if r := issue(s, q, 0, epoch, grants(t, 5), nil); !errors.Is(r.Err, queue.ErrStaleEpoch) || r.Issued != 0 {
			t.Fatalf("tick at epoch %d (the queue's is %d): %+v, want ErrStaleEpoch", epoch, eb, r)
		}
	}
	if n, w := outboxLen(t, s, q), waiting(t, s, q); n != 0 || w != 5 {
		t.Fatalf("after the refused ticks: %d events, %d waiting; want 0, 5", n, w)
	}
	if r := mustIssue(t, s, q, eb, grants(t, 5)); r.Issued != 5 {
		t.Fatalf("the new leader's tick: issued %d, want 5 (the queue's credit since a's tick)", r.Issued)
	}
}

func maxActive(t *testing.T, s dispatch.Store, h Harness) {
	q := newQueue(t, h, func(c *queue.Config) { c.MaxActive, c.TokenTTLSeconds = 2, 1 })
	people := enter(t, h, q, 5)
	e := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, e, nil)
	for _, tc := range []struct {
		wait                  time.Duration
		issued, expired, left int
		why                   string
	}{
		{settle, 2, 0, 3, "two slots"},
		{settle, 0, 0, 3, "both slots held"},
		{time.Second + 100*time.Millisecond, 2, 2, 1, "the two tokens unused past their ttl free their slots"},
	} {
		h.Wait(t, tc.wait)
		r := mustIssue(t, s, q, e, grants(t, 5))
		if r.Issued != tc.issued || r.Expired != tc.expired || r.Waiting != int64(tc.left) {
			t.Fatalf("%s: issued %d, expired %d, %d waiting; want %d, %d, %d", tc.why, r.Issued, r.Expired, r.Waiting, tc.issued, tc.expired, tc.left)
		}
	}
	evs := newEvents(t, s, q)
	wantTypes := []string{queue.EventTokenIssued, queue.EventTokenIssued, queue.EventTokenExpired, queue.EventTokenExpired,
		queue.EventTokenIssued, queue.EventTokenIssued}
	if !slices.Equal(types(evs), wantTypes) || !slices.Equal(users(evs), []string{people[0], people[1], people[0], people[1], people[2], people[3]}) {
		t.Fatalf("events %v of %v, want %v of the first four, the first two expiring", types(evs), users(evs), wantTypes)
	}
	for i, ev := range evs[2:4] {
		if ev.TokenID != evs[i].TokenID || ev.ID != ev.TokenID+".expired" || ev.Reason != "NO_SHOW" {
			t.Fatalf("expiry %d: %+v, want NO_SHOW of token %s", i, ev, evs[i].TokenID)
		}
	}
}

func paused(t *testing.T, s dispatch.Store, h Harness) {
	q := newQueue(t, h, func(c *queue.Config) { c.State = queue.Paused })
	enter(t, h, q, 3)
	e := lead(t, s, q, "a", 10*time.Second)
	for range 2 {
		r := mustIssue(t, s, q, e, grants(t, 3))
		if !r.Paused || r.Issued != 0 || r.Waiting != 3 {
			t.Fatalf("tick of a paused queue: %+v, want paused, nobody issued, 3 waiting", r)
		}
		h.Wait(t, settle)
	}
	h.Configure(t, q, caseConfig(nil))
	h.Wait(t, settle)
	if r := mustIssue(t, s, q, e, grants(t, 3)); r.Paused || r.Issued != 3 {
		t.Fatalf("tick once reopened: %+v, want 3 issued", r)
	}
}

func outboxBound(t *testing.T, s dispatch.Store, h Harness) {
	q := newQueue(t, h, nil)
	enter(t, h, q, 6)
	e := lead(t, s, q, "a", 10*time.Second)
	tick := func() queue.IssueResult {
		t.Helper()
		r := issue(s, q, 0, e, grants(t, 6), func(r *queue.IssueRequest) { r.OutboxBound = 2 })
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.IssueResult
	}
	tick()
	h.Wait(t, settle)
	if r := tick(); r.Issued != 2 || r.Held != "" {
		t.Fatalf("tick with room for 2 events: %+v, want 2 issued", r)
	}
	h.Wait(t, settle)
	if r := tick(); r.Issued != 0 || r.Held != queue.HeldOutboxBacklog || r.Waiting != 4 {
		t.Fatalf("tick with the outbox at its bound: %+v, want held %s, 4 waiting", r, queue.HeldOutboxBacklog)
	}
	evs := newEvents(t, s, q)
	if err := s.AckOutboxes(context.Background(), []queue.OutboxBatch{{QueueID: q, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	h.Wait(t, settle)
	if r := tick(); r.Issued != 2 || r.Held != "" || r.Waiting != 2 {
		t.Fatalf("tick once the outbox was acknowledged: %+v, want 2 issued, 2 waiting", r)
	}
}

func adaptive(t *testing.T, s dispatch.Store, h Harness) {
	adapt := func(c *queue.Config) {
		c.AdmissionMode, c.MinAdmissionRatePerSec, c.MaxAdmissionRatePerSec = queue.AdmissionAdaptive, 10, 100
	}
	q := newQueue(t, h, adapt)
	e := lead(t, s, q, "a", 10*time.Second)
	for _, tc := range []struct {
		proposed, want float64
	}{{500, 100}, {1, 10}, {50, 50}, {0, 50}} {
		r := issue(s, q, 0, e, nil, func(r *queue.IssueRequest) { r.Rate, r.RateReason = tc.proposed, "because" })
		if r.Err != nil || r.Rate != tc.want || r.Mode != queue.AdmissionAdaptive || r.MinRate != 10 || r.MaxRate != 100 || r.TargetLatency != 500*time.Millisecond {
			t.Fatalf("tick proposing %g/s: %+v, want %g/s ADAPTIVE within 10 to 100, target 500ms", tc.proposed, r, tc.want)
		}
	}
	if _, st, err := s.Config(context.Background(), q); err != nil || st.EffectiveRate != 50 || st.RateReason != "because" {
		t.Fatalf("stats: %+v %v, want effective rate 50, its reason", st, err)
	}
	h.Configure(t, q, caseConfig(nil)) // FIXED again
	if r := issue(s, q, 0, e, nil, func(r *queue.IssueRequest) { r.Rate = 500 }); r.Err != nil || r.Rate != 1000 || r.Mode != queue.AdmissionFixed {
		t.Fatalf("tick of the queue made FIXED proposing 500/s: %+v, want the configured 1000/s", r)
	}
	if _, st, err := s.Config(context.Background(), q); err != nil || st.EffectiveRate != 0 || st.RateReason != "" {
		t.Fatalf("stats once FIXED: %+v %v, want no effective rate", st, err)
	}
}

func gone(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, func(c *queue.Config) { c.TokenTTLSeconds = 1 })
	enter(t, h, q, 3)
	e := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, e, nil)
	h.Wait(t, settle)
	mustIssue(t, s, q, e, grants(t, 1))
	h.Close(t, q)
	ack := func() {
		t.Helper()
		if err := s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: newEvents(t, s, q)}}); err != nil {
			t.Fatal(err)
		}
	}
	ack()
	steps := []struct {
		before  func()
		expired int
		why     string
	}{
		{nil, 0, "a slot is held"},
		{func() { h.Wait(t, time.Second+100*time.Millisecond) }, 1, "the slot expires"},
		{nil, 0, "its TokenExpired is in the outbox"},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		if r := mustIssue(t, s, q, e, nil); !r.Paused || r.Gone || r.Expired != st.expired || r.Waiting != 0 {
			t.Fatalf("tick of the closed queue (%s): %+v, want paused, %d expired", st.why, r, st.expired)
		}
	}
	ack()
	if r := mustIssue(t, s, q, e, nil); !r.Gone {
		t.Fatalf("tick of the closed queue done with: %+v, want gone", r)
	}
	if r := issue(s, q, 0, e, nil, nil); !errors.Is(r.Err, queue.ErrNotFound) {
		t.Fatalf("tick after it was gone: %+v, want ErrNotFound", r)
	}
	if _, _, err := s.Config(ctx, q); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("config after it was gone: %v, want ErrNotFound", err)
	}
}
