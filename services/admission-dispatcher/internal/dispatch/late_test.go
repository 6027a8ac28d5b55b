package dispatch_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// The finding: holding 5 of a leader's tick requests (not replies) 1.6 s
// each on the way to Redis put 6 token id/secret pairs on two users each.
// Each held request's retry (go-redis, after its 1 s read timeout) applied
// the tick; the leader went on ticking; the held copy then arrived and, its
// id not being the last applied one, was applied again with the same
// grants. Now a tick older than the last applied one is refused: every
// token id and secret, in Redis and in the published TokenIssued events,
// belongs to one user, and nobody is admitted twice.
func TestDelayedTickRequestsIssueNoTokenTwice(t *testing.T) {
	t.Parallel()
	const held, heldFor = 5, 1600 * time.Millisecond
	c := newCluster(t, dispatch.Options{})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionRatePerSec, cfg.MaxQueueSize, cfg.TokenTTLSeconds = 175, 10_000, 600
	})
	c.fill(q, 3000)
	k := redisstore.KeysFor(q)

	slow, proxy := proxiedStore(t)
	// A tick is the only script with the queue's outbox and in-flight set
	// among its keys.
	proxy.DelayRequests(func(req []byte) bool {
		return bytes.Contains(req, []byte(k.Outbox())) && bytes.Contains(req, []byte(k.Inflight()))
	}, heldFor, held)
	runDispatcher(t, slow, c.pub, nil, dispatch.Options{Tick: 100 * time.Millisecond, Lease: 3 * time.Second, Queues: []string{q}})

	testenv.WaitFor(t, 60*time.Second, "every held tick request delivered late", func() bool { return proxy.DelayedDone() >= held })
	time.Sleep(500 * time.Millisecond) // the last late copy runs, the leader ticks on
	// Paused, the queue admits nobody more: the counts below are of one
	// state.
	if _, _, err := c.store.UpdateConfig(context.Background(), q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		cfg.State = queue.Paused
		return cfg, nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	testenv.WaitFor(t, 20*time.Second, "the outbox relayed", func() bool {
		return c.rdb.XLen(context.Background(), k.Outbox()).Val() == 0
	})

	ctx := context.Background()
	var users []string
	iter := c.rdb.Scan(ctx, 0, k.Status("*"), 1000).Iterator()
	for iter.Next(ctx) {
		users = append(users, strings.TrimPrefix(iter.Val(), k.Status("")))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	ids, secrets := map[string]string{}, map[string]string{}
	shared := 0
	for _, u := range users {
		tok, _, ok := redisstore.ParseTokenMarker(c.rdb.Get(ctx, k.Status(u)).Val())
		if !ok {
			t.Errorf("%s's marker holds no token", u)
			continue
		}
		if other, dup := ids[tok.ID]; dup {
			shared++
			t.Errorf("token id %s held by %s and %s", tok.ID, other, u)
		}
		if other, dup := secrets[tok.Secret]; dup {
			t.Errorf("a secret held by %s and %s", other, u)
		}
		ids[tok.ID], secrets[tok.Secret] = u, u
	}
	byToken, byUser := map[string]string{}, map[string]int{}
	for _, e := range issued(c.pub) {
		if e.QueueID != q {
			continue
		}
		byUser[e.UserID]++
		if other, dup := byToken[e.TokenID]; dup && other != e.UserID {
			shared++
			t.Errorf("TokenIssued %s for %s and %s", e.TokenID, other, e.UserID)
		}
		byToken[e.TokenID] = e.UserID
	}
	twice := 0
	for u, n := range byUser {
		if n > 1 {
			twice++
			t.Errorf("%s admitted %d times", u, n)
		}
	}
	total := c.rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldIssuedTotal).Val()
	waiting := c.rdb.ZCard(ctx, k.Waiting()).Val()
	if len(byUser) != len(users) || total != strconv.Itoa(len(users)) || int(waiting)+len(users) != 3000 {
		t.Errorf("%d users admitted by the events, %d tokens, issuedTotal %s, %d waiting; want the same count three times and 3000 in all",
			len(byUser), len(users), total, waiting)
	}
	t.Logf("%d tick requests held %v: %d tokens issued, %d shared, %d users admitted twice", proxy.DelayedDone(), heldFor, len(users), shared, twice)
}
