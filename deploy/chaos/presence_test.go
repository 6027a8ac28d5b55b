package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// poller polls the gateway for user as the server tells them (retryAfterMs,
// the ticket sent back) until ADMITTED or ctx ends; it returns when it
// first polled.
func (r *rig) poller(ctx context.Context, gateway, user string) (first time.Time, err error) {
	ticket := ""
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gateway+"/api/v1/queues/"+r.q+"/position", nil)
		req.Header.Set("Authorization", "Bearer "+r.jwt(user))
		if ticket != "" {
			req.Header.Set("X-Queue-Ticket", ticket)
		}
		if first.IsZero() {
			first = time.Now()
		}
		res, err := client.Do(req)
		if ctx.Err() != nil {
			return first, fmt.Errorf("%s: not admitted before the drill ended", user)
		}
		wait := time.Second
		if err == nil {
			var v struct {
				State        string `json:"state"`
				Ticket       string `json:"ticket"`
				RetryAfterMs int64  `json:"retryAfterMs"`
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && json.Unmarshal(b, &v) == nil {
				switch v.State {
				case "ADMITTED":
					return first, nil
				case "ABANDONED", "NOT_IN_QUEUE", "EXPIRED":
					return first, fmt.Errorf("%s: told %s while polling", user, v.State)
				}
				ticket = v.Ticket
				wait = time.Duration(v.RetryAfterMs) * time.Millisecond
			}
		}
		select {
		case <-ctx.Done():
			return first, fmt.Errorf("%s: not admitted before the drill ended", user)
		case <-time.After(wait):
		}
	}
}

// TestAwayPeopleArePassedOverAndThePresentAdmittedInOrder is presence's
// drill (the queue knob awayAfterSeconds): a paused queue fills, 40 % of
// the people never poll again after entering, the rest poll as the server
// tells them; the queue resumes at 50/s with awayAfterSeconds=10. The
// silent get at most 3 % of the tokens, every poller is admitted, in their
// order among themselves, and a few of the silent who start polling again
// after the resume are admitted (at once, if their place had passed). The
// silent who never come back are removed once their grace is over, a
// UserAbandoned each. The leading dispatcher is SIGKILLed a second after
// the resume; the other takes over, and nobody is lost or admitted twice.
// make chaos: 1,000 people, paused 20 s, and the
// timings (every poller within the rate's time + 2 s of the resume, each
// returning person within 2 s of their first poll); make test: 300 people
// and counts only.
func TestAwayPeopleArePassedOverAndThePresentAdmittedInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.redisURL = testenv.RedisURL(t)
	presenceDrill(t, r, testenv.Redis(t), "presence", "the leader SIGKILLed", func(ctx context.Context, disp *dispatchers, rdb redis.UniversalClient) time.Duration {
		lock, err := rdb.Get(ctx, redisstore.KeysFor(r.q).Lock()).Result()
		if err != nil {
			t.Fatalf("no leader a second after the resume: %v", err)
		}
		leader := disp.leader(lock)
		if leader == nil {
			t.Fatalf("leader %q is not one of ours", lock)
		}
		leader.Kill()
		return 0
	})
}

// TestPresenceThroughARedisFailoverToALaggingReplica is the same drill on
// a Sentinel set (primary, two replicas): a second after the resume both
// replicas are made to run 2 s behind and a second later the primary is
// killed, its replicas' links cut, so the replica promoted lacks the last
// batches of sightings and whatever the ticks did in them. The pollers'
// sightings are older there than they were, and none arrive while the
// sentinels elect: the first batch after the gap starts a new run of
// sightings, and nobody is taken for away until it is awayAfterSeconds
// old. The same counts: no poller passed over (all admitted, in their
// order), the silent at most 3 % of the tokens, nobody admitted twice.
func TestPresenceThroughARedisFailoverToALaggingReplica(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	set := testenv.StartSentinelSet(t, 2, true)
	r.redisURL = set.URL
	presenceDrill(t, r, testenv.StoreAt(t, set.URL).Client(), "presence-redis-failover", "the Redis primary killed, its replicas 2 s behind", func(ctx context.Context, _ *dispatchers, _ redis.UniversalClient) time.Duration {
		set.Lag(2 * time.Second)
		time.Sleep(time.Second)
		return time.Since(killSentinelPrimary(t, ctx, set))
	})
}

// presenceDrill runs the presence drill (summary name drill) on r's Redis
// (rdb reaches it), with fault done a second after the resume; the time
// fault returns (the outage it waited out) is added to the pollers'
// deadline.
func presenceDrill(t *testing.T, r *rig, rdb redis.UniversalClient, drill, faultName string, fault func(context.Context, *dispatchers, redis.UniversalClient) time.Duration) {
	r.amqpURL = testenv.AMQPURL(t)
	r.deleteTopology()
	l := r.listen(r.amqpURL)
	const rate, away = 50, 10
	n, back := testenv.Pick(300, 1000), testenv.Pick(10, 20)
	gateway := start(t, "queue-gateway", r.env(nil), true)
	r.createQueue(gateway.URL, rate)
	if res := r.call(http.MethodPut, gateway.URL+"/admin/v1/queues/"+r.q, "ops", "admin", "",
		map[string]any{"state": "PAUSED", "awayAfterSeconds": away}); res.status != http.StatusOK || res.body["awayGraceSeconds"] != float64(away) {
		t.Fatalf("pause with presence on: %d %v, want 200 with awayGraceSeconds following awayAfterSeconds", res.status, res.body)
	}
	// Two dispatchers: the leader is SIGKILLed while it passes over the
	// away, and the other takes over.
	disp := &dispatchers{r: r}
	disp.spawn(true)
	disp.spawn(true)

	// Two in five never poll again after entering; the first `back` of
	// them start polling after the resume.
	users := userNames("p", n)
	var silent, pollers, returning []string
	for i, u := range users {
		if i%5 == 1 || i%5 == 3 {
			silent = append(silent, u)
		} else {
			pollers = append(pollers, u)
		}
	}
	returning, silent = silent[:back], silent[back:]

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	firstPoll := map[string]time.Time{}
	poll := func(u string) {
		defer wg.Done()
		first, err := r.poller(ctx, gateway.URL, u)
		mu.Lock()
		defer mu.Unlock()
		firstPoll[u] = first
		if err != nil {
			errs = append(errs, err)
		}
	}
	entered := time.Now()
	r.enterAll(gateway.URL, users, 200)
	for _, u := range pollers {
		wg.Add(1)
		go poll(u)
	}
	// The silent are away once awayAfterSeconds passed since their enter
	// and a sweep ran: resume 20 s after the first enter (make chaos), or
	// once everyone entered + away + 5 s (make test).
	resumeAt := entered.Add(20 * time.Second)
	if !full {
		resumeAt = time.Now().Add((away + 5) * time.Second)
	}
	time.Sleep(time.Until(resumeAt))
	resumed := time.Now()
	r.setState(gateway.URL, "OPEN")
	for _, u := range returning {
		wg.Add(1)
		go poll(u)
	}
	// A second in (about 50 admitted, the away among them passed over),
	// the fault.
	time.Sleep(time.Second)
	outage := fault(ctx, disp, rdb)
	killedAt := issuedTotal(t, rdb, r.q)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}

	// Every token, once: who, when, which place.
	type admission struct {
		user string
		at   time.Time
		seq  uint64
	}
	var admitted []admission
	lastCount := -1
	eventually(30*time.Second, func() bool {
		issued := l.distinct(events.RoutingKeyTokenIssued)
		settled := len(issued) == lastCount && len(issued) >= len(pollers)+len(returning)
		lastCount = len(issued)
		if settled {
			admitted = admitted[:0]
			for _, e := range issued {
				if m, ok := e.msg.(*v1.TokenIssued); ok {
					admitted = append(admitted, admission{m.GetUserId(), m.GetOccurredAt().AsTime(), m.GetSequence()})
				}
			}
		}
		return settled
	})
	sort.Slice(admitted, func(i, j int) bool {
		if !admitted[i].at.Equal(admitted[j].at) {
			return admitted[i].at.Before(admitted[j].at)
		}
		return admitted[i].seq < admitted[j].seq
	})
	by := map[string]admission{}
	for _, a := range admitted {
		by[a.user] = a
	}
	if len(by) != len(admitted) {
		t.Errorf("%d tokens for %d people: someone was admitted twice", len(admitted), len(by))
	}
	silentIssued := 0
	for _, u := range silent {
		if _, ok := by[u]; ok {
			silentIssued++
		}
	}
	t.Logf("%d entered, %d polling, %d silent (%d of them returning after the resume); %s at %d issued; %d tokens, %d to the silent who never returned",
		n, len(pollers), len(silent)+len(returning), len(returning), faultName, killedAt, len(admitted), silentIssued)
	if total := issuedTotal(t, rdb, r.q); total != len(admitted) {
		t.Errorf("%d tokens issued (Redis), %d distinct TokenIssued: want one event each", total, len(admitted))
	}
	if len(admitted) == 0 || float64(silentIssued) > 0.03*float64(len(admitted)) {
		t.Errorf("%d of %d tokens went to the silent: want at most 3 %%", silentIssued, len(admitted))
	}
	var order []uint64
	last := time.Time{}
	for _, a := range admitted {
		if slices.Contains(pollers, a.user) {
			order = append(order, a.seq)
			last = a.at
		}
	}
	if len(order) != len(pollers) {
		t.Errorf("%d of %d pollers admitted", len(order), len(pollers))
	}
	if !slices.IsSorted(order) {
		t.Errorf("the pollers were not admitted in their order: places %v", order)
	}
	var slowest time.Duration
	for _, u := range returning {
		a, ok := by[u]
		if !ok {
			t.Errorf("%s came back after the resume and was not admitted", u)
			continue
		}
		took := a.at.Sub(firstPoll[u])
		slowest = max(slowest, took)
		if full && took > 2*time.Second {
			t.Errorf("%s admitted %v after its first poll, want within 2 s", u, took)
		}
	}
	t.Logf("the %d who came back admitted at most %v after their first poll", len(returning), slowest.Round(time.Millisecond))
	allowed := time.Duration(float64(len(pollers)+len(returning))/rate*float64(time.Second)) + 2*time.Second + outage
	t.Logf("the last poller admitted %v after the resume (the rate allows %v with 2 s and the outage)", last.Sub(resumed).Round(time.Millisecond), allowed)
	if full && last.Sub(resumed) > allowed {
		t.Errorf("the last poller was admitted %v after the resume, want within %v", last.Sub(resumed), allowed)
	}

	// The silent never admitted are removed once their grace is over: one
	// UserAbandoned each, and nobody else.
	want := len(silent) - silentIssued
	var gone []string
	eventually(time.Duration(away+30)*time.Second, func() bool {
		gone = gone[:0]
		for _, e := range l.distinct(events.RoutingKeyUserAbandoned) {
			if m, ok := e.msg.(*v1.UserAbandoned); ok {
				gone = append(gone, m.GetUserId())
			}
		}
		return len(gone) >= want
	})
	sort.Strings(gone)
	for _, u := range gone {
		if !slices.Contains(silent, u) {
			t.Errorf("%s was abandoned but was not silent", u)
		}
		if _, ok := by[u]; ok {
			t.Errorf("%s was abandoned and admitted", u)
		}
	}
	if len(gone) != want {
		// Say where the missing ones stand, for the next look at it.
		var missing []string
		for _, u := range silent {
			if _, admitted := by[u]; admitted || slices.Contains(gone, u) {
				continue
			}
			// Redis first: the position call below is a sighting.
			k := redisstore.KeysFor(r.q)
			ctx := context.Background()
			place := func(key string) string {
				v, err := rdb.ZScore(ctx, key, u).Result()
				if err != nil {
					return "-"
				}
				return fmt.Sprint(int64(v))
			}
			d, _ := rdb.HMGet(ctx, k.Dispatch(), "frontier", "presenceMs", "presenceSinceMs").Result()
			status, _ := rdb.Get(ctx, k.Status(u)).Result()
			res := r.call(http.MethodGet, gateway.URL+"/api/v1/queues/"+r.q+"/position", u, "", "", nil)
			missing = append(missing, fmt.Sprintf("%s: %d %v %v (waiting %s away %s skipped %s seen %s status %q; frontier, presenceMs, presenceSinceMs %v; now %d)",
				u, res.status, res.body["state"], res.body["position"], place(k.Waiting()), place(k.Away()), place(k.Skipped()), place(k.Seen()),
				status, d, time.Now().UnixMilli()))
		}
		t.Errorf("%d UserAbandoned events, want %d (every silent person not admitted); without one: %v", len(gone), want, missing)
	}
	summary(t, drill, len(order), len(pollers)-len(order), 0, len(returning), time.Duration(0))
}
