package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// enterAll enters users at about perSec per second through the gateway.
func (r *rig) enterAll(gateway string, users []string, perSec int) {
	r.t.Helper()
	for _, err := range r.enterEach(gateway, users, perSec) {
		r.t.Fatal(err)
	}
}

func userNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

func issuedTotal(t *testing.T, rdb redis.UniversalClient, q string) int {
	v, err := rdb.HGet(context.Background(), redisstore.KeysFor(q).Dispatch(), redisstore.DispatchFieldIssuedTotal).Int()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

// TestDispatcherLeaderSIGKILL kills the leading dispatcher 10 times in a row
// while 3 replicas (service defaults: 600ms lease, 100ms tick) admit a queue.
// It checks every token is issued once and published at least once, and that
// after each kill the queue admits again within a second (make chaos; 5 s in
// make test, where a busy machine delays the new leader's first ticks): the
// first TokenIssued after the kill (its occurred_at, Redis TIME) comes
// within it of the moment just before the SIGKILL (Redis TIME too, same
// host).
func TestDispatcherLeaderSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.redisURL, r.amqpURL = testenv.RedisURL(t), testenv.AMQPURL(t)
	r.deleteTopology()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	keys := redisstore.KeysFor(r.q)
	l := r.listen(r.amqpURL)

	// 10 kills take ~10 s at 100 admissions/s; the line must still hold
	// people at the last kill, or no token could follow it (checked).
	const (
		kills      = 10
		rate       = 100
		minWaiting = rate // a full second of admissions still in line at each kill
	)
	maxGap := testenv.Pick(5*time.Second, time.Second)
	nUsers := testenv.Pick(2000, 4000)
	gateway := start(t, "queue-gateway", r.env(nil), true)
	r.createQueue(gateway.URL, rate)

	// Most of the line enters before any dispatcher runs (entering is slow
	// on a loaded machine), the rest while the leaders are being killed.
	users := userNames("u", nUsers)
	head := testenv.Pick(1500, 2500)
	enterStart := time.Now()
	r.enterAll(gateway.URL, users[:head], 400)
	t.Logf("%d entered in %s before the dispatchers started", head, time.Since(enterStart).Round(time.Millisecond))
	entered := make(chan struct{})
	go func() { defer close(entered); r.enterAll(gateway.URL, users[head:], 400) }()

	// No DISPATCH_LEASE / DISPATCH_TICK: the drill checks the defaults.
	disp := &dispatchers{r: r}
	for range 3 {
		disp.spawn(true)
	}
	redisNow := func(what string) time.Time {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatalf("%s: redis TIME: %v", what, err)
		}
		return now
	}
	// killAt is Redis TIME just before each SIGKILL; deadAt is Redis TIME
	// once the process is reaped. A token stamped between the two can only
	// be the dying leader's last tick, so the first token after the kill is
	// the first one stamped after deadAt, and its gap is counted from killAt.
	var killAt, deadAt []time.Time
	recovered := 0
	if !eventually(20*time.Second, func() bool { return issuedTotal(t, rdb, r.q) > 0 }) {
		t.Fatal("nothing issued within 20s")
	}
	last := issuedTotal(t, rdb, r.q)
	for k := range kills {
		// Each kill hits a leader that is issuing: wait for 20 more tokens
		// (~200 ms) since the previous leader took over.
		if !eventually(10*time.Second, func() bool { return issuedTotal(t, rdb, r.q) >= last+20 }) {
			t.Fatalf("kill %d: fewer than 20 tokens issued within 10s since the last takeover", k)
		}
		if w := rdb.ZCard(ctx, keys.Waiting()).Val(); w < minWaiting {
			t.Fatalf("kill %d: only %d people in line; the drill needs more users so a token must follow every kill", k, w)
		}
		lock, err := rdb.Get(ctx, keys.Lock()).Result()
		if err != nil {
			t.Fatalf("kill %d: no leader: %v", k, err)
		}
		p := disp.leader(lock)
		if p == nil {
			t.Fatalf("kill %d: leader %q is not one of ours", k, lock)
		}
		before := issuedTotal(t, rdb, r.q)
		killAt = append(killAt, redisNow("before kill"))
		p.Kill()
		deadAt = append(deadAt, redisNow("after kill"))
		disp.spawn(false)
		// Recovered: another replica leads and issues again.
		if eventually(10*time.Second, func() bool {
			l2, _ := rdb.Get(ctx, keys.Lock()).Result()
			last = issuedTotal(t, rdb, r.q)
			return l2 != "" && l2 != lock && last > before
		}) {
			recovered++
		} else {
			t.Errorf("kill %d: no new leader issuing within 10s", k)
		}
	}
	<-entered
	if !eventually(time.Duration(nUsers/rate+30)*time.Second, func() bool { return issuedTotal(t, rdb, r.q) >= nUsers }) {
		t.Fatalf("issued %d of %d", issuedTotal(t, rdb, r.q), nUsers)
	}
	issued := issuedTotal(t, rdb, r.q)
	tokenIDs := func() map[string]*v1.TokenIssued {
		out := map[string]*v1.TokenIssued{}
		for _, e := range l.byKey(events.RoutingKeyTokenIssued) {
			if m, ok := e.msg.(*v1.TokenIssued); ok && m.GetQueueId() == r.q {
				out[m.GetTokenId()] = m
			}
		}
		return out
	}
	eventually(20*time.Second, func() bool { return len(tokenIDs()) >= issued })
	delivered := tokenIDs()

	// Per user: distinct token ids from the events, and the token in Redis.
	perUser := map[string]map[string]bool{}
	var times []time.Time
	for id, m := range delivered {
		if perUser[m.GetUserId()] == nil {
			perUser[m.GetUserId()] = map[string]bool{}
		}
		perUser[m.GetUserId()][id] = true
		times = append(times, m.GetOccurredAt().AsTime())
	}
	dup, ok := 0, 0
	for _, u := range users {
		ids := perUser[u]
		status, _ := rdb.Get(ctx, keys.Status(u)).Result()
		tok, _, held := redisstore.ParseTokenMarker(status)
		redisID := tok.ID
		switch {
		case len(ids) > 1:
			dup++
			t.Errorf("%s has %d tokens: %v", u, len(ids), ids)
		case len(ids) == 1 && ids[redisID] && held:
			ok++
		default:
			t.Errorf("%s: event token ids %v, redis token %q status %q", u, ids, redisID, status)
		}
	}
	lost := issued - len(delivered)

	// Gap per kill: from just before the SIGKILL to the first TokenIssued
	// stamped after the leader was gone. Every kill had people in line, so
	// every kill must have a next token.
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var worst time.Duration
	gaps := make([]string, 0, kills)
	slow := 0
	for k := range killAt {
		i := sort.Search(len(times), func(i int) bool { return times[i].After(deadAt[k]) })
		if i == len(times) {
			t.Errorf("kill %d: no TokenIssued after the kill", k)
			gaps = append(gaps, "none")
			slow++
			continue
		}
		tail := i - sort.Search(len(times), func(i int) bool { return times[i].After(killAt[k]) })
		g := times[i].Sub(killAt[k])
		gaps = append(gaps, g.Round(time.Millisecond).String())
		worst = max(worst, g)
		t.Logf("kill %d: next TokenIssued %s after the kill (reaped after %s; %d tokens of the dying leader's last tick)",
			k, g.Round(time.Millisecond), deadAt[k].Sub(killAt[k]).Round(time.Millisecond), tail)
		if g > maxGap {
			slow++
			t.Errorf("kill %d: the queue admitted again %s after the kill; want within %s", k, g.Round(time.Millisecond), maxGap)
		}
	}
	t.Logf("issued=%d distinct delivered=%d deliveries=%d gaps per kill=%v", issued, len(delivered), len(l.byKey(events.RoutingKeyTokenIssued)), gaps)
	summary(t, "dispatcher-sigkill", ok, lost, dup, recovered, worst)
	if lost != 0 || dup != 0 || ok != nUsers || issued != nUsers || recovered != kills || len(killAt) != kills || slow != 0 {
		t.Fatalf("ok=%d lost=%d duplicated=%d issued=%d recovered=%d kills=%d slower than %s=%d; want ok=%d lost=0 duplicated=0 issued=%d recovered=%d kills=%d slow=0",
			ok, lost, dup, issued, recovered, len(killAt), maxGap, slow, nUsers, nUsers, kills, kills)
	}
}

// dispatchers are a drill's admission-dispatcher processes, by instance id.
type dispatchers struct {
	r     *rig
	mu    sync.Mutex
	procs map[string]*testenv.Service
	n     int
}

// spawn starts one more replica (INSTANCE_ID disp-<n>); with wait, once it
// is ready.
func (d *dispatchers) spawn(wait bool) {
	d.mu.Lock()
	d.n++
	id := fmt.Sprintf("disp-%d", d.n)
	d.mu.Unlock()
	p := start(d.r.t, "admission-dispatcher", d.r.env(map[string]string{"INSTANCE_ID": id}), wait)
	d.mu.Lock()
	if d.procs == nil {
		d.procs = map[string]*testenv.Service{}
	}
	d.procs[id] = p
	d.mu.Unlock()
}

// leader takes the process holding lock (a lease value "<owner>:<epoch>")
// out of the set and returns it, nil when it is none of ours.
func (d *dispatchers) leader(lock string) *testenv.Service {
	owner := lock[:max(0, strings.LastIndex(lock, ":"))]
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.procs[owner]
	delete(d.procs, owner)
	return p
}
