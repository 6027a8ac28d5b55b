package chaos

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestGatewayCutOffFromTheSentinels: issue 27, partitions. Everyone logs
// in to the sentinels, the sale's gateway as a user of its own. During the
// sale of 2,000 (make test: 600) every sentinel shuts its door to the
// gateway alone (the user off, its connections closed: the sentinels it
// discovers refuse it too); the sentinels and the other services still
// reach each other: for 3 s it goes on serving, for it needs the
// sentinels only to find the primary, and every poll of a probe person is
// answered 200. Then the primary is killed and a replica promoted while the
// gateway cannot hear of it: its requests fail (503, the old primary is
// gone; counted) until, 3 s after the promotion, the sentinels are reachable again
// and its next request finds the new primary. The same counts as the
// failover drills, all 0; how long the gateway took to answer again after
// the heal is measured.
func TestGatewayCutOffFromTheSentinels(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// Everyone logs in to the sentinels, the gateway as a user of its own:
	// their door can be shut to it alone.
	set := testenv.StartSentinelSetWith(t, testenv.SentinelOptions{Replicas: 2, Doors: true})
	r.redisURL = set.URL
	r.gatewayEnv = map[string]string{"REDIS_URL": set.GatewayURL()}
	var gw string
	r.onGateway = func(url string) {
		gw = url
		if res := r.call(http.MethodPost, gw+"/api/v1/queues/"+r.q+"/enter", "probe", "", "", nil); res.status != http.StatusOK {
			t.Fatalf("the probe's enter: %d %v", res.status, res.body)
		}
	}
	// 40 admissions a second, below the 80 entering: people wait when the
	// primary is killed, so admission resumes on the dispatchers' side
	// while the gateway still cannot enter anyone.
	failoverSale(t, r, "gateway-cut-off-from-sentinels", testenv.StoreAt(t, set.URL).Client(), 40, 80,
		func(ctx context.Context) time.Time {
			if err := set.ShutOut(ctx); err != nil {
				t.Fatal(err)
			}
			// The probe entered before the sale's people: admitted or
			// ordered by now, its poll answers 200 whatever it says.
			polls, refused := probe(r, gw, func(res response) {
				t.Logf("probe poll with the sentinels cut: %d %v", res.status, res.body)
			})
			t.Logf("with the sentinels cut and the primary up: %d of %d polls answered other than 200", refused, polls)
			// make chaos holds it; make test, where a poll on two busy
			// cores can outlast the client's read timeout, reports it.
			if refused != 0 && full {
				t.Errorf("%d of %d polls failed while only the sentinels were out of reach; want 0", refused, polls)
			}
			faultAt := killSentinelPrimary(t, ctx, set)
			// Promoted, but the gateway cannot hear of it: it still
			// looks for the old primary, and answers 503.
			polls, refused = probe(r, gw, func(res response) {
				if res.status != http.StatusServiceUnavailable {
					t.Errorf("probe poll after the promotion, the sentinels cut: %d %v, want 503", res.status, res.body)
				}
			})
			t.Logf("after the promotion, the sentinels still cut: %d of %d polls answered 503", refused, polls)
			if refused == 0 {
				t.Errorf("every poll was answered after the promotion with the sentinels cut: the gateway was not cut off")
			}
			healed := time.Now()
			if err := set.LetIn(ctx); err != nil {
				t.Fatal(err)
			}
			back := eventually(time.Minute, func() bool { return r.position(gw, "probe").status == http.StatusOK })
			t.Logf("the gateway answered again=%v %s after the heal", back, time.Since(healed).Round(time.Millisecond))
			if !back {
				t.Errorf("the gateway did not answer again within a minute of the heal")
			}
			return faultAt
		})
}

// probe polls the probe person's position on gw every 100 ms for 3 s
// and returns how many polls it made and how many were not
// answered 200, each of which it hands to refused.
func probe(r *rig, gw string, refused func(response)) (polls, notOK int) {
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		polls++
		if res := r.position(gw, "probe"); res.status != http.StatusOK {
			notOK++
			refused(res)
		}
	}
	return polls, notOK
}
