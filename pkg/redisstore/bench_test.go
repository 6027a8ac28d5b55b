package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// BenchmarkEnter measures the enter script end to end (one EVALSHA round trip
// per call) with parallel callers, as gateway replicas would be.
func BenchmarkEnter(b *testing.B) {
	s, _ := newStoreB(b)
	q := newQueueB(b, s)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(32) // 64 concurrent callers on 2 cores, like many gateway requests
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enter(ctx, q, "u"+strconv.FormatInt(n.Add(1), 10)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPosition measures the position script in a line of 10,000.
func BenchmarkPosition(b *testing.B) {
	s, _ := newStoreB(b)
	q := newQueueB(b, s)
	ctx := context.Background()
	const line = 10_000
	for i := range line {
		if _, err := s.Enter(ctx, q, "u"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.SetParallelism(32) // 64 concurrent callers on 2 cores, like many gateway requests
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Position(ctx, q, "u"+strconv.FormatInt(n.Add(1)%line, 10)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func newQueueB(b *testing.B, s *redisstore.Store) string {
	b.Helper()
	q := "bench-" + strconv.FormatInt(int64(b.N), 10) + "-" + randHex()
	_, _, err := s.UpdateConfig(context.Background(), q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.MaxQueueSize = queue.MaxMaxQueueSize
		c.MaxWaitSeconds = queue.MaxMaxWaitSeconds
		return c, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Purge(context.Background(), q) })
	return q
}

// BenchmarkDraw100k measures one whole draw of a pre-queue of 100,000, as
// the leader runs it (announce and read the pre-queue, order by HMAC, place
// in chunks of 500, finish): how long admission is held at a big drop's
// start. One op is one draw; the pre-queue is filled outside the timer.
func BenchmarkDraw100k(b *testing.B) {
	s, rdb := newStoreB(b)
	ctx := context.Background()
	const people, chunk = 100_000, 500
	users := make([]string, people)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		q := newQueueB(b, s)
		k := redisstore.KeysFor(q)
		seed, sha, err := queue.NewDrawSeed()
		if err != nil {
			b.Fatal(err)
		}
		p := rdb.Pipeline()
		for i, u := range users {
			p.ZAdd(ctx, k.PreQueue(), redis.Z{Score: float64(i), Member: u})
		}
		p.HSet(ctx, k.Draw(), "state", string(queue.DrawScheduled), "seed", seed, "seedSha256", sha)
		p.HSet(ctx, k.Config(), "drawPending", 1) // as the PUT that set a start time does
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		epoch, err := s.AcquireLease(ctx, q, "bench", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		// The tick that closes the pre-queue (the start has come: no
		// startsAt is "now").
		if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		w, err := s.StartDraw(ctx, q, epoch, queue.DrawTotals{})
		if err != nil || len(w.Remaining) != people {
			b.Fatalf("start draw: %d to place, %v", len(w.Remaining), err)
		}
		order, err := queue.DrawOrder(w.Seed, w.Remaining)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < people; i += chunk {
			if _, err := s.PlaceDrawn(ctx, q, epoch, order[i:i+chunk]); err != nil {
				b.Fatal(err)
			}
		}
		if w, err = s.FinishDraw(ctx, q, epoch, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn || w.Placed != people {
			b.Fatalf("finish: %+v %v", w, err)
		}
	}
}
