package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// The adaptive drill's figures: each queue's rate at most maxRate; the
// database slowed by slowBy per round trip for slowFor.
const (
	maxRate  = 30.0
	slowBy   = 300 * time.Millisecond
	slowFor  = 20 * time.Second
	drillTTL = 8 * time.Second
)

// buyerTally counts what the buyers of one queue got, from the fault on.
type buyerTally struct {
	created, unavailable, timedOut, other atomic.Int64
}

// TestAdaptiveAdmissionFollowsASlowDatabase is the adaptive drill: two
// queues side by side on one order-service, one ADAPTIVE between 3/s and
// 30/s (p95 target 1.5 s: the fault's p95 is several seconds, while this
// machine's own load under make test already takes a healthy order path's
// p95 to 0.8-0.9 s, which a 500 ms target read as a slow database and kept
// the rate down after the fault ended), one FIXED at 30/s; every admitted person orders
// at once, once (a 503 or a 6 s timeout and they walk away). The
// order-service's database is reached through a proxy that adds 300 ms to
// every round trip for 20 s. The ADAPTIVE queue's effective rate falls
// below half of its maximum and climbs back to the maximum after the
// fault's end (the FIXED queue paused by then); of the people
// admitted while the database is slow, its buyers get fewer 503s and
// time-outs, and fewer of its tokens expire unused, than the FIXED
// queue's. make chaos holds the controller to its
// times, down within 10 s of the fault and back within 90 s of its end;
// make test, beside every other package on two busy cores, to 20 s and
// 180 s: a controller that never moves still fails it.
func TestAdaptiveAdmissionFollowsASlowDatabase(t *testing.T) {
	t.Parallel()
	id := testenv.ID(t)
	adaptive, fixed := id+"-a", id+"-f"
	s := newSystemWith(t, systemOptions{id: id, queues: []string{adaptive, fixed}, cutDatabase: true, orderEnv: map[string]string{
		"DB_MAX_CONNS": "10", "ORDER_TX_TIMEOUT": "3s", "ORDER_RATE_LIMIT_PER_QUEUE": "0", "ORDER_RATE_LIMIT_PER_USER": "0",
	}})

	knobs := map[string]any{"admissionRatePerSec": maxRate, "activationSpreadMs": 0, "tokenTtlSeconds": int(drillTTL.Seconds()), "maxWaitSeconds": 600}
	adaptiveKnobs := map[string]any{"admissionMode": "ADAPTIVE", "minAdmissionRatePerSec": 3, "maxAdmissionRatePerSec": maxRate, "targetOrderLatencyMs": 1500}
	for q, extra := range map[string]map[string]any{adaptive: adaptiveKnobs, fixed: nil} {
		body := map[string]any{"state": "PAUSED"}
		for k, v := range knobs {
			body[k] = v
		}
		for k, v := range extra {
			body[k] = v
		}
		if st, v := s.call(http.MethodPut, s.gateway.URL+"/admin/v1/queues/"+q, "ops", "admin", "", body); st != http.StatusCreated {
			t.Fatalf("create queue %s: %d %v", q, st, v)
		}
		if st, v := s.call(http.MethodPut, s.order.URL+"/admin/v1/products/tee-"+q, "ops", "admin", "",
			map[string]any{"queueId": q, "name": "Tee", "stock": 1_000_000, "priceCents": 2500}); st != http.StatusCreated {
			t.Fatalf("create product for %s: %d %v", q, st, v)
		}
	}
	// Enough people that neither line runs dry: 30/s for about a minute.
	const people = 2400
	fillLines(t, s, []string{adaptive, fixed}, people)
	for _, q := range []string{adaptive, fixed} {
		if st, v := s.call(http.MethodPut, s.gateway.URL+"/admin/v1/queues/"+q, "ops", "admin", "", map[string]any{"state": "OPEN"}); st != http.StatusOK {
			t.Fatalf("open %s: %d %v", q, st, v)
		}
	}

	ctx, stopBuyers := context.WithCancel(context.Background())
	tallies := map[string]*buyerTally{adaptive: {}, fixed: {}}
	// The fault's window, unix ms: buyers admitted inside it are counted,
	// and the tokens issued inside it that expired unused. Both queues
	// admit throughout it; after it the FIXED queue is paused and the
	// ADAPTIVE one admits on, for up to three minutes on a busy machine.
	var faultAt, faultEnd atomic.Int64
	// The watcher is one of the buyers' group: it adds each buyer while
	// the group's count is above zero, so buyers.Wait below cannot race
	// an Add (the race detector failed CI on that once).
	var buyers sync.WaitGroup
	buyers.Go(func() { s.buy(ctx, &buyers, tallies, &faultAt, &faultEnd) })

	rate := func() (float64, string) {
		_, v := s.call(http.MethodGet, s.gateway.URL+"/admin/v1/queues/"+adaptive, "ops", "admin", "", nil)
		r, _ := v["effectiveRatePerSec"].(float64)
		why, _ := v["rateReason"].(string)
		return r, why
	}
	waitRate := func(what string, within time.Duration, cond func(float64) bool) time.Duration {
		start := time.Now()
		for {
			r, why := rate()
			if cond(r) {
				t.Logf("%s after %v: %.1f/s (%s)", what, time.Since(start).Round(100*time.Millisecond), r, why)
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("%s: effective rate %.1f/s (%s) after %v\ndispatcher log:\n%s", what, r, why, within, s.dispatcher.Tail())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitRate("healthy: at the maximum", 20*time.Second, func(r float64) bool { return r >= maxRate })
	time.Sleep(3 * time.Second)

	faultAt.Store(time.Now().UnixMilli())
	s.pgProxy.Delay(slowBy)
	down := waitRate("database slow: below half of the maximum", testenv.Pick(20*time.Second, 10*time.Second), func(r float64) bool { return r > 0 && r < maxRate/2 })
	time.Sleep(max(slowFor-down, 5*time.Second))
	s.pgProxy.Delay(0)
	faultEnd.Store(time.Now().UnixMilli())
	// The FIXED queue has served its purpose (the control during the
	// fault); it is paused now, or its 30/s, with the tokens its failed
	// orders gave back, can keep an order-service under -race on two busy
	// cores saturated after the database recovered, and the ADAPTIVE queue
	// would rightly stay down (seen: p95 2.9 s, 8/s, 45 s after the end).
	if st, v := s.call(http.MethodPut, s.gateway.URL+"/admin/v1/queues/"+fixed, "ops", "admin", "", map[string]any{"state": "PAUSED"}); st != http.StatusOK {
		t.Fatalf("pause %s: %d %v", fixed, st, v)
	}
	// Alone it climbs back to the maximum in about 20 s (make chaos).
	// make test runs it beside every other package on two busy cores, where
	// the order path under -race keeps some reports over the target (seen:
	// 12.9/s three minutes after the recovery, with the other core busy):
	// there it must climb by two steps (a twentieth of the range each)
	// above where it was when the database came back.
	r0, _ := rate()
	back := maxRate
	if !testenv.Full() {
		back = min(maxRate, r0+2*(maxRate-3)/20)
	}
	up := waitRate(fmt.Sprintf("database back: climbing to %.1f/s (from %.1f/s)", back, r0), testenv.Pick(180*time.Second, 90*time.Second),
		func(r float64) bool { return r >= back })
	stopBuyers()
	buyers.Wait()
	// Tokens given back by failed orders expire a TTL later at most.
	time.Sleep(drillTTL + 2*time.Second)

	expired := s.expiredOfIssued(faultAt.Load(), faultEnd.Load())
	for _, q := range []string{adaptive, fixed} {
		b := tallies[q]
		t.Logf("%s: of the people admitted during the fault, %d orders created, %d answered 503, %d timed out, %d other; %d tokens expired unused",
			map[string]string{adaptive: "ADAPTIVE", fixed: "FIXED"}[q], b.created.Load(), b.unavailable.Load(), b.timedOut.Load(), b.other.Load(), expired[q])
	}
	a, f := tallies[adaptive], tallies[fixed]
	if bad := a.unavailable.Load() + a.timedOut.Load(); bad >= f.unavailable.Load()+f.timedOut.Load() {
		t.Errorf("ADAPTIVE buyers got %d 503s and time-outs, FIXED %d: want fewer", bad, f.unavailable.Load()+f.timedOut.Load())
	}
	if expired[adaptive] >= expired[fixed] {
		t.Errorf("%d ADAPTIVE tokens expired unused, %d FIXED: want fewer", expired[adaptive], expired[fixed])
	}
	if f.unavailable.Load()+f.timedOut.Load() == 0 {
		t.Errorf("the FIXED queue's buyers saw no 503 or time-out: the fault did not bite")
	}
	t.Logf("below half in %v, back at %.1f/s %v after the database recovered", down.Round(100*time.Millisecond), back, up.Round(100*time.Millisecond))
}

// fillLines enters people into each queue, sixteen at a time.
func fillLines(t *testing.T, s *system, qs []string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	work := make(chan [2]string)
	for range 16 {
		wg.Go(func() {
			for w := range work {
				if st, v := s.try(http.MethodPost, s.gateway.URL+"/api/v1/queues/"+w[0]+"/enter", w[1], "", nil, 5*time.Second); st != http.StatusOK {
					select {
					case errs <- fmt.Errorf("enter %s as %s: %d %v", w[0], w[1], st, v):
					default:
					}
				}
			}
		})
	}
	for i := range n {
		for _, q := range qs {
			work <- [2]string{q, fmt.Sprintf("%s-b%05d", q[len(q)-1:], i)}
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// buy watches TokenIssued and sends each admitted person to order once.
func (s *system) buy(ctx context.Context, wg *sync.WaitGroup, tallies map[string]*buyerTally, faultAt, faultEnd *atomic.Int64) {
	seen := 0
	for ctx.Err() == nil {
		issued := s.events.Keyed(events.RoutingKeyTokenIssued)
		for _, d := range issued[seen:] {
			var ev waitingroomv1.TokenIssued
			if proto.Unmarshal(d.Body, &ev) != nil {
				continue
			}
			b := tallies[ev.GetQueueId()]
			if b == nil {
				continue
			}
			counted := inWindow(ev.GetOccurredAt().AsTime().UnixMilli(), faultAt.Load(), faultEnd.Load())
			wg.Go(func() { s.order1(ev.GetQueueId(), ev.GetUserId(), b, counted) })
		}
		seen = len(issued)
		time.Sleep(50 * time.Millisecond)
	}
}

// order1 is one buyer: fetch the token, order once with a 6 s patience.
func (s *system) order1(q, user string, b *buyerTally, counted bool) {
	st, v := s.try(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q+"/position", user, "", nil, 5*time.Second)
	tok, _ := v["token"].(string)
	if st != http.StatusOK || tok == "" {
		if counted {
			b.other.Add(1)
		}
		return
	}
	st, _ = s.try(http.MethodPost, s.order.URL+"/api/v1/orders", user, tok,
		map[string]any{"queueId": q, "productId": "tee-" + q, "quantity": 1}, 6*time.Second)
	if !counted {
		return
	}
	switch st {
	case http.StatusCreated:
		b.created.Add(1)
	case http.StatusServiceUnavailable:
		b.unavailable.Add(1)
	case 0:
		b.timedOut.Add(1)
	default:
		b.other.Add(1)
	}
}

// try is request as a buyer with a patience of its own: status 0 when
// the answer did not come (a time-out, a transport error).
func (s *system) try(method, url, user, entryToken string, body any, timeout time.Duration) (int, map[string]any) {
	st, v, err := s.request(method, url, user, "", entryToken, body, timeout)
	if err != nil {
		return 0, nil
	}
	return st, v
}

// inWindow reports whether ms falls in [from, to): from 0 is not begun
// yet, to 0 not ended.
func inWindow(ms, from, to int64) bool {
	return from > 0 && ms >= from && (to == 0 || ms < to)
}

// expiredOfIssued counts per queue the tokens issued in [from, to) that
// expired unused (NO_SHOW, or too late for a restore).
func (s *system) expiredOfIssued(from, to int64) map[string]int {
	issuedAt := map[string]int64{}
	for _, d := range s.events.Keyed(events.RoutingKeyTokenIssued) {
		var ev waitingroomv1.TokenIssued
		if proto.Unmarshal(d.Body, &ev) == nil {
			issuedAt[ev.GetTokenId()] = ev.GetOccurredAt().AsTime().UnixMilli()
		}
	}
	out := map[string]int{}
	for _, d := range s.events.Keyed(events.RoutingKeyTokenExpired) {
		var ev waitingroomv1.TokenExpired
		if proto.Unmarshal(d.Body, &ev) != nil || !strings.HasPrefix(ev.GetReason().String(), "TOKEN_EXPIRED_REASON_") {
			continue
		}
		if at, ok := issuedAt[ev.GetTokenId()]; ok && inWindow(at, from, to) {
			out[ev.GetQueueId()]++
		}
	}
	return out
}
