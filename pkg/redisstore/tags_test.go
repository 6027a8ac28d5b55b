package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestLinesAreSpreadOverTheMasters: 20 queues of 3 lines made on a
// 3-master cluster each have their lines on the 3 masters (by their tags,
// whatever the queue ids hash to), say so in Config, and serve people in
// every line. A slot of one queue's line moved to another master is
// reported (2 masters, the line's new node); a queue emptied and split
// again is spread again.
func TestLinesAreSpreadOverTheMasters(t *testing.T) {
	t.Parallel()
	s, cc := clusterStore(t)
	ctx := context.Background()
	masters := masterAddrs(t, cc)
	const queues, shards = 20, 3
	ids := make([]string, queues)
	untagged := 0 // queues whose "<q>:<i>" tags alone would have spread
	for i := range ids {
		q := fmt.Sprintf("spread-%02d-%s", i, randHex())
		ids[i] = q
		t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
		if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
			c.Shards, c.AdmissionRatePerSec = shards, 100
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
		plain := map[string]bool{}
		for line := range shards {
			plain[masterOf(t, cc, redisstore.KeysFor(queue.LineID(q, line)).Waiting())] = true
		}
		if len(plain) == shards {
			untagged++
		}
		_, st, err := s.Config(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if st.LineMasters != shards || len(st.Lines) != shards {
			t.Fatalf("%s: lines on %d masters (%+v), want %d", q, st.LineMasters, st.Lines, shards)
		}
		seen := map[string]bool{}
		for line, l := range st.Lines {
			want := masterOf(t, cc, lineKeys(t, s, q, line).Waiting())
			if l.Line != line || l.Node != want || l.Masters != len(masters) || seen[l.Node] {
				t.Fatalf("%s line %d: %+v, want node %s, one line a master", q, line, l, want)
			}
			seen[l.Node] = true
		}
		// People land in every line, and each line's people are on its
		// master.
		for p := range 30 {
			if st, err := s.Enter(ctx, q, fmt.Sprintf("u%02d", p)); err != nil || st.State != queue.Waiting {
				t.Fatalf("enter %s: %+v %v", q, st, err)
			}
		}
		for line := range shards {
			if n, err := cc.ZCard(ctx, lineKeys(t, s, q, line).Waiting()).Result(); err != nil || n == 0 {
				t.Fatalf("%s line %d: %d waiting (%v), want some of 30", q, line, n, err)
			}
		}
	}
	t.Logf("20 queues of 3 lines, every one on 3 masters; by their plain ids %d of 20 would have been", untagged)

	// A slot moved: line 1 of a queue goes to another master, with its
	// keys; the queue says so, and still serves its people.
	q := ids[0]
	before, moved := "", lineKeys(t, s, q, 1)
	m := testenv.NewSlotMove(t, cc, moved.Waiting())
	_, st, _ := s.Config(ctx, q)
	before = st.Lines[1].Node
	m.Begin()
	m.MoveAll()
	m.End()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, st, err := s.Config(ctx, q)
		if err == nil && st.Lines[1].Node != before && st.LineMasters == 2 {
			t.Logf("after the move: line 1 on %s (was %s), lines on %d masters", st.Lines[1].Node, before, st.LineMasters)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the move: %+v %v; want line 1 off %s and 2 masters", st, err, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, err := s.Position(ctx, q, "u00"); err != nil || got.State != queue.Waiting {
		t.Fatalf("position after the move: %+v %v", got, err)
	}

	// Emptied and split again (1 line, then 3): the tags are chosen anew.
	if _, err := s.Close(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, shards} {
		if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
			c.Shards, c.State = n, queue.Open
			return c, nil
		}); err != nil {
			t.Fatalf("shards %d: %v", n, err)
		}
	}
	if _, st, err := s.Config(ctx, q); err != nil || st.LineMasters != shards {
		t.Fatalf("split again: lines on %d masters (%v), want %d", st.LineMasters, err, shards)
	}
}

// lineKeys are line `line` of q's keys as s routes them.
func lineKeys(t *testing.T, s *redisstore.Store, q string, line int) redisstore.Keys {
	t.Helper()
	k, err := s.LineKeys(context.Background(), q, line)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
