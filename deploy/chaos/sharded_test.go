//go:build chaosfull

// Built only for make chaos (-tags chaosfull): eight processes on a private
// cluster beside the other drills made make test's timing drills fail on a
// 2-core machine. make test runs the in-process form
// (TestShardedQueueSurvivesSlotMoveAndLeaderKill in the dispatcher).

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestShardedQueueDispatcherSIGKILLAndSlotMove runs the real binaries on a
// private 3-master Redis Cluster: a queue of three lines, people entering
// through the gateway, three dispatcher replicas. The leading dispatcher is
// SIGKILLed three times, and after the first kill line 1's slot moves to
// another master. Full form only (make chaos). Everyone is admitted, each with one token.
func TestShardedQueueDispatcherSIGKILLAndSlotMove(t *testing.T) {
	t.Parallel()
	const shards, rate, kills = 3, 300, 3
	r := newRig(t)
	addrs := testenv.StartRedisClusterNodes(t, 3)
	r.redisURL, r.amqpURL = "redis+cluster://"+strings.Join(addrs, ","), testenv.AMQPURL(t)
	r.deleteTopology()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	l := r.listen(r.amqpURL)

	gateway := start(t, "queue-gateway", r.env(nil), true)
	if res := r.call(http.MethodPut, gateway.URL+"/admin/v1/queues/"+r.q, "ops", "admin", "",
		map[string]any{"admissionRatePerSec": rate, "activationSpreadMs": 0, "shards": shards}); res.status != http.StatusCreated {
		t.Fatalf("create queue: %d %v", res.status, res.body)
	}
	nUsers := 3600
	users := userNames("s", nUsers)
	head := nUsers * 2 / 3
	// Enters go on while the slot moves: a 503 (the store not answering
	// for a moment) is tried again after its Retry-After, as the page does.
	enter := func(us []string, perSec int) error {
		tick := time.NewTicker(time.Second / time.Duration(perSec))
		defer tick.Stop()
		var wg sync.WaitGroup
		errs := make(chan error, len(us))
		for _, u := range us {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 0; ; try++ {
					res := r.call(http.MethodPost, gateway.URL+"/api/v1/queues/"+r.q+"/enter", u, "", "", nil)
					switch {
					case res.status == http.StatusOK:
						return
					case res.status == http.StatusServiceUnavailable && try < 20:
						time.Sleep(200 * time.Millisecond)
					default:
						errs <- fmt.Errorf("enter %s: %d %v", u, res.status, res.body)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	if err := enter(users[:head], 400); err != nil {
		t.Fatal(err)
	}
	entered := make(chan error, 1)
	go func() { entered <- enter(users[head:], 200) }()

	issued := func() int { // over every line
		n := 0
		for line := range shards {
			v, _ := rdb.HGet(ctx, redisstore.KeysFor(queue.LineID(r.q, line)).Dispatch(), redisstore.DispatchFieldIssuedTotal).Int()
			n += v
		}
		return n
	}
	disp := &dispatchers{r: r}
	for range 3 {
		disp.spawn(true)
	}
	lockKey := redisstore.KeysFor(r.q).Lock()
	last := 0
	for k := range kills {
		if !eventually(15*time.Second, func() bool { return issued() >= last+60 }) {
			t.Fatalf("kill %d: fewer than 60 tokens issued within 15 s since the last takeover (%d)", k, issued())
		}
		lock, err := rdb.Get(ctx, lockKey).Result()
		if err != nil {
			t.Fatalf("kill %d: no leader: %v", k, err)
		}
		p := disp.leader(lock)
		if p == nil {
			t.Fatalf("kill %d: leader %q is not one of ours", k, lock)
		}
		before := issued()
		p.Kill()
		disp.spawn(false)
		if !eventually(10*time.Second, func() bool {
			l2, _ := rdb.Get(ctx, lockKey).Result()
			last = issued()
			return l2 != "" && l2 != lock && last > before
		}) {
			t.Fatalf("kill %d: no new leader issuing within 10 s", k)
		}
		t.Logf("kill %d: %s SIGKILLed with %d issued; the next leader issues", k, lock, before)
		if k == 0 {
			move := testenv.NewSlotMove(t, rdb, redisstore.KeysFor(queue.LineID(r.q, 1)).Waiting())
			move.Begin()
			time.Sleep(300 * time.Millisecond) // enters and ticks while the slot is half open
			move.MoveAll()
			move.End()
			t.Logf("line 1's slot %d moved to another master", move.Slot)
		}
	}
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
	if !eventually(time.Duration(nUsers/rate+30)*time.Second, func() bool { return issued() >= nUsers }) {
		for line := range shards {
			k := redisstore.KeysFor(queue.LineID(r.q, line))
			d, _ := rdb.HGetAll(ctx, k.Dispatch()).Result()
			t.Logf("line %d: %d waiting, dispatch %v", line, rdb.ZCard(ctx, k.Waiting()).Val(), d)
		}
		t.Fatalf("issued %d of %d", issued(), nUsers)
	}
	tokens := func() map[string]map[string]bool {
		out := map[string]map[string]bool{}
		for _, e := range l.byKey(events.RoutingKeyTokenIssued) {
			if m, ok := e.msg.(*v1.TokenIssued); ok && m.GetQueueId() == r.q {
				if out[m.GetUserId()] == nil {
					out[m.GetUserId()] = map[string]bool{}
				}
				out[m.GetUserId()][m.GetTokenId()] = true
			}
		}
		return out
	}
	eventually(20*time.Second, func() bool { return len(tokens()) >= nUsers })
	perUser := tokens()
	ok, dup, lost := 0, 0, 0
	lines := make([]int, shards)
	for _, u := range users {
		switch ids := perUser[u]; len(ids) {
		case 0:
			lost++
		case 1:
			ok++
			for id := range ids {
				lines[queue.TokenLine(id)]++
			}
		default:
			dup++
			t.Errorf("%s has %d tokens: %v", u, len(ids), ids)
		}
	}
	t.Logf("%d people over %d lines %v: %d admitted once, %d lost, %d with two tokens; issued %d", nUsers, shards, lines, ok, lost, dup, issued())
	summary(t, "sharded-sigkill-slotmove", ok, lost, dup, kills, 0)
	if ok != nUsers || lost != 0 || dup != 0 || issued() != nUsers {
		t.Fatalf("ok=%d lost=%d duplicated=%d issued=%d; want ok=%d, none lost or duplicated", ok, lost, dup, issued(), nUsers)
	}
}
