package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestOldPrimaryIsolatedWhileItsClientsStillReachIt: issue 27,
// partitions. The Redis primary is cut off from its sentinels and its
// replicas (its door shut to them alone, their connections closed and every new
// one: testenv.SentinelSet.Isolate, which turns off the users they log in
// as and closes their connections) while the services' connections to it
// pass: a split brain. The sentinels promote a replica; until the services
// learn of it they still change the old primary, which has no replica to
// confirm anything, so nothing it does is acknowledged (503, no event
// published). 3 s after the promotion the old primary is reachable again
// and the sentinels make it a replica of the new one, discarding what it
// did alone. During the sale of 2,000 (make test: 600), two dispatchers,
// every admitted person ordering: the same counts as the failover drills,
// all 0, and admission again within 5 s of the cut, set by the sentinels'
// down-after (1 s) and election.
func TestOldPrimaryIsolatedWhileItsClientsStillReachIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	set := testenv.StartSentinelSetWith(t, testenv.SentinelOptions{Replicas: 2, Doors: true})
	r.redisURL = set.URL
	old := set.Node(set.Primary)
	// 40 admissions a second, below the 80 entering: people wait when the
	// primary is isolated, so admission can resume before entering does.
	failoverSale(t, r, "old-primary-isolated", testenv.StoreAt(t, set.URL).Client(), 40, 80,
		func(ctx context.Context) time.Time {
			if m := set.Master(ctx); m != set.Primary {
				t.Fatalf("the sentinels name port %d the primary before the fault, want %d (replicas %v): a failover without one",
					m, set.Primary, set.Replicas)
			}
			before := replOffset(ctx, old)
			faultAt := time.Now()
			if err := set.Isolate(ctx, set.Primary); err != nil {
				t.Fatal(err)
			}
			promoted := eventually(30*time.Second, func() bool { m := set.Master(ctx); return m != 0 && m != set.Primary })
			t.Logf("promoted=%v (port %d) %s after the isolation", promoted, set.Master(ctx), time.Since(faultAt).Round(time.Millisecond))
			if !promoted {
				t.Fatalf("no replica was promoted while the primary was isolated")
			}
			// The old primary took its clients' changes all along: it is
			// still a primary, and changed since the cut.
			time.Sleep(3 * time.Second)
			role, after := old.Do(ctx, "ROLE").String(), replOffset(ctx, old)
			t.Logf("the isolated primary: %s, replication offset %d at the cut, %d now", role, before, after)
			if !strings.Contains(role, "master") || after <= before {
				t.Errorf("the isolated primary: %s, offset %d -> %d; want a master its clients kept changing (the split brain)", role, before, after)
			}
			if err := set.Rejoin(ctx, set.Primary); err != nil {
				t.Fatal(err)
			}
			// The sentinels turn it into a replica some 20 s after they
			// reach it again (measured: 27.8 s after the isolation).
			rejoined := eventually(time.Minute, func() bool {
				return strings.Contains(old.Do(ctx, "ROLE").String(), "slave")
			})
			t.Logf("the old primary is a replica again=%v, %s after the isolation", rejoined, time.Since(faultAt).Round(time.Millisecond))
			if !rejoined {
				t.Errorf("the old primary did not become a replica of the new one within a minute")
			}
			return faultAt
		})
}

// replOffset is a Redis node's master_repl_offset (-1 when it does not
// answer): it grows with every change the node makes.
func replOffset(ctx context.Context, c *redis.Client) int64 {
	n, err := testenv.ReplOffset(ctx, c)
	if err != nil {
		return -1
	}
	return n
}
