package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

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
