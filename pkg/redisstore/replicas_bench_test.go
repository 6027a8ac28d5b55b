package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// replicatedStore is a Store on set's primary which waits for waitFor
// replicas (0: for none, today's behaviour).
func replicatedStore(b *testing.B, set *testenv.SentinelSet, waitFor int) *redisstore.Store {
	b.Helper()
	s := testenv.StoreAt(b, set.NodeURL(set.Primary))
	s.RequireReplicas(waitFor, 250*time.Millisecond)
	return s
}

// BenchmarkEnterReplicated is BenchmarkEnter against a primary with one
// replica, acknowledging once 0 or 1 replicas hold the place: what WAIT
// costs the gateway's enters (issue 27: at least 0.8 of replicas=0).
func BenchmarkEnterReplicated(b *testing.B) {
	set := testenv.StartSentinelSet(b, 1, false)
	for _, r := range []int{0, 1} {
		b.Run("replicas="+strconv.Itoa(r), func(b *testing.B) {
			s := replicatedStore(b, set, r)
			q := newQueueB(b, s)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Enter(ctx, q, "u"+strconv.FormatInt(n.Add(1), 10)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enters/s")
		})
	}
}

// BenchmarkAdmitReplicated measures admission as the leader and its relay
// do it, side by side: ticks admitting up to 100 each, and a relay that
// reads their TokenIssued events, confirms (with replicas=1) that the
// replica holds them before they could be published (OutboxReplicated),
// and acknowledges them. One op is one person admitted and released for
// publishing.
func BenchmarkAdmitReplicated(b *testing.B) {
	const batch = 100
	set := testenv.StartSentinelSet(b, 1, false)
	for _, r := range []int{0, 1} {
		b.Run("replicas="+strconv.Itoa(r), func(b *testing.B) {
			s := replicatedStore(b, set, r)
			q := newQueueB(b, s)
			ctx := context.Background()
			_, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
				c.AdmissionRatePerSec, c.MaxActive, c.ActivationSpreadMs = queue.MaxAdmissionRate, queue.MaxMaxActive, 0
				return c, nil
			})
			if err != nil {
				b.Fatal(err)
			}
			for i := range b.N + batch {
				if _, err := s.Enter(ctx, q, "u"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.EnsureOutboxGroup(ctx, q); err != nil {
				b.Fatal(err)
			}
			epoch, err := s.AcquireLease(ctx, q, "bench", time.Hour)
			if err != nil || epoch == 0 {
				b.Fatalf("lease: %d %v", epoch, err)
			}
			gs := make([]queue.Grant, batch)
			for i := range gs {
				if gs[i], err = queue.NewGrant(); err != nil {
					b.Fatal(err)
				}
			}
			var published atomic.Int64
			relayErr := make(chan error, 1)
			stop := make(chan struct{})
			b.ResetTimer()
			go func() {
				for published.Load() < int64(b.N) {
					select {
					case <-stop:
						relayErr <- nil
						return
					default:
					}
					batches, err := s.ReadOutboxes(ctx, "bench", 1000, []queue.OutboxRead{{QueueID: q}})
					if err == nil {
						err = s.OutboxReplicated(ctx, batches)
					}
					if err == nil {
						err = s.AckOutboxes(ctx, batches)
					}
					if err != nil {
						relayErr <- err
						return
					}
					if len(batches[0].Events) == 0 {
						time.Sleep(time.Millisecond)
					}
					published.Add(int64(len(batches[0].Events)))
				}
				relayErr <- nil
			}()
			admitted := 0
			for admitted < b.N {
				res, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: gs})
				if err != nil {
					close(stop)
					b.Fatal(err)
				}
				admitted += res.Issued
				if res.Issued == 0 {
					time.Sleep(time.Millisecond) // credit builds with Redis time
				}
			}
			if err := <-relayErr; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(published.Load())/b.Elapsed().Seconds(), "admissions/s")
		})
	}
}
