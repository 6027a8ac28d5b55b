package pg_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// BenchmarkPlaceOrderHotRow is the flash sale's worst case: every order
// takes stock from the same product row, so transactions serialize on its
// row lock. ~40 goroutines, as many as the default pool.
func BenchmarkPlaceOrderHotRow(b *testing.B) {
	dsn := testenv.PostgresURL(b)
	o := testOptions(b)
	o.MaxOpenConns = 40
	// Waits on the row lock beyond the 200ms slow-query mark are the point
	// here, not news.
	o.Log = slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	db := open(b, dsn, o)
	p := mustUpsert(b, db, product("hot", "q1", 1_000_000_000))

	var (
		seq atomic.Int64
		mu  sync.Mutex
		lat []time.Duration
	)
	b.SetParallelism((40 + testingProcs() - 1) / testingProcs())
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			n := int(seq.Add(1))
			ord := newOrder(p, n, 1)
			ord.EntryTokenID = fmt.Sprintf("bench-%d-%d", n, time.Now().UnixNano())
			t0 := time.Now()
			if _, err := db.PlaceOrder(context.Background(), ord, 0, createdEvent); err != nil {
				b.Errorf("PlaceOrder: %v", err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "orders/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
