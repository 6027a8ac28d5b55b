package chaos

import (
	"context"
	"fmt"
	"net/http"
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
	tick := time.NewTicker(time.Second / time.Duration(perSec))
	defer tick.Stop()
	var wg sync.WaitGroup
	errs := make(chan string, len(users))
	for _, u := range users {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := r.call(http.MethodPost, gateway+"/api/v1/queues/"+r.q+"/enter", u, "", "", nil); res.status != http.StatusOK {
				errs <- fmt.Sprintf("enter %s: %d %v", u, res.status, res.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		r.t.Fatal(e)
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

// TestDispatcherLeaderSIGKILL kills the leading dispatcher again and again
// while 3 replicas admit a queue, and checks every token is issued once and
// published at least once.
func TestDispatcherLeaderSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.redisURL, r.amqpURL = testenv.RedisURL(t), testenv.AMQPURL(t)
	r.deleteTopology()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	keys := redisstore.KeysFor(r.q)
	l := r.listen(r.amqpURL)

	nUsers, kills := pick(600, 2000), pick(3, 10)
	gateway := start(t, "queue-gateway", r.env(nil), true)
	r.createQueue(gateway.URL, 100)

	var mu sync.Mutex
	disp := map[string]*testenv.Service{}
	n := 0
	spawn := func(wait bool) {
		n++
		id := fmt.Sprintf("disp-%d", n)
		p := start(t, "admission-dispatcher", r.env(map[string]string{"INSTANCE_ID": id, "DISPATCH_LEASE": "1s", "DISPATCH_TICK": "100ms"}), wait)
		mu.Lock()
		disp[id] = p
		mu.Unlock()
	}
	for range 3 {
		spawn(true)
	}
	users := userNames("u", nUsers)
	entered := make(chan struct{})
	go func() { defer close(entered); r.enterAll(gateway.URL, users, 400) }()

	// Kill the leader every ~1.2 s once issuing started.
	var killTimes []time.Time
	recovered := 0
	if !eventually(20*time.Second, func() bool { return issuedTotal(t, rdb, r.q) > 0 }) {
		t.Fatal("nothing issued within 20s")
	}
	for k := range kills {
		time.Sleep(1200 * time.Millisecond)
		lock, err := rdb.Get(ctx, keys.Lock()).Result()
		if err != nil {
			t.Fatalf("kill %d: no leader: %v", k, err)
		}
		owner := lock[:strings.LastIndex(lock, ":")]
		mu.Lock()
		p := disp[owner]
		delete(disp, owner)
		mu.Unlock()
		if p == nil {
			t.Fatalf("kill %d: leader %q is not one of ours", k, lock)
		}
		before := issuedTotal(t, rdb, r.q)
		killTimes = append(killTimes, time.Now())
		p.Kill()
		spawn(false)
		// Recovered: another replica leads and issues again (unless all are admitted).
		if eventually(10*time.Second, func() bool {
			l2, _ := rdb.Get(ctx, keys.Lock()).Result()
			return l2 != "" && l2 != lock && (issuedTotal(t, rdb, r.q) > before || issuedTotal(t, rdb, r.q) >= nUsers)
		}) {
			recovered++
		} else {
			t.Errorf("kill %d: no new leader issuing within 10s", k)
		}
	}
	<-entered
	if !eventually(time.Duration(nUsers/100+30)*time.Second, func() bool { return issuedTotal(t, rdb, r.q) >= nUsers }) {
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
		redisID, _ := rdb.HGet(ctx, keys.Token(u), redisstore.TokenFieldID).Result()
		status, _ := rdb.Get(ctx, keys.Status(u)).Result()
		switch {
		case len(ids) > 1:
			dup++
			t.Errorf("%s has %d tokens: %v", u, len(ids), ids)
		case len(ids) == 1 && ids[redisID] && status == redisstore.StatusTokenIssued+":"+redisID:
			ok++
		default:
			t.Errorf("%s: event token ids %v, redis token %q status %q", u, ids, redisID, status)
		}
	}
	lost := issued - len(delivered)

	// Gap per kill: from the last TokenIssued before the kill to the first after it.
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var maxGap time.Duration
	gaps := []string{}
	for _, kt := range killTimes {
		i := sort.Search(len(times), func(i int) bool { return times[i].After(kt) })
		if i == 0 || i == len(times) {
			continue
		}
		g := times[i].Sub(times[i-1])
		gaps = append(gaps, g.Round(time.Millisecond).String())
		maxGap = max(maxGap, g)
	}
	t.Logf("issued=%d distinct delivered=%d deliveries=%d gaps per kill=%v", issued, len(delivered), len(l.byKey(events.RoutingKeyTokenIssued)), gaps)
	summary(t, "dispatcher-sigkill", ok, lost, dup, recovered, maxGap)
	if lost != 0 || dup != 0 || ok != nUsers || issued != nUsers || recovered != kills {
		t.Fatalf("ok=%d lost=%d duplicated=%d issued=%d recovered=%d; want ok=%d lost=0 duplicated=0 issued=%d recovered=%d",
			ok, lost, dup, issued, recovered, nUsers, nUsers, kills)
	}
}
