package dispatch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// TestAdmissionIntervalIsTheGapBetweenAdmittingTicks checks the admission
// punctuality figure (Metrics.Punctual, the SLO's admission_interval_seconds)
// against the admissions themselves: with 10 people a tick, every tick
// issues, so each interval must equal the Redis-clock gap between two
// issuing ticks, to the millisecond — including the long one across a
// leader that died without releasing its lease, measured by the successor.
// A paused queue's ticks record nothing.
func TestAdmissionIntervalIsTheGapBetweenAdmittingTicks(t *testing.T) {
	t.Parallel()
	tick, lease := 100*time.Millisecond, time.Second
	c := newCluster(t, dispatch.Options{Tick: tick, Lease: lease})
	m := newTally()
	c.metrics = m
	q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec = 100 })
	c.fill(q, 3000)
	c.start(2)

	l := c.leader(q)
	testenv.WaitFor(t, 10*time.Second, "20 intervals", func() bool { return len(m.intervalsOf(q)) >= 20 })
	l.store.crashed.Store(true) // dies holding its lease
	l.stop()
	crashedAt := len(m.intervalsOf(q))
	testenv.WaitFor(t, 10*time.Second, "10 intervals from the successor", func() bool { return len(m.intervalsOf(q)) >= crashedAt+10 })

	// Every recorded interval is one gap between issuing ticks.
	times, _ := ticks(c.pub.of(queue.EventTokenIssued))
	gaps := map[time.Duration]int{}
	var longestGap time.Duration
	for i := 1; i < len(times); i++ {
		g := times[i].Sub(times[i-1])
		gaps[g]++
		longestGap = max(longestGap, g)
	}
	got := m.intervalsOf(q)
	unmatched := 0
	for _, d := range got {
		if gaps[d] == 0 {
			unmatched++
		}
	}
	// The events of the last ticks may not be published yet: a handful of
	// intervals can lack their gap, never more.
	if unmatched > 3 {
		t.Errorf("%d of %d intervals match no gap between issuing ticks", unmatched, len(got))
	}
	longest := slices.Max(got)
	t.Logf("%d intervals; median %v, longest %v (longest gap in the events %v); lease %v",
		len(got), median(got), longest, longestGap, lease)
	if longest != longestGap {
		t.Errorf("longest interval %v, the longest gap between issuing ticks is %v", longest, longestGap)
	}
	if longest < lease/2 || longest > lease+tick+500*time.Millisecond {
		t.Errorf("the leader change shows as %v, want between half the lease and lease + tick (+500 ms slack)", longest)
	}
	late := 0
	for _, d := range got {
		if d > 2*tick {
			late++
		}
	}
	if late < 1 {
		t.Errorf("no interval over two ticks, but a leader died holding a %v lease", lease)
	}

	// Paused: the ticks go on, nothing is recorded.
	ctx := context.Background()
	if _, _, err := c.store.UpdateConfig(ctx, q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		cfg.State = queue.Paused
		return cfg, nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * tick) // a tick in flight may still record
	n := len(m.intervalsOf(q))
	time.Sleep(10 * tick)
	if after := len(m.intervalsOf(q)); after != n {
		t.Errorf("%d intervals recorded while paused", after-n)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
