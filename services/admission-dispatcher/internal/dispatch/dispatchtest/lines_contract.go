package dispatchtest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// The ticks of a queue split into lines (part of RunTicksContract).

// leadLines takes q's lease for owner and makes its lines 1..n-1 follow.
func leadLines(t *testing.T, s dispatch.Store, q, owner string, n int) int64 {
	t.Helper()
	e := lead(t, s, q, owner, 10*time.Second)
	follows(t, s, q, owner, n, e)
	return e
}

func follows(t *testing.T, s dispatch.Store, q, owner string, n int, e int64) {
	t.Helper()
	var lines []queue.LineLease
	for i := 1; i < n; i++ {
		lines = append(lines, queue.LineLease{QueueID: q, Line: i, Epoch: e})
	}
	for i, r := range s.FollowLeases(context.Background(), owner, lines) {
		if r.Err != nil || r.Epoch != e {
			t.Fatalf("line %d follows epoch %d: %+v", i+1, e, r)
		}
	}
}

func linesAdmit(t *testing.T, s dispatch.Store, h Harness) {
	const n, people, heads = 3, 30, 2
	q := newQueue(t, h, func(c *queue.Config) { c.Shards = n })
	everyone := enter(t, h, q, people)
	e := leadLines(t, s, q, "a", n)
	var version int64
	for i := range n {
		r := issue(s, q, i, e, nil, func(r *queue.IssueRequest) { r.Heads = heads })
		if r.Err != nil || r.Issued != 0 || !r.HeadsRead || len(r.Heads) != int(min(heads, r.Waiting)) ||
			slices.Contains(r.Heads, 0) || !slices.IsSorted(r.Heads) {
			t.Fatalf("line %d's first tick asking for %d enter times: %+v, want that many of its %d people, in order", i, heads, r, r.Waiting)
		}
		if i == 0 {
			version = r.ConfigVersion
		} else if r.ConfigVersion != version {
			t.Fatalf("line %d's config version %d, want line 0's %d", i, r.ConfigVersion, version)
		}
	}
	h.Wait(t, settle)
	var admitted []string
	for i := range n {
		g := grants(t, people)
		r := issue(s, q, i, e, g, func(r *queue.IssueRequest) { r.Share = 1 })
		if r.Err != nil || r.Waiting != 0 {
			t.Fatalf("line %d's tick: %+v, want everyone in it issued", i, r)
		}
		evs := newEvents(t, s, queue.LineID(q, i))
		if len(evs) != r.Issued || outboxLen(t, s, queue.LineID(q, i)) != int64(r.Issued) {
			t.Fatalf("line %d issued %d, its outbox has %d events", i, r.Issued, len(evs))
		}
		for j, ev := range evs {
			if ev.QueueID != q || ev.TokenID != queue.LineToken(i, g[j].TokenID) || (i > 0 && !strings.HasPrefix(ev.TokenID, strconv.Itoa(i)+".")) {
				t.Fatalf("line %d's event %d: %+v, want one of queue %s with token %s", i, j, ev, q, queue.LineToken(i, g[j].TokenID))
			}
		}
		admitted = append(admitted, users(evs)...)
	}
	slices.Sort(admitted)
	if !slices.Equal(admitted, everyone) {
		t.Fatalf("the lines admitted %v, want everyone once: %v", admitted, everyone)
	}
	one := newQueue(t, h, nil)
	enter(t, h, one, 3)
	if r := issue(s, one, 0, lead(t, s, one, "a", time.Second), nil, func(r *queue.IssueRequest) { r.Heads = heads }); r.Err != nil || r.HeadsRead {
		t.Fatalf("tick of a queue of one line asking for enter times: %+v, want none read", r)
	}
}

func fencedLines(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	const n = 2
	q := newQueue(t, h, func(c *queue.Config) { c.Shards = n })
	enter(t, h, q, 10)
	ea := leadLines(t, s, q, "a", n)
	for i := range n {
		if r := issue(s, q, i, ea, nil, nil); r.Err != nil {
			t.Fatalf("a's first tick of line %d: %v", i, r.Err)
		}
	}
	if err := s.ReleaseLease(ctx, q, "a", ea); err != nil {
		t.Fatal(err)
	}
	eb := lead(t, s, q, "b", 10*time.Second)
	// Until b's follow, line 1 still takes a's epoch and not b's.
	if r := issue(s, q, 1, ea, nil, nil); r.Err != nil {
		t.Fatalf("a's tick of line 1 before b made it follow: %v, want it applied", r.Err)
	}
	if r := issue(s, q, 1, eb, nil, nil); !errors.Is(r.Err, queue.ErrStaleEpoch) {
		t.Fatalf("b's tick of line 1 before its follow: %+v, want ErrStaleEpoch", r)
	}
	follows(t, s, q, "b", n, eb)
	h.Wait(t, settle)
	for i := range n {
		if r := issue(s, q, i, ea, grants(t, 10), func(r *queue.IssueRequest) { r.Share = 1 }); !errors.Is(r.Err, queue.ErrStaleEpoch) || r.Issued != 0 {
			t.Fatalf("a's tick of line %d after b's follow: %+v, want ErrStaleEpoch", i, r)
		}
	}
	if w := waiting(t, s, q); w != 10 {
		t.Fatalf("%d waiting after a's refused ticks, want 10", w)
	}
	issued := 0
	for i := range n {
		r := issue(s, q, i, eb, grants(t, 10), func(r *queue.IssueRequest) { r.Share = 1 })
		if r.Err != nil {
			t.Fatalf("b's tick of line %d: %v", i, r.Err)
		}
		issued += r.Issued
	}
	if issued != 10 {
		t.Fatalf("b's ticks issued %d, want all 10", issued)
	}
}

func lineCopies(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, func(c *queue.Config) { c.Shards = 2 })
	e := leadLines(t, s, q, "a", 2)
	sameCopy := func(when string, rate float64) int64 {
		t.Helper()
		r0, r1 := issue(s, q, 0, e, nil, nil), issue(s, q, 1, e, nil, nil)
		if r0.Err != nil || r1.Err != nil || r1.ConfigVersion != r0.ConfigVersion || r0.Rate != rate || r1.Rate != rate {
			t.Fatalf("ticks %s: line 0 %+v, line 1 %+v; want both at one config version, %g/s", when, r0, r1, rate)
		}
		return r0.ConfigVersion
	}
	before := sameCopy("of a queue just made", 1000)
	h.Configure(t, q, caseConfig(func(c *queue.Config) { c.Shards, c.AdmissionRatePerSec = 2, 500 }))
	if after := sameCopy("after a config change", 500); after <= before {
		t.Fatalf("config version %d after a change, want above %d", after, before)
	}
	h.LoseLineCopy(t, q, 1)
	if r := issue(s, q, 1, e, nil, nil); !errors.Is(r.Err, queue.ErrNotFound) {
		t.Fatalf("tick of line 1 without its copy: %+v, want ErrNotFound", r)
	}
	if n, err := s.SyncLines(ctx, q); n != 1 || err != nil {
		t.Fatalf("sync: %d %v, want line 1 written", n, err)
	}
	sameCopy("once synced", 500)
}
