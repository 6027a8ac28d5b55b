package dispatch_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// renewHold is how long a lease renewal's reply is held: past the client's
// 1 s read timeout, so go-redis gives up on it and (unless the caller's
// context ended meanwhile) sends the renewal again.
const renewHold = 1500 * time.Millisecond

// heldCall is how long a call whose reply was held takes at least (the read
// timeout, a little under for the timer's slack).
const heldCall = 950 * time.Millisecond

// proxied is a replica's Store whose Redis is reached through its own proxy,
// and which notes how each held lease renewal (one that took as long as the
// read timeout) ended.
type proxied struct {
	*crashable
	proxy *testenv.Proxy

	mu   sync.Mutex
	slow []renewal
}

type renewal struct {
	ok  bool
	err error
}

func (p *proxied) RenewLeases(ctx context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply {
	start := time.Now()
	replies := p.crashable.RenewLeases(ctx, owner, leases, ttl)
	if time.Since(start) >= heldCall {
		p.mu.Lock()
		for _, r := range replies {
			p.slow = append(p.slow, renewal{ok: r.Err == nil && r.Epoch > 0, err: r.Err})
		}
		p.mu.Unlock()
	}
	return replies
}

// slowRenewals returns the renewals that were held, oldest first.
func (p *proxied) slowRenewals() []renewal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]renewal(nil), p.slow...)
}

// startProxied runs one more dispatcher replica whose Redis client
// (redisstore.NewClient: 1 s read timeout, one retry) goes through a proxy
// of its own to the test Redis, same database. It is stopped at cleanup.
func (c *cluster) startProxied() (*replica, *proxied) {
	t := c.t
	s, p := testenv.ProxiedStore(t)
	o := c.opts
	o.Owner = testenv.ID(t)
	ps := &proxied{crashable: &crashable{Store: s}, proxy: p}
	r := &replica{owner: o.Owner, store: ps.crashable, done: make(chan struct{})}
	d, err := dispatch.New(ps, c.pub, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { defer close(r.done); _ = d.Run(ctx) }()
	c.replicas = append(c.replicas, r)
	t.Cleanup(r.stop)
	return r, ps
}

// renewalOf matches owner's lease renewal of q as it goes out (EVALSHA with
// the lock key, "renew" and the owner as arguments).
func renewalOf(q, owner string) func([]byte) bool {
	parts := [][]byte{[]byte(redisstore.KeysFor(q).Lock()), []byte("$5\r\nrenew\r\n"), []byte(fmt.Sprintf("$%d\r\n%s\r\n", len(owner), owner))}
	return func(req []byte) bool {
		for _, p := range parts {
			if !bytes.Contains(req, p) {
				return false
			}
		}
		return true
	}
}

// A leader whose lease renewal is answered late (the reply held past the
// client's timeout, so go-redis gives up and may send it again) either
// keeps the lease, when the lease outlives the hold and the retried renewal
// answers true, or loses it, when it lapses during the hold, and a replica
// takes over. Either way no token is issued twice or published twice,
// nobody is skipped or admitted twice, the counters match the events, and
// admission goes on at the configured rate. Twenty held renewals in a row
// per case.
func TestHeldLeaseRenewalKeepsOrHandsOverLeadershipCleanly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		lease time.Duration
		// kept: the lease outlives the held reply; otherwise it lapses
		// during the hold and must change hands.
		kept bool
	}{
		// Renewed every 200 ms: a renewal answered after 1 s is too late.
		{"default 600ms lease lapses during the hold", dispatch.DefaultLease, false},
		// Renewed every second; the tick loop stops at a lease since the
		// last good renewal, a second after the retried one answers.
		{"3s lease outlives the hold", 3 * time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			heldRenewalRounds(t, tc.lease, tc.kept)
		})
	}
}

func heldRenewalRounds(t *testing.T, lease time.Duration, kept bool) {
	const (
		rate    = 30.0
		entered = 2000 // 20 rounds take about 40 s, 1,200 people
		rounds  = 20
		// moved: tokens issued after a hold's outcome that show admission
		// goes on (a third of a second at the rate).
		moved = 10
	)
	tick := 100 * time.Millisecond
	c := newCluster(t, dispatch.Options{Tick: tick, Lease: lease})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionRatePerSec, cfg.TokenTTLSeconds, cfg.MaxQueueSize = rate, 3600, 10_000
	})
	lineUp(t, c.store, q, entered)
	byOwner := map[string]*proxied{}
	for range 2 {
		r, p := c.startProxied()
		byOwner[r.owner] = p
	}
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	lock := func() string { return c.rdb.Get(ctx, k.Lock()).Val() }
	issued := func() int { return len(c.pub.of(queue.EventTokenIssued)) }
	testenv.WaitFor(t, 15*time.Second, "admission to start", func() bool { return issued() >= moved })

	handedOver, reacquired, keptN := 0, 0, 0
	// How the late renewals ended for their caller: an error (the replica
	// had stepped down and cancelled the call before its retry) or false
	// (the retry found the lease gone).
	failedCall, answeredFalse := 0, 0
	for round := range rounds {
		leader := c.leader(q)
		p := byOwner[leader.owner]
		before := lock()
		if !strings.HasPrefix(before, leader.owner+":") {
			t.Fatalf("round %d: lock %q changed hands before the hold", round, before)
		}
		heldBefore, slowBefore := p.proxy.Held(), len(p.slowRenewals())
		p.proxy.HoldNextReply(renewalOf(q, leader.owner), renewHold)
		testenv.WaitFor(t, 10*time.Second, "the leader's next renewal to be held", func() bool { return p.proxy.Held() == heldBefore+1 })
		testenv.WaitFor(t, 10*time.Second, "the held renewal to come back", func() bool { return len(p.slowRenewals()) > slowBefore })
		got := p.slowRenewals()[slowBefore]
		if kept {
			// The retried renewal found the lease still this owner's.
			if !got.ok || got.err != nil {
				t.Fatalf("round %d: held renewal of a %v lease answered %v, %v; want true: the retry renews", round, lease, got.ok, got.err)
			}
			if now := lock(); now != before {
				t.Fatalf("round %d: lock %q after the held renewal, want %q kept", round, now, before)
			}
			keptN++
		} else {
			// Too late to count: the replica must have given the lease up,
			// and another epoch leads now.
			switch {
			case got.ok:
				t.Fatalf("round %d: a renewal answered after the %v lease lapsed reported success", round, lease)
			case got.err != nil:
				failedCall++
			default:
				answeredFalse++
			}
			var after string
			testenv.WaitFor(t, 10*time.Second, "a new epoch to lead", func() bool {
				after = lock()
				return after != "" && after != before
			})
			if epochOf(t, after) <= epochOf(t, before) {
				t.Fatalf("round %d: lock %q after %q: the epoch did not go up", round, after, before)
			}
			if strings.HasPrefix(after, leader.owner+":") {
				reacquired++
			} else {
				handedOver++
			}
		}
		n := issued()
		testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("round %d: %d more tokens after the hold", round, moved), func() bool { return issued() >= n+moved })
	}

	// Stop admitting, let the relay publish the rest, then compare the
	// published events with the counters and the line.
	if _, _, err := c.store.UpdateConfig(ctx, q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		cfg.State = queue.Paused
		return cfg, nil
	}); err != nil {
		t.Fatal(err)
	}
	var total int64
	testenv.WaitFor(t, 15*time.Second, "the outbox published and the counter matching it", func() bool {
		_, stats, err := c.store.Config(ctx, q)
		total = stats.IssuedTotal
		return err == nil && c.rdb.XLen(ctx, k.Outbox()).Val() == 0 && int64(issued()) == total
	})
	events := c.pub.of(queue.EventTokenIssued)
	seenToken, seenEvent, seenUser := map[string]int{}, map[string]int{}, map[string]int{}
	for i, e := range events {
		seenToken[e.TokenID]++
		seenEvent[e.ID]++
		seenUser[e.UserID]++
		// The line's order, nobody skipped: the i-th admission is the
		// i-th place taken.
		if e.Seq != int64(i+1) {
			t.Fatalf("admission %d (%s) had place %d, want %d: the line was not followed exactly once", i, e.UserID, e.Seq, i+1)
		}
	}
	if len(seenToken) != len(events) || len(seenEvent) != len(events) || len(seenUser) != len(events) {
		t.Fatalf("%d TokenIssued published, %d token ids, %d event ids, %d users: a token issued or published twice",
			len(events), len(seenToken), len(seenEvent), len(seenUser))
	}
	// Nothing else but the line's history (a QueueMinute when a minute
	// ended during the run).
	c.pub.mu.Lock()
	all := len(c.pub.events)
	c.pub.mu.Unlock()
	if minutes := len(c.pub.of(queue.EventQueueMinute)); all != len(events)+minutes {
		t.Fatalf("%d events published, %d of them TokenIssued and %d QueueMinute; want nothing else", all, len(events), minutes)
	}
	waiting := c.rdb.ZCard(ctx, k.Waiting()).Val()
	if waiting == 0 || waiting+total != entered {
		t.Fatalf("%d waiting + %d issued, want %d entered with some still waiting", waiting, total, entered)
	}
	heldN := 0
	for _, p := range byOwner {
		heldN += p.proxy.Held()
	}
	if heldN != rounds {
		t.Fatalf("%d renewal replies held, want %d", heldN, rounds)
	}

	// The rate on the Redis clock over the whole run, holds included: the
	// ticks after the first, against rate x their span. A lapsed lease
	// costs about half a second without ticks, which the next leader's
	// first tick makes up (its credit counts from the last tick).
	times, counts := ticks(events)
	span := times[len(times)-1].Sub(times[0])
	after := len(events) - counts[times[0]]
	ratio := float64(after) / (rate * span.Seconds())
	t.Logf("lease %v: %d rounds (kept %d, handed over %d, re-taken by the same replica %d; late renewals failed %d, answered false %d); %d tokens in %v on the Redis clock: %.3f of the configured rate",
		lease, rounds, keptN, handedOver, reacquired, failedCall, answeredFalse, after, span.Round(time.Millisecond), ratio)
	if ratio < 0.95 || ratio > 1.02 {
		t.Fatalf("admitted %.3f of the configured rate over %v, want 0.95..1.02", ratio, span)
	}
}

func epochOf(t *testing.T, lock string) int64 {
	t.Helper()
	var e int64
	i := strings.LastIndexByte(lock, ':')
	if _, err := fmt.Sscan(lock[i+1:], &e); i < 0 || err != nil {
		t.Fatalf("lock value %q has no epoch", lock)
	}
	return e
}

// lineUp puts n people in q's line from several goroutines (the
// places are taken in whatever order the enters arrive; seq numbers them),
// checking every enter.
func lineUp(t *testing.T, s *redisstore.Store, q string, n int) {
	t.Helper()
	const workers = 16
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += workers {
				if _, err := s.Enter(context.Background(), q, userName(i)); err != nil {
					errs[w] = fmt.Errorf("enter %s: %w", userName(i), err)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
