package dispatch_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// TestJunkInALineDoesNotSpeedItUp is issue 26's shard attack: 150 people
// enter a queue of three lines, then the target, then 600 junk ids that
// fall in the target's line (chosen with the line key, which an attacker
// cannot see: the worst case). The queue then opens at 100 a second.
// Everyone is admitted once; the target is admitted at rank 140 or later
// (151 by arrival), and at most 5 % of the 150 who entered before them are
// admitted in a later tick than theirs. (A tick's lines admit at one
// moment: the rank counts the people of the ticks before the target's.)
func TestJunkInALineDoesNotSpeedItUp(t *testing.T) {
	t.Parallel()
	const honest, junk, shards, rate = 150, 600, 3, 100
	tick := 100 * time.Millisecond
	c := newCluster(t, dispatch.Options{Tick: tick, Lease: 2 * time.Second})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.Shards, cfg.AdmissionRatePerSec, cfg.ActivationSpreadMs, cfg.State = shards, rate, 0, queue.Paused
		cfg.MaxQueueSize, cfg.MaxWaitSeconds = 10_000, 3600
	})
	ctx := context.Background()
	c.fill(q, honest)
	const target = "target"
	if _, err := c.store.Enter(ctx, q, target); err != nil {
		t.Fatal(err)
	}
	// The attacker's worst case: junk that does land in the target's line
	// (the test asks the Store, which has the key).
	lineOf := func(u string) int {
		line, err := c.store.LineOf(ctx, q, u)
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	line := lineOf(target)
	for i, placed := 0, 0; placed < junk; i++ {
		u := fmt.Sprintf("junk%06d", i)
		if lineOf(u) != line {
			continue
		}
		if _, err := c.store.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
		placed++
	}
	rounds := &roundLog{Store: c.store}
	runDispatcher(t, rounds, c.pub, nil, dispatch.Options{Tick: tick, Lease: 2 * time.Second, Queues: []string{q}})
	if _, _, err := c.store.UpdateConfig(ctx, q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		cfg.State = queue.Open
		return cfg, nil
	}); err != nil {
		t.Fatal(err)
	}
	const n = honest + 1 + junk
	deadline := time.Now().Add(30 * time.Second)
	for len(c.pub.of(queue.EventTokenIssued)) < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // anything issued twice would show up now
	issued := c.pub.of(queue.EventTokenIssued)
	seen := map[string]int{}
	for _, e := range issued {
		seen[e.UserID]++
	}
	if len(issued) != n || len(seen) != n {
		t.Fatalf("TokenIssued: %d events for %d people, want %d once each", len(issued), len(seen), n)
	}

	tickOf := rounds.ticks(t, issued)
	rank, overtaken := 1, 0
	for _, e := range issued {
		if tickOf[e.UserID] < tickOf[target] {
			rank++
		}
		if e.UserID[0] == 'u' && tickOf[e.UserID] > tickOf[target] {
			overtaken++
		}
	}
	t.Logf("%d admitted once each; the target (entry rank %d, line %d) admitted at rank %d (in tick round %d); %d of the %d who entered before were admitted after",
		n, honest+1, line, rank, tickOf[target], overtaken, honest)
	if rank < 140 || overtaken > honest*5/100 {
		t.Fatalf("the target was admitted at rank %d with %d of %d earlier entrants after them; want rank >= 140 and at most %d",
			rank, overtaken, honest, honest*5/100)
	}
}

// roundLog is a Store that counts what each tick round issued on each line.
type roundLog struct {
	*redisstore.Store
	mu     sync.Mutex
	rounds []map[int]int // rounds[r][line]: people issued
}

func (l *roundLog) IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply {
	replies := l.Store.IssueAll(ctx, calls)
	round := map[int]int{}
	for i, r := range replies {
		round[calls[i].Line] += r.Issued
	}
	l.mu.Lock()
	l.rounds = append(l.rounds, round)
	l.mu.Unlock()
	return replies
}

// ticks is the tick round that admitted each person of events: a line
// admits in its own order (its sequence numbers), so the people a round
// issued on a line are that line's next ones.
func (l *roundLog) ticks(t *testing.T, events []queue.Event) map[string]int {
	t.Helper()
	byLine := map[int][]queue.Event{}
	for _, e := range events {
		line := queue.TokenLine(e.TokenID)
		byLine[line] = append(byLine[line], e)
	}
	for _, es := range byLine {
		sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	next := map[int]int{}
	for r, round := range l.rounds {
		for line, n := range round {
			for range n {
				if next[line] >= len(byLine[line]) {
					t.Fatalf("round %d issued more on line %d than its %d events", r, line, len(byLine[line]))
				}
				out[byLine[line][next[line]].UserID] = r
				next[line]++
			}
		}
	}
	if len(out) != len(events) {
		t.Fatalf("the rounds issued %d, the events are %d", len(out), len(events))
	}
	return out
}
