//go:build chaosfull

// Built only for make chaos (-tags chaosfull): the Redis failover drills
// beyond the one make test runs (TestRedisFailoverWithLaggingReplicas).
package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestRedisPrimaryKillUnderLoad: issue 27, finding 3 (a plain primary kill
// under heavy load lost 1 acknowledged place and rolled back 16
// admissions). The Sentinel set of TestRedisFailoverWithLaggingReplicas
// with its replicas in step, 2,000 people entering as fast as the machine
// takes them (400/s) while two dispatchers admit at 200/s: the primary is
// killed mid-stream, its replicas' links cut with it. The same counts, all
// 0, and admission again within 5 s.
func TestRedisPrimaryKillUnderLoad(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	set := testenv.StartSentinelSet(t, 2, true)
	r.redisURL = set.URL
	failoverSale(t, r, "redis-primary-kill-under-load", testenv.StoreAt(t, set.URL).Client(), 200, 400,
		func(ctx context.Context) time.Time { return killSentinelPrimary(t, ctx, set) })
}
