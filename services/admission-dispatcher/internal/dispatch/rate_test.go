package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// Admission-rate tests under slowness (slow Redis, slow ticks, a stalled
// leader) and many queues. Every rate is measured on the Redis clock: the
// OccurredAt of TokenIssued events is the issue script's Redis TIME.

// admitted is what one queue's ticks issued over a window on the Redis
// clock: the tokens of the ticks after the first one up to the last tick
// within the window, and the time between the first and that last tick.
type admitted struct {
	first, last   time.Time
	tokens, ticks int
}

func (a admitted) span() time.Duration { return a.last.Sub(a.first) }

func (a admitted) rate() float64 { return float64(a.tokens) / a.span().Seconds() }

// errPct is the measured rate's error against want, in percent.
func (a admitted) errPct(want float64) float64 { return 100 * (a.rate() - want) / want }

// measure counts the window that starts at the first issuing tick.
func measure(events []queue.Event, window time.Duration) admitted {
	times, counts := ticks(events)
	if len(times) == 0 {
		return admitted{}
	}
	a := admitted{first: times[0], last: times[0]}
	for _, tm := range times[1:] {
		if tm.Sub(times[0]) > window {
			break
		}
		a.last, a.tokens, a.ticks = tm, a.tokens+counts[tm], a.ticks+1
	}
	return a
}

// spans reports whether events (one queue's, in stream order) reach past
// window after their first: every tick of the window is then published,
// since the relay publishes a stream in order.
func spans(events []queue.Event, window time.Duration) bool {
	return len(events) > 0 && events[len(events)-1].OccurredAt.Sub(events[0].OccurredAt) > window
}

// issued returns the recorded TokenIssued events, each once: delivery is
// at least once (a relay whose acknowledgement failed, or a leader's
// successor claiming its unacknowledged events, publishes them again).
func issued(r *recorder) []queue.Event {
	seen := map[string]bool{}
	var out []queue.Event
	for _, e := range r.of(queue.EventTokenIssued) {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// issuedBy returns the recorded TokenIssued events grouped by queue.
func issuedBy(r *recorder) map[string][]queue.Event {
	out := map[string][]queue.Event{}
	for _, e := range issued(r) {
		out[e.QueueID] = append(out[e.QueueID], e)
	}
	return out
}

// overCap returns the ticks that issued more than the issue script allows
// for their span (the Redis time since the previous issuing tick, clamped
// to one tick..queue.CatchUpSpan): ceil(rate x span) + 1. The first issuing
// tick's span is unknown (a tick that issued nothing came before it), so it
// is held to the widest cap.
func overCap(events []queue.Event, rate float64, tick time.Duration) []string {
	times, counts := ticks(events)
	var bad []string
	widest := queue.CatchUpSpan(tick)
	for i, tm := range times {
		span := widest
		if i > 0 {
			span = min(max(tick, tm.Sub(times[i-1])), widest)
		}
		if c := counts[tm]; c > queue.BatchCap(rate, span) {
			bad = append(bad, fmt.Sprintf("%d after %v (cap %d)", c, span, queue.BatchCap(rate, span)))
		}
	}
	return bad
}

// longestPause is the longest Redis time between two issuing ticks within
// window of the first.
func longestPause(events []queue.Event, window time.Duration) time.Duration {
	times, _ := ticks(events)
	var longest time.Duration
	for i := 1; i < len(times) && times[i].Sub(times[0]) <= window; i++ {
		longest = max(longest, times[i].Sub(times[i-1]))
	}
	return longest
}

// tickGaps returns the shortest and the mean Redis time between issuing ticks.
func tickGaps(events []queue.Event) (shortest, mean time.Duration) {
	times, _ := ticks(events)
	if len(times) < 2 {
		return 0, 0
	}
	shortest = time.Hour
	for i := 1; i < len(times); i++ {
		shortest = min(shortest, times[i].Sub(times[i-1]))
	}
	return shortest, times[len(times)-1].Sub(times[0]) / time.Duration(len(times)-1)
}

// warnings counts the dispatcher's log records at warn and above, by
// message, so a test can report step-downs and failed calls.
type warnings struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			e := a.Value.String()
			if i := strings.LastIndex(e, ": "); i >= 0 {
				e = e[i+2:]
			}
			key += " (" + e + ")"
		}
		return true
	})
	w.n[key]++
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.n) == 0 {
		return "none"
	}
	return fmt.Sprint(w.n)
}

// runDispatcher runs one replica over store until the test ends. Its
// graceful stop is registered now, so it runs before the purges of queues
// created earlier.
func runDispatcher(t *testing.T, store dispatch.Store, pub dispatch.Publisher, m dispatch.Metrics, o dispatch.Options) *warnings {
	t.Helper()
	o.Owner = testenv.ID(t)
	w := &warnings{n: map[string]int{}}
	d, err := dispatch.New(store, pub, slog.New(w), m, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	})
	return w
}

// proxiedStore is a store whose every Redis round trip goes through a
// testenv proxy to the shared Redis (same database and options).
func proxiedStore(t *testing.T) (*redisstore.Store, *testenv.Proxy) { return testenv.ProxiedStore(t) }

// A dispatcher 250 ms from Redis (every reply delayed) cannot tick every
// 100 ms: each tick waits for the previous one's reply. The catch-up grants
// and the script's elapsed-time credit must still hold the configured rate.
// rateTolerance is how far from its rate a queue may admit over 10 s in
// these drills: ±2 % in make chaos (CHAOS_FULL=1, a quiet machine); in make
// test, which a busy machine runs, ±15 %, which still catches a lost tick
// in five or a doubled batch, while overCap holds every tick to its cap.
var rateTolerance = testenv.Pick(15.0, 2.0)

func TestRateHoldsWhenEveryRedisRoundTripTakes250ms(t *testing.T) {
	// Not parallel: it holds a rate within 2 % over 10 s, which the
	// package's other drills on two cores pushed to -7 % (ticks 275 ms
	// apart instead of 253).
	const rate, delay, window = 175.0, 250 * time.Millisecond, 10 * time.Second
	tick := 100 * time.Millisecond
	c := newCluster(t, dispatch.Options{})
	q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec, cfg.MaxQueueSize = rate, 10_000 })
	c.fill(q, 3000) // 17 s of supply; filled directly, not through the proxy

	slow, proxy := proxiedStore(t)
	proxy.Delay(delay)
	calls := newTimed(slow)
	// Renewal every second, 250 ms each: a 3 s lease never lapses.
	warn := runDispatcher(t, calls, c.pub, nil, dispatch.Options{Tick: tick, Lease: 3 * time.Second, Queues: []string{q}})

	// Counted from every TokenIssued written, published or still in the
	// outbox: the admission rate. The relay is checked below: over the same
	// slow link it must keep up.
	var ev []queue.Event
	for deadline := time.Now().Add(35 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ev = written(t, c, q, func() []queue.Event { return issued(c.pub) }); spans(ev, window) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 35 s, %d tokens issued; warnings: %v; store calls:%v", len(ev), warn, calls)
		}
	}
	a := measure(ev, window)
	shortest, mean := tickGaps(ev)
	published := len(issued(c.pub))
	t.Logf("250 ms round trips: %d tokens over %v (Redis clock) in %d ticks = %.2f/s, error %+.2f%% (want 175/s ±%g%%); "+
		"ticks %v apart on average, shortest %v; %d of %d issued published so far; warnings: %v; store calls:%v",
		a.tokens, a.span(), a.ticks, a.rate(), a.errPct(rate), rateTolerance, mean, shortest, published, len(ev), warn, calls)
	// The delay was in the path: a tick starts only after the previous reply.
	if shortest < delay-10*time.Millisecond {
		t.Errorf("two ticks %v apart: the dispatcher's round trips did not take %v", shortest, delay)
	}
	if math.Abs(a.errPct(rate)) > rateTolerance {
		t.Errorf("rate %.2f/s over %v, want %.0f/s ±%g%%", a.rate(), a.span(), rate, rateTolerance)
	}
	if bad := overCap(ev, rate, tick); len(bad) > 0 {
		t.Errorf("%d ticks above the cap for their span: %v", len(bad), bad)
	}
	// A relay round costs a few 250 ms round trips (read, publish, ack):
	// it may trail by about a second of admissions, never more.
	if behind := len(ev) - published; float64(behind) > 1.5*rate {
		t.Errorf("the relay trails by %d events (%d of %d published), want at most %.0f", behind, published, len(ev), 1.5*rate)
	}
}

// A tick longer than 100 ms admits rate x tick per tick, so the rate holds
// (it fell to 94/s and 47/s when a tick was supplied one 100 ms batch of
// grants).
func TestRateHoldsWithSlowTicks(t *testing.T) {
	t.Parallel()
	const rate, window = 175.0, 10 * time.Second
	for _, tick := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, dispatch.Options{Tick: tick, Lease: 2 * time.Second})
			q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec, cfg.MaxQueueSize = rate, 10_000 })
			c.fill(q, 3000)
			c.start(1)
			testenv.WaitFor(t, 35*time.Second, "10 s of admissions", func() bool {
				return spans(issued(c.pub), window)
			})
			ev := issued(c.pub)
			a := measure(ev, window)
			_, mean := tickGaps(ev)
			t.Logf("tick %v: %d tokens over %v (Redis clock) in %d ticks (%.1f a tick, %v apart on average) = %.2f/s, error %+.2f%%",
				tick, a.tokens, a.span(), a.ticks, float64(a.tokens)/float64(a.ticks), mean, a.rate(), a.errPct(rate))
			if math.Abs(a.errPct(rate)) > rateTolerance {
				t.Errorf("tick %v: rate %.2f/s over %v, want %.0f/s ±%g%%", tick, a.rate(), a.span(), rate, rateTolerance)
			}
			if bad := overCap(ev, rate, tick); len(bad) > 0 {
				t.Errorf("%d ticks above the cap for their span: %v", len(bad), bad)
			}
		})
	}
}

// stalling is a store whose ticks (IssueAll) and renewals (RenewLeases)
// fail while stalled, like a leader whose process froze or whose link to
// Redis went away for a while: it admits nobody, loses its lease, and
// comes back.
type stalling struct {
	*redisstore.Store
	until atomic.Int64 // UnixNano; calls before it fail
}

var errStalled = errors.New("stalled")

func (s *stalling) stalled() bool { return time.Now().UnixNano() < s.until.Load() }

func (s *stalling) IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply {
	if s.stalled() {
		out := make([]queue.IssueReply, len(calls))
		for i := range out {
			out[i].Err = errStalled
		}
		return out
	}
	return s.Store.IssueAll(ctx, calls)
}

func (s *stalling) RenewLeases(ctx context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply {
	if s.stalled() {
		out := make([]queue.LeaseReply, len(leases))
		for i := range out {
			out[i].Err = errStalled
		}
		return out
	}
	return s.Store.RenewLeases(ctx, owner, leases, ttl)
}

// After a gap in admission longer than queue.CatchUpSpan, the first tick
// makes up one second's worth (rate x 1 s, at most ceil(rate)+1), not the
// whole gap.
func TestFirstTickAfterAGapAdmitsOneSecondsWorth(t *testing.T) {
	t.Parallel()
	const rate = 175.0
	tick := 100 * time.Millisecond
	cases := []struct {
		name string
		// gap stops admission and returns the shortest gap it makes.
		gap func(t *testing.T, c *cluster, q string) time.Duration
	}{
		{"leader stalls 3s", func(t *testing.T, c *cluster, q string) time.Duration {
			s := &stalling{Store: c.store}
			runDispatcher(t, s, c.pub, nil, dispatch.Options{Tick: tick, Lease: time.Second, Queues: []string{q}})
			waitIssuing(t, c, 2*time.Second)
			s.until.Store(time.Now().Add(3 * time.Second).UnixNano())
			return 3 * time.Second
		}},
		{"standby takes over a dead leader's 3s lease", func(t *testing.T, c *cluster, q string) time.Duration {
			c.opts.Lease = 3 * time.Second
			c.start(2)
			l := c.leader(q)
			waitIssuing(t, c, 2*time.Second)
			l.store.crashed.Store(true) // dies without releasing its lease
			l.stop()
			// Renewed every second, the lease outlives its holder by 2..3 s.
			return 2 * time.Second
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, dispatch.Options{Tick: tick})
			q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec, cfg.MaxQueueSize = rate, 10_000 })
			c.fill(q, 3000)
			minGap := tc.gap(t, c, q)

			// The largest pause between issuing ticks, and the tick after it.
			var gap time.Duration
			var after time.Time
			testenv.WaitFor(t, 20*time.Second, "a second of admissions after the gap", func() bool {
				times, _ := ticks(issued(c.pub))
				if len(times) == 0 {
					return false
				}
				gap, after = 0, time.Time{}
				for i := 1; i < len(times); i++ {
					if d := times[i].Sub(times[i-1]); d > gap {
						gap, after = d, times[i]
					}
				}
				return gap >= minGap && times[len(times)-1].Sub(after) > time.Second
			})
			times, counts := ticks(issued(c.pub))
			first := counts[after]
			followed := 0 // the ticks in the second after the catch-up tick
			for _, tm := range times {
				if tm.After(after) && tm.Sub(after) <= time.Second {
					followed += counts[tm]
				}
			}
			upper := queue.BatchCap(rate, time.Second) // ceil(rate x 1 s) + 1
			t.Logf("gap %v (Redis clock); the first tick after it admitted %d (want %.1f..%d); the next second %d more",
				gap, first, 0.9*rate, upper, followed)
			if float64(first) < 0.9*rate || first > upper {
				t.Errorf("first tick after a %v gap admitted %d, want %.1f..%d (one second's worth)", gap, first, 0.9*rate, upper)
			}
			// Nothing the catch-up tick could not admit is carried on: the
			// next second admits the rate (plus one tick's rounding), not
			// the ~15 more a carried credit gave.
			if lim := rate + float64(queue.BatchCap(rate, tick)); float64(followed) > lim {
				t.Errorf("the second after the catch-up tick admitted %d, want at most %.0f (rate + one tick's cap)", followed, lim)
			}
			if bad := overCap(issued(c.pub), rate, tick); len(bad) > 0 {
				t.Errorf("%d ticks above the cap for their span: %v", len(bad), bad)
			}
		})
	}
}

// waitIssuing waits until the cluster's queue has issued for d (Redis clock).
func waitIssuing(t *testing.T, c *cluster, d time.Duration) {
	t.Helper()
	testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("%v of admissions", d), func() bool {
		return spans(issued(c.pub), d)
	})
}

// One replica with the default go-redis pool leads 200 queues: every tick
// issues for 200 queues, and each queue must still get its rate.
func TestTwoHundredQueuesOnOneReplicaEachGetTheirRate(t *testing.T) {
	// Not parallel: it measures one replica's throughput, so it runs alone
	// among this package's tests.
	const queues, rate, perQueue, window = 200, 20.0, 300, 10 * time.Second
	tick := 100 * time.Millisecond
	c := newCluster(t, dispatch.Options{})
	ctx := context.Background()

	ids := make([]string, queues)
	for i := range ids {
		ids[i] = testenv.ID(t)
		if _, _, err := c.store.UpdateConfig(ctx, ids[i], func(cfg queue.Config, _ bool) (queue.Config, error) {
			cfg.AdmissionRatePerSec = rate
			return cfg, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { purgeAll(t, c, ids, perQueue) })

	// 60,000 entries: one pipeline of enter calls per queue, each reply
	// checked (the place it gave).
	fillStart := time.Now()
	fill(t, c, ids, perQueue)
	t.Logf("filled %d queues x %d in %v", queues, perQueue, time.Since(fillStart).Round(time.Millisecond))

	// The dispatcher's own client: redisstore.NewClient with no pool
	// options (go-redis's default pool, 10 per GOMAXPROCS).
	rdb, err := redisstore.NewClient(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	m := newTally()
	// The production defaults: 100 ms tick, DefaultLease.
	calls := newTimed(store)
	warn := runDispatcher(t, calls, c.pub, m, dispatch.Options{Tick: tick, Queues: ids})

	// Polled like testenv.WaitFor, but a timeout says how far each queue
	// got; every half second, as each poll copies tens of thousands of
	// events and the replica under test shares the two cores.
	// 30 s on a quiet machine (make chaos); a busy one publishes 200
	// queues' events more slowly (half of them in 30 s, with the other
	// core busy), which is not what this drill measures.
	wait := testenv.Pick(120*time.Second, 30*time.Second)
	for deadline := time.Now().Add(wait); ; time.Sleep(500 * time.Millisecond) {
		by := issuedBy(c.pub)
		behind, shortest, tokens := 0, time.Duration(math.MaxInt64), 0
		for _, q := range ids {
			ev := by[q]
			tokens += len(ev)
			if spans(ev, window) {
				continue
			}
			behind++
			if len(ev) == 0 {
				shortest = 0
			} else {
				shortest = min(shortest, ev[len(ev)-1].OccurredAt.Sub(ev[0].OccurredAt))
			}
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			// Whether admission or publishing fell behind: the rate of
			// every TokenIssued written, published or still in the outbox.
			lo, hi, longest := math.Inf(1), 0.0, time.Duration(0)
			// Copied once for all queues (tens of thousands of events): a
			// report, where an event published after the copy and gone
			// from an outbox read later may be missed.
			published := sync.OnceValue(func() []queue.Event { return issued(c.pub) })
			for _, q := range ids {
				ev := written(t, c, q, published)
				a := measure(ev, window)
				lo, hi = min(lo, a.rate()), max(hi, a.rate())
				longest = max(longest, longestPause(ev, window))
			}
			p99, mean, n := m.tickStats()
			t.Fatalf("after %v %d of %d queues have not published 10 s of admissions (the shortest %v); %d tokens published (%d issued); "+
				"counting the outboxes too, each queue admitted at %.2f..%.2f/s over 10 s, the longest pause between issuing ticks %v; tick round p99 %v, mean %v over %d rounds; "+
				"warnings: %v; store calls:%v", wait, behind, queues, shortest, tokens, m.issuedSum(),
				lo, hi, longest, p99, mean, n, warn, calls)
		}
	}
	by := issuedBy(c.pub)
	var worst admitted
	worstQ, minTokens, maxTokens, minRate, maxRate, mostTicks, longest := "", math.MaxInt, 0, math.Inf(1), 0.0, 0, time.Duration(0)
	for _, q := range ids {
		a := measure(by[q], window)
		times, _ := ticks(by[q])
		mostTicks = max(mostTicks, len(times))
		minTokens, maxTokens = min(minTokens, a.tokens), max(maxTokens, a.tokens)
		minRate, maxRate = min(minRate, a.rate()), max(maxRate, a.rate())
		if worstQ == "" || math.Abs(a.errPct(rate)) > math.Abs(worst.errPct(rate)) {
			worst, worstQ = a, q
		}
		pause := longestPause(by[q], window)
		longest = max(longest, pause)
		if math.Abs(a.errPct(rate)) > rateTolerance {
			t.Errorf("queue %s: %d tokens over %v = %.2f/s (%+.2f%%), want %.0f/s ±%g%%; its longest pause between issuing ticks %v",
				q, a.tokens, a.span(), a.rate(), a.errPct(rate), rate, rateTolerance, pause)
		}
		if bad := overCap(by[q], rate, tick); len(bad) > 0 {
			t.Errorf("queue %s: %d ticks above the cap for their span: %v", q, len(bad), bad)
		}
	}
	p99, mean, n := m.tickStats()
	t.Logf("%d queues at %.0f/s on one replica: per queue %d..%d tokens in about 10 s, %.2f..%.2f/s; worst %s %d over %v (%+.2f%%); "+
		"longest pause between a queue's issuing ticks %v; tick round duration p99 %v, mean %v over %d rounds; warnings: %v; store calls:%v",
		queues, rate, minTokens, maxTokens, minRate, maxRate, worstQ, worst.tokens, worst.span(), worst.errPct(rate), longest, p99, mean, n, warn, calls)
	// Ticked times rounds (one pipelined issue call per led queue); a
	// queue issues at most once a round, so there were at least as many
	// rounds as any queue's issuing ticks.
	if n < mostTicks {
		t.Errorf("%d tick rounds recorded, a queue's events show %d issuing ticks", n, mostTicks)
	}
}

// fill gives perQueue people a place in each queue: one pipeline of enter
// script calls per queue, on the direct client. Each reply must be the
// place the call gave, in entry order.
func fill(t *testing.T, c *cluster, ids []string, perQueue int) {
	t.Helper()
	ctx := context.Background()
	// The gateway's first script is enter.lua; the reply check below fails
	// if that ever changes.
	enter := redisstore.GatewayScripts[0]
	if err := enter.Load(ctx, c.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	for _, q := range ids {
		k := redisstore.KeysFor(q)
		cmds := make([]*redis.Cmd, perQueue)
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				u := userName(i)
				keys := []string{k.Config(), k.Waiting(), k.Seq(), k.Token(u), k.Status(u), k.Dispatch(), k.Pow(""), k.PreQueue(), k.Draw(),
					k.Traces(), k.Entered()}
				cmds[i] = enter.EvalSha(ctx, p, keys, u, "", 0, 0)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("fill %s: %v", q, err)
		}
		for i, cmd := range cmds {
			r, err := cmd.Slice()
			if err != nil || len(r) < 6 || r[0] != "WAITING" || r[5] != int64(i+1) {
				t.Fatalf("enter %s as %s: %v %v, want WAITING at place %d", q, userName(i), r, err, i+1)
			}
		}
	}
}

// purgeAll purges every queue, eight at a time, and checks none is still
// registered. Purge scans the whole database for the queue's keys, so the
// per-user keys (token, status, consumed of the perQueue users) are deleted
// by name first: 200 scans past 120,000 of them take minutes.
func purgeAll(t *testing.T, c *cluster, ids []string, perQueue int) {
	ctx := context.Background()
	start := time.Now()
	each := func(f func(q string) error) {
		work := make(chan string)
		errs := make(chan error, len(ids))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for q := range work {
					errs <- f(q)
				}
			})
		}
		for _, q := range ids {
			work <- q
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("purge: %v", err)
			}
		}
	}
	each(func(q string) error {
		k := redisstore.KeysFor(q)
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range perQueue {
				u := userName(i)
				p.Del(ctx, k.Status(u), k.Consumed(u))
			}
			return nil
		})
		return err
	})
	byName := time.Since(start)
	each(func(q string) error { return c.store.Purge(ctx, q) })
	t.Logf("purged %d queues in %v (per-user keys by name %v, then Purge)", len(ids), time.Since(start).Round(time.Millisecond), byName.Round(time.Millisecond))
	left, err := c.rdb.SMIsMember(ctx, redisstore.QueuesKey, toAny(ids)...).Result()
	if err != nil {
		t.Errorf("wr:queues after purge: %v", err)
	}
	for i, in := range left {
		if in {
			t.Errorf("queue %s still registered after purge", ids[i])
		}
	}
}

// written returns q's TokenIssued events: those still in its outbox and
// those published, in issue order. The outbox is read first, then
// published is called: an event the relay deletes meanwhile was published
// before it was deleted.
func written(t *testing.T, c *cluster, q string, published func() []queue.Event) []queue.Event {
	t.Helper()
	msgs, err := c.rdb.XRange(context.Background(), redisstore.KeysFor(q).Outbox(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []queue.Event
	for _, e := range published() {
		if e.QueueID == q && !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	for _, m := range msgs {
		at, _ := strconv.ParseInt(fmt.Sprint(m.Values["at"]), 10, 64)
		// A tick's admitted are one TokensIssued entry: "tids" lists their
		// token ids, each one's event id is "<tid>.issued".
		if m.Values["type"] != "TokensIssued" {
			continue
		}
		for _, tid := range strings.Fields(fmt.Sprint(m.Values["tids"])) {
			if id := tid + ".issued"; !seen[id] {
				seen[id] = true
				out = append(out, queue.Event{ID: id, QueueID: q, Type: queue.EventTokenIssued, OccurredAt: time.UnixMilli(at).UTC()})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b queue.Event) int { return a.OccurredAt.Compare(b.OccurredAt) })
	return out
}

// timed is a store that counts the dispatcher's calls and their time by
// operation, so a test can say where one replica's time goes.
type timed struct {
	*redisstore.Store
	mu    sync.Mutex
	calls map[string]int
	took  map[string]time.Duration
}

func newTimed(s *redisstore.Store) *timed {
	return &timed{Store: s, calls: map[string]int{}, took: map[string]time.Duration{}}
}

func (s *timed) note(op string, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	s.took[op] += time.Since(start)
}

func (s *timed) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := make([]string, 0, len(s.calls))
	for op := range s.calls {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	out := ""
	for _, op := range ops {
		out += fmt.Sprintf(" %s %d x %.1f ms;", op, s.calls[op], float64(s.took[op].Microseconds())/1000/float64(s.calls[op]))
	}
	return out
}

func (s *timed) AcquireLeases(ctx context.Context, owner string, qs []string, ttl time.Duration) []queue.LeaseReply {
	defer s.note("AcquireLeases", time.Now())
	return s.Store.AcquireLeases(ctx, owner, qs, ttl)
}

func (s *timed) RenewLeases(ctx context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply {
	defer s.note("RenewLeases", time.Now())
	return s.Store.RenewLeases(ctx, owner, leases, ttl)
}

func (s *timed) IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply {
	defer s.note("IssueAll", time.Now())
	return s.Store.IssueAll(ctx, calls)
}

func (s *timed) Config(ctx context.Context, q string) (queue.Config, queue.Stats, error) {
	defer s.note("Config", time.Now())
	return s.Store.Config(ctx, q)
}

func (s *timed) EnsureOutboxGroup(ctx context.Context, q string) error {
	defer s.note("EnsureOutboxGroup", time.Now())
	return s.Store.EnsureOutboxGroup(ctx, q)
}

func (s *timed) ClaimOutbox(ctx context.Context, q, consumer string, minIdle time.Duration, count int64) ([]queue.Event, error) {
	defer s.note("ClaimOutbox", time.Now())
	return s.Store.ClaimOutbox(ctx, q, consumer, minIdle, count)
}

func (s *timed) PruneOutboxConsumers(ctx context.Context, q, self string, idle time.Duration) (int, error) {
	defer s.note("PruneOutboxConsumers", time.Now())
	return s.Store.PruneOutboxConsumers(ctx, q, self, idle)
}

func (s *timed) ReadOutboxes(ctx context.Context, consumer string, n int64, reads []queue.OutboxRead) ([]queue.OutboxBatch, error) {
	defer s.note("ReadOutboxes", time.Now())
	return s.Store.ReadOutboxes(ctx, consumer, n, reads)
}

func (s *timed) AckOutboxes(ctx context.Context, batches []queue.OutboxBatch) error {
	defer s.note("AckOutboxes", time.Now())
	return s.Store.AckOutboxes(ctx, batches)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// The measured rate the gateway's ETA uses follows what was admitted while
// people wait, and when the line empties it settles on the configured rate
// instead of jumping above it.
func TestMeasuredRateFollowsAdmissionsAndStaysNearTheRateWhenTheLineEmpties(t *testing.T) {
	t.Parallel()
	const rate, people = 2.0, 30
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second})
	q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec = rate })
	c.fill(q, people)
	ctx := context.Background()
	start := time.Now()
	c.start(1)

	read := func() rateSample {
		_, st, err := c.store.Config(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return rateSample{time.Since(start), st.MeasuredRate, st.Waiting}
	}
	// Samples every 200 ms (a sampling schedule, not a synchronisation).
	every := time.NewTicker(200 * time.Millisecond)
	defer every.Stop()

	// From 8 s after the start until the line is empty: within 10 %.
	var busy []rateSample
	for s := read(); ; s = read() {
		if s.at >= 8*time.Second {
			if s.waiting == 0 {
				break
			}
			busy = append(busy, s)
		} else if s.waiting == 0 {
			t.Fatalf("the line of %d emptied %v after the start, before 8 s: faster than %.0f/s", people, s.at, rate)
		}
		if s.at > 30*time.Second {
			t.Fatalf("%d still waiting %v after the start", s.waiting, s.at)
		}
		<-every.C
	}
	emptied := time.Since(start)
	// The 10 s after the line emptied: never above 2.2.
	var idle []rateSample
	for s := read(); s.at < emptied+10*time.Second; s = read() {
		idle = append(idle, s)
		<-every.C
	}
	lo, hi := minMax(busy)
	ilo, ihi := minMax(idle)
	t.Logf("measured rate while people waited (8 s..%v, %d samples): %.3f..%.3f; the 10 s after the line emptied (%d samples): %.3f..%.3f",
		emptied.Round(time.Millisecond), len(busy), lo, hi, len(idle), ilo, ihi)
	if len(busy) < 10 {
		t.Errorf("only %d samples between 8 s and the line emptying at %v", len(busy), emptied)
	}
	for _, s := range busy {
		if math.Abs(s.measured-rate) > rate/10 {
			t.Errorf("at %v with %d waiting the measured rate was %.3f, want %.1f ±10%%", s.at, s.waiting, s.measured, rate)
		}
	}
	for _, s := range idle {
		if s.measured > 1.1*rate || s.measured <= 0 {
			t.Errorf("at %v, %v after the line emptied, the measured rate was %.3f, want (0, %.1f]", s.at, s.at-emptied, s.measured, 1.1*rate)
		}
	}
	_, st, err := c.store.Config(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st.IssuedTotal != people {
		t.Errorf("issued %d, want all %d", st.IssuedTotal, people)
	}
}

// rateSample is one reading of a queue's measured rate.
type rateSample struct {
	at       time.Duration // since the dispatcher started
	measured float64
	waiting  int64
}

func minMax(s []rateSample) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, e := range s {
		lo, hi = min(lo, e.measured), max(hi, e.measured)
	}
	return lo, hi
}
