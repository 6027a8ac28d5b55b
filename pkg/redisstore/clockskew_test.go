package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// TestALineBehindOnTheClockClosesOnlyItsOwnPreQueueLate: each line of a
// queue judges the start by the clock of the Redis master that holds it.
// Line 1's master is made 1.5 s behind (its copy of startsAtMs is moved
// 1.5 s later, which is what a clock 1.5 s behind sees). Of 60 people who
// enter between the start and 1.5 s after it, exactly those routed to line
// 1 are still pre-queued (they join the draw, at a random place among the
// pre-queued, not ahead of them); everyone routed elsewhere waits behind
// their line's pre-queue. Once line 1's clock reaches the start, nobody is
// pre-queued any more. Nobody can name accounts for the slow line (a
// person's line is a keyed hash): whoever happens to land there gains the
// skew, no more.
func TestALineBehindOnTheClockClosesOnlyItsOwnPreQueueLate(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	const shards, skew = 3, 1500 * time.Millisecond
	starts := time.Now().Add(600 * time.Millisecond).Truncate(time.Millisecond)
	q := scheduled(t, s, starts, func(c *queue.Config) { c.Shards = shards })
	behind := redisstore.KeysFor(queue.LineID(q, 1)).Config()
	if err := rdb.HSet(ctx, behind, "startsAtMs", strconv.FormatInt(starts.Add(skew).UnixMilli(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	enterAll(t, s, q, queue.PreQueue, names("early", 30)...)

	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	late := names("late", 60)
	onSlowLine, preQueued, waiting := 0, 0, 0
	for _, u := range late {
		st, err := s.Enter(ctx, q, u)
		if err != nil {
			t.Fatal(err)
		}
		slow := lineOf(t, s, q, u) == 1
		if slow {
			onSlowLine++
		}
		switch {
		case st.State == queue.PreQueue && slow:
			preQueued++
		case st.State == queue.Waiting && !slow:
			waiting++
		default:
			t.Errorf("%s (line %d) entered after the start: %s", u, lineOf(t, s, q, u), st.State)
		}
	}
	if time.Now().After(starts.Add(skew)) {
		t.Fatalf("the late enters took past the slow line's start: nothing shown")
	}
	if onSlowLine == 0 || preQueued != onSlowLine || waiting != len(late)-onSlowLine {
		t.Fatalf("of %d late entrants (%d on the slow line): %d pre-queued, %d waiting; want %d and %d",
			len(late), onSlowLine, preQueued, waiting, onSlowLine, len(late)-onSlowLine)
	}

	time.Sleep(time.Until(starts.Add(skew)) + 50*time.Millisecond)
	after := len(enterAll(t, s, q, queue.Waiting, names("after", 30)...))
	t.Logf("line 1 1.5 s behind: %d of 60 late entrants pre-queued (all on line 1), %d waiting; 30 of 30 waiting once its clock reached the start",
		preQueued, waiting)
	if after != 30 {
		t.Fatalf("%d of 30 waiting after the slow line's start", after)
	}
}
