package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestShardedQueueStoreOperations drives a queue of three lines on a
// 3-master cluster through the Store: people land in their hashed line and
// see their place in the whole queue; the line count of a queue with
// people in it cannot change (409) and nothing changes; a Store whose line
// count is stale is corrected by the line's script and enters the person
// in the right line; tokens name their line, and consume, settle, restore
// and the reaper's list find them there.
func TestShardedQueueStoreOperations(t *testing.T) {
	t.Parallel()
	s, cc := clusterStore(t)
	ctx := context.Background()
	const shards, n = 3, 300
	q := "sharded-" + randHex()
	t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.Shards, c.AdmissionRatePerSec, c.ActivationSpreadMs, c.State = shards, 1000, 0, queue.Paused
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	for line := range shards {
		masters[masterOf(t, cc, lineKeys(t, s, q, line).Waiting())] = true
	}

	// Enter: each person in their line; places over the whole queue.
	perLine := make([]int64, shards)
	worstTotal := 0.0
	for i := range n {
		user := fmt.Sprintf("p%03d", i)
		st, err := s.Enter(ctx, q, user)
		if err != nil || st.State != queue.Waiting {
			t.Fatalf("enter %s: %+v %v", user, st, err)
		}
		line := lineOf(t, s, q, user)
		perLine[line]++
		// The other lines' lengths are up to 100 ms old, taken to have
		// grown as this line did since: the total is an estimate, at least
		// this line's length.
		// (The first 100 ms of a queue have nothing to go by: checked from
		// the 50th on.)
		if d := st.Total - int64(i+1); st.Line != line || st.Lines != shards || st.Total < perLine[line] || (i >= 50 && max(d, -d) > int64(i+1)/5) {
			t.Fatalf("enter %s: line %d of %d, total %d; want line %d of %d, total about %d", user, st.Line, st.Lines, st.Total,
				line, shards, i+1)
		}
		if i >= 50 {
			worstTotal = max(worstTotal, math.Abs(float64(st.Total-int64(i+1)))/float64(i+1))
		}
		if st.Position < 1 || st.Position > st.Total {
			t.Fatalf("enter %s: place %d of %d", user, st.Position, st.Total)
		}
	}
	t.Logf("totals told while %d entered one after another: worst %.1f %% off (from the 50th)", n, 100*worstTotal)
	time.Sleep(150 * time.Millisecond)
	last, err := s.Position(ctx, q, "p299")
	if err != nil || last.Total != n || last.Position < n*8/10 {
		t.Fatalf("the last to enter: %+v %v; want a place near %d of %d", last, err, n, n)
	}
	first, err := s.Position(ctx, q, "p000")
	if err != nil || first.Position > 5 {
		t.Fatalf("the first to enter: %+v %v; want a place near 1", first, err)
	}
	_, st, err := s.Config(ctx, q)
	if err != nil || st.Waiting != n || len(st.Lines) != shards {
		t.Fatalf("Config: %+v %v; want %d waiting over %d lines", st, err, n, shards)
	}
	for _, l := range st.Lines {
		if l.Waiting != perLine[l.Line] {
			t.Fatalf("line %d holds %d, want %d", l.Line, l.Waiting, perLine[l.Line])
		}
	}

	// The line count is fixed while people are in.
	_, _, err = s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { c.Shards = 2; return c, nil })
	if !errors.Is(err, queue.ErrShardsFixed) {
		t.Fatalf("shards 3 -> 2 with %d waiting: %v, want ErrShardsFixed", n, err)
	}
	cfg, st, err := s.Config(ctx, q)
	if err != nil || cfg.Shards != shards || st.Waiting != n {
		t.Fatalf("after the refused change: shards %d, %d waiting, %v; want %d and %d", cfg.Shards, st.Waiting, err, shards, n)
	}
	if st, err := s.Enter(ctx, q, "late"); err != nil || st.State != queue.Waiting || abs(st.Total-(n+1)) > (n+1)/10 {
		t.Fatalf("enter after the refused change (the lines' hold lifted): %+v %v", st, err)
	}

	// Admit everyone: the leader's lease, the lines following it, a tick
	// per line with tokens for all.
	owner, epoch := leadAllLines(t, s, q, shards)
	if stale := s.FollowLeases(ctx, owner, []queue.LineLease{{QueueID: q, Line: 1, Epoch: epoch - 1}}); stale[0].Epoch != 0 {
		t.Fatalf("an older leader following line 1: %+v, want epoch 0 (refused)", stale[0])
	}
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.State = queue.Open
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	var calls []queue.IssueCall
	for line := range shards {
		grants, err := queue.Grants(n)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, queue.IssueCall{QueueID: q, Line: line, IssueRequest: queue.IssueRequest{
			Epoch: epoch, Tick: time.Second, Grants: grants, Share: 1.0 / shards}})
	}
	// The first tick of a line starts its clock; the next, a second
	// later, has a second of credit: 333 a line at 1000/s.
	issued := 0
	for round := range 2 {
		if round == 1 {
			time.Sleep(1100 * time.Millisecond)
		}
		for i, r := range s.IssueAll(ctx, calls) {
			if r.Err != nil {
				t.Fatalf("issue line %d: %v", i, r.Err)
			}
			issued += r.Issued
		}
	}
	if issued != n+1 {
		t.Fatalf("issued %d, want all %d", issued, n+1)
	}

	// Tokens name their line; the order path finds them there.
	var tids [2]string
	for i, user := range []string{"p001", "p002"} {
		st, err := s.Position(ctx, q, user)
		if err != nil || st.State != queue.Admitted || st.Token == nil {
			t.Fatalf("%s after the tick: %+v %v", user, st, err)
		}
		line := lineOf(t, s, q, user)
		if queue.TokenLine(st.Token.Secret) != line || queue.TokenLine(st.Token.ID) != line {
			t.Fatalf("%s in line %d holds token %q / %q", user, line, st.Token.Secret, st.Token.ID)
		}
		c, err := s.Consume(ctx, q, user, st.Token.Secret, "order-"+user, 30*time.Second, 0)
		if err != nil || c.TokenID != st.Token.ID {
			t.Fatalf("consume %s: %+v %v", user, c, err)
		}
		tids[i] = c.TokenID
	}
	if ok, err := s.Settle(ctx, q, "p001", tids[0], "order-p001"); err != nil || !ok {
		t.Fatalf("settle p001: %v %v", ok, err)
	}
	if out, err := s.Restore(ctx, q, "p002", tids[1], "order-p002", true); err != nil || out != queue.Restored {
		t.Fatalf("restore p002: %v %v", out, err)
	}
	if st, err := s.Position(ctx, q, "p002"); err != nil || st.State != queue.Admitted || st.Token == nil || st.Token.ID != tids[1] {
		t.Fatalf("p002 after the restore: %+v %v; want its token %s back", st, err, tids[1])
	}
	overdue, err := s.Overdue(ctx, q, 100)
	if err != nil || len(overdue) != 0 {
		t.Fatalf("overdue before any lease ended: %+v %v", overdue, err)
	}

	// A Store whose line count is stale: it read the queue with one line,
	// then the (empty) queue was split into three. The line it routes to
	// tells it the count, and the person lands in their own line.
	q2 := "resharded-" + randHex()
	t.Cleanup(func() { _ = s.Purge(context.Background(), q2) })
	if _, _, err := s.UpdateConfig(ctx, q2, func(c queue.Config, _ bool) (queue.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	stale, err := redisstore.NewStore(cc)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := stale.Shards(ctx, q2); err != nil || n != 1 {
		t.Fatalf("Shards before the split: %d %v", n, err)
	}
	if _, _, err := s.UpdateConfig(ctx, q2, func(c queue.Config, _ bool) (queue.Config, error) { c.Shards = shards; return c, nil }); err != nil {
		t.Fatalf("split the empty queue: %v", err)
	}
	user := ""
	for i := 0; user == ""; i++ {
		if u := fmt.Sprintf("x%d", i); lineOf(t, s, q2, u) != 0 {
			user = u
		}
	}
	st2, err := stale.Enter(ctx, q2, user)
	if err != nil || st2.State != queue.Waiting || st2.Line != lineOf(t, s, q2, user) {
		t.Fatalf("enter through the stale Store: %+v %v; want WAITING in line %d", st2, err, lineOf(t, s, q2, user))
	}
	in0, _ := cc.ZScore(ctx, redisstore.KeysFor(q2).Waiting(), user).Result()
	inLine, err := cc.ZScore(ctx, lineKeys(t, s, q2, st2.Line).Waiting(), user).Result()
	if err != nil || in0 != 0 || inLine != 1 {
		t.Fatalf("%s: score %v in line 0, %v (%v) in line %d; want only in line %d", user, in0, inLine, err, st2.Line, st2.Line)
	}
	t.Logf("%d people over %d lines on %d masters (%v each); places over the whole queue; stale count corrected", n, shards, len(masters), perLine)
}

// BenchmarkShardedEnter measures enters into one queue of 1 and of 3 lines
// on a private 3-master cluster (64 concurrent callers): enters a second,
// and the Redis CPU an enter costs, over all masters and on the busiest
// (INFO cpu before and after, user + sys). One line runs on one core
// whatever the cluster; three lines spread the work over three masters.
func BenchmarkShardedEnter(b *testing.B) {
	url := testenv.StartRedisCluster(b)
	rdb, err := redisstore.NewClient(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rdb.Close() })
	cc := rdb.(*redis.ClusterClient)
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := redisstore.LoadScripts(ctx, rdb, redisstore.GatewayScripts...); err != nil {
		b.Fatal(err)
	}
	for _, shards := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			q := fmt.Sprintf("bench-%d-%s", shards, randHex())
			if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
				c.Shards, c.MaxQueueSize, c.MaxWaitSeconds, c.State = shards, queue.MaxMaxQueueSize, queue.MaxMaxWaitSeconds, queue.Paused
				return c, nil
			}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Purge(context.Background(), q) })
			before := masterCPU(b, cc)
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Enter(ctx, q, "u"+strconv.FormatInt(n.Add(1), 10)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			took := time.Since(start)
			b.StopTimer()
			after := masterCPU(b, cc)
			var total, busiest float64
			for addr, c := range after {
				d := c - before[addr]
				total += d
				busiest = max(busiest, d)
			}
			b.ReportMetric(float64(b.N)/took.Seconds(), "enters/s")
			b.ReportMetric(total*1e6/float64(b.N), "redis-cpu-us/enter")
			b.ReportMetric(busiest*1e6/float64(b.N), "busiest-master-cpu-us/enter")
		})
	}
}

// masterCPU is each master's CPU seconds so far (used_cpu_user + sys).
func masterCPU(b *testing.B, cc *redis.ClusterClient) map[string]float64 {
	b.Helper()
	var mu sync.Mutex
	out := map[string]float64{}
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		var sum float64
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		mu.Lock()
		out[c.Options().Addr] = sum
		mu.Unlock()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// TestShardedTicketsAnsweredFromTheFrontier: in a queue of three lines with
// a tenth of its 3,000 people gone, the frontiers of its lines tell a
// ticket holder far from the front the same place in the whole queue as a
// read from Redis, within max(shards + 1, 1 %): the same scaling, each
// line's place estimated from its leaver bins to within one, and one place
// in a line stands for about shards places in the queue.
func TestShardedTicketsAnsweredFromTheFrontier(t *testing.T) {
	t.Parallel()
	s, _ := clusterStore(t)
	ctx := context.Background()
	const shards, n = 3, 3000
	q := "shtk-" + randHex()
	t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.Shards, c.State = shards, queue.Paused
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	seqs := map[string]queue.Standing{}
	for i := range n {
		user := fmt.Sprintf("t%04d", i)
		st, err := s.Enter(ctx, q, user)
		if err != nil || st.State != queue.Waiting || st.Seq <= 0 {
			t.Fatalf("enter %s: %+v %v", user, st, err)
		}
		seqs[user] = st
	}
	for i := 5; i < n; i += 10 {
		if _, err := s.Leave(ctx, q, fmt.Sprintf("t%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c := startFrontiers(t, s)
	fs := frontiers{c}
	// The first lookups make the cache track the queue and its lines. (A
	// holder in the middle: the last of a line may be estimated past its
	// line's end, which Redis answers, and who is last in a line depends
	// on the line key.)
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, ok := queue.StandingOf(fs, q, "t1500", seqs["t1500"].Generation, seqs["t1500"].Seq); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no frontier answer for t1500 within 3 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	checked, worst := 0, 0.0
	for i := 0; i < n; i += 7 {
		user := fmt.Sprintf("t%04d", i)
		if i%10 == 5 {
			continue // left
		}
		fromFrontier, ok := queue.StandingOf(fs, q, user, seqs[user].Generation, seqs[user].Seq)
		if !ok {
			continue // near the front of its line: Redis answers
		}
		fromRedis, err := s.Position(ctx, q, user)
		if err != nil {
			t.Fatal(err)
		}
		d := float64(fromFrontier.Position - fromRedis.Position)
		if d < 0 {
			d = -d
		}
		// One place in a line is about shards places of the queue (the
		// queue's length over the line's, which varies with the line key):
		// a line's place off by one or two, and the rounding. Far from the
		// front, the share of the people ahead in the holder's own line
		// differs from its line's share of the queue by up to 1.5 %
		// (measured: 1.2 % at place 574, with some line keys).
		if d > max(2*shards, 0.015*float64(fromRedis.Position)) {
			t.Errorf("%s (line %d): frontier says %d of %d, Redis %d of %d", user, fromFrontier.Line,
				fromFrontier.Position, fromFrontier.Total, fromRedis.Position, fromRedis.Total)
		}
		if fromFrontier.Total != fromRedis.Total || fromFrontier.Lines != shards {
			t.Errorf("%s: total %d over %d lines, Redis %d", user, fromFrontier.Total, fromFrontier.Lines, fromRedis.Total)
		}
		worst = max(worst, d/float64(fromRedis.Position))
		checked++
	}
	t.Logf("%d ticket holders answered from the lines' frontiers; worst %.3f %% off the Redis answer", checked, 100*worst)
	if checked < 300 {
		t.Fatalf("only %d of the sampled holders were answered from the frontier, want at least 300", checked)
	}
}

// frontiers adapts a FrontierCache to queue.Frontiers.
type frontiers struct{ c *redisstore.FrontierCache }

func (f frontiers) Lookup(id string) *queue.Frontier { return f.c.Lookup(id) }

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// lineOf is user's line in q, as s routes them.
// leadAllLines takes queue q's lease as a new owner and has its lines
// 1..shards-1 follow it: the owner and the epoch.
func leadAllLines(t *testing.T, s *redisstore.Store, q string, shards int) (string, int64) {
	t.Helper()
	ctx := context.Background()
	owner := "leader-" + randHex()
	epoch, err := s.AcquireLease(ctx, q, owner, 10*time.Second)
	if err != nil || epoch <= 0 {
		t.Fatalf("lease: %d %v", epoch, err)
	}
	var follow []queue.LineLease
	for line := 1; line < shards; line++ {
		follow = append(follow, queue.LineLease{QueueID: q, Line: line, Epoch: epoch})
	}
	for _, r := range s.FollowLeases(ctx, owner, follow) {
		if r.Err != nil || r.Epoch != epoch {
			t.Fatalf("follow: %+v", r)
		}
	}
	return owner, epoch
}

func lineOf(t *testing.T, s *redisstore.Store, q, user string) int {
	t.Helper()
	line, err := s.LineOf(context.Background(), q, user)
	if err != nil {
		t.Fatal(err)
	}
	return line
}
