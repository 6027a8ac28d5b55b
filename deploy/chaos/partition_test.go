package chaos

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestLeaderPartitionedFromRedisWhileAnotherReachesIt: issue 27,
// partitions. The leading dispatcher runs on a host of its own (a network
// namespace joined by a veth pair), reaching Redis and RabbitMQ through
// proxies on the machine's end of the link; a second dispatcher runs on the
// machine. During the sale of 2,000 (make test: 600) the leader's link is taken down (both
// ends stay up: its requests hang, nothing is refused) for 5 s and then
// healed, so whatever it had on the way may land late. The other takes the
// lapsed lease; the partitioned one, back, is fenced. The same counts as
// the failover drills, all 0, and admission again within 5 s of the cut:
// the lease (600 ms) and a tick set it.
func TestLeaderPartitionedFromRedisWhileAnotherReachesIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rs := testenv.StartRedisServer(t)
	r.redisURL, r.amqpURL = rs.URL(), testenv.AMQPURL(t)
	h := testenv.StartHost(t)
	redisVia := testenv.StartProxyOn(t, h.Gateway, fmt.Sprintf("127.0.0.1:%d", rs.Port))
	u, err := url.Parse(r.amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	amqpVia := testenv.StartProxyOn(t, h.Gateway, u.Host)
	u.Host = amqpVia.Addr()
	rdb := testenv.StoreAt(t, rs.URL()).Client()
	lock := redisstore.KeysFor(r.q).Lock()

	// 40/s under make test: 600 people take 15 s, so people still wait when
	// the second dispatcher is up and the link goes down.
	saleThrough(t, r, "leader-partitioned-from-redis", rdb, 40, 80,
		func() {
			testenv.StartService(t, "admission-dispatcher", testenv.ServiceOptions{Host: h, Env: r.env(map[string]string{
				"INSTANCE_ID": "disp-cut", "REDIS_URL": "redis://" + redisVia.Addr() + "/0", "AMQP_URL": u.String(),
			})})
		},
		func(ctx context.Context) time.Time {
			holder, _ := rdb.Get(ctx, lock).Result()
			if !strings.HasPrefix(holder, "disp-cut:") {
				t.Fatalf("the partitioned host's dispatcher does not lead: lock %q", holder)
			}
			start(t, "admission-dispatcher", r.env(map[string]string{"INSTANCE_ID": "disp-machine"}), true)
			if w := rdb.ZCard(ctx, redisstore.KeysFor(r.q).Waiting()).Val(); w == 0 {
				t.Fatalf("nobody waits any more when the link goes down: the drill needs more people or a lower rate")
			}
			faultAt := time.Now()
			h.Cut()
			took := eventually(10*time.Second, func() bool {
				v, _ := rdb.Get(ctx, lock).Result()
				return strings.HasPrefix(v, "disp-machine:")
			})
			t.Logf("the machine's dispatcher leads=%v %s after the cut", took, time.Since(faultAt).Round(time.Millisecond))
			time.Sleep(5 * time.Second)
			h.Heal()
			return faultAt
		})
}
