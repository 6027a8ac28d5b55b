package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// scheduled creates a queue starting at starts.
func scheduled(t *testing.T, s *redisstore.Store, starts time.Time, mut func(*queue.Config)) string {
	t.Helper()
	return newQueue(t, s, func(c *queue.Config) {
		c.StartsAt, c.ActivationSpreadMs = starts.Truncate(time.Millisecond), 0
		if mut != nil {
			mut(c)
		}
	})
}

func enterAll(t *testing.T, s *redisstore.Store, q string, want queue.UserState, users ...string) []queue.Standing {
	t.Helper()
	var out []queue.Standing
	for _, u := range users {
		st, err := s.Enter(context.Background(), q, u)
		if err != nil || st.State != want {
			t.Fatalf("%s entered: %s %v, want %s", u, st.State, err, want)
		}
		out = append(out, st)
	}
	return out
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// outboxOf returns the outbox entries of one type, as field maps.
func outboxOf(t *testing.T, rdb redis.UniversalClient, q, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range outbox(t, rdb, q) {
		if m.Values["type"] == typ {
			out = append(out, m.Values)
		}
	}
	return out
}

// TestPreQueueBeforeTheStart: before the start every entrant is pre-queued
// (PRE_QUEUE, with the start, the time left and how many wait for it),
// nobody is in the line, a second enter keeps the one entry, leave takes a
// person out, the cap counts the pre-queued, the tick admits nobody, and
// the seed's hash is published while the seed is not.
func TestPreQueueBeforeTheStart(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	starts := time.Now().Add(time.Hour)
	q := scheduled(t, s, starts, func(c *queue.Config) { c.MaxQueueSize = 5 })
	k := redisstore.KeysFor(q)

	users := names("p", 5)
	for i, st := range enterAll(t, s, q, queue.PreQueue, users...) {
		if st.PreQueued != int64(i+1) || st.Position != 0 || !st.StartsAt.Equal(starts.Truncate(time.Millisecond)) {
			t.Errorf("%s: preQueued %d position %d startsAt %v; want %d, 0, %v", users[i], st.PreQueued, st.Position, st.StartsAt, i+1, starts)
		}
		if st.StartsIn < 59*time.Minute || st.StartsIn > time.Hour {
			t.Errorf("%s: starts in %v, want about an hour", users[i], st.StartsIn)
		}
	}
	again := enterAll(t, s, q, queue.PreQueue, users[0])[0]
	if again.PreQueued != 5 {
		t.Errorf("a second enter: preQueued %d, want 5", again.PreQueued)
	}
	if _, err := s.Enter(ctx, q, "late"); !errors.Is(err, queue.ErrFull) {
		t.Errorf("a sixth entrant with maxQueueSize 5: %v, want queue full", err)
	}
	if n := rdb.ZCard(ctx, k.Waiting()).Val(); n != 0 {
		t.Errorf("%d in the line before the start, want 0", n)
	}
	if st, err := s.Position(ctx, q, users[3]); err != nil || st.State != queue.PreQueue || st.PreQueued != 5 {
		t.Errorf("position of a pre-queued person: %+v %v", st, err)
	}
	if left, err := s.Leave(ctx, q, users[3]); err != nil || !left {
		t.Fatalf("leave the pre-queue: %v %v", left, err)
	}
	if st, _ := s.Position(ctx, q, users[3]); st.State != queue.NotInQueue || st.PreQueued != 4 {
		t.Errorf("after leaving: %s with %d pre-queued, want NOT_IN_QUEUE and 4", st.State, st.PreQueued)
	}
	if d := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldLeftTotal).Val(); d != "" {
		t.Errorf("leftTotal %q after a pre-queued person left, want none: they had no place", d)
	}

	epoch := lead(t, s, q, "d1")
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 5)})
	if err != nil || r.Issued != 0 || r.Held != "" {
		t.Fatalf("tick before the start: %+v %v, want nothing issued, not held", r, err)
	}
	_, stats, err := s.Config(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	d := stats.Draw
	if d == nil || d.State != queue.DrawScheduled || len(d.SeedSHA256) != 64 || d.Seed != "" || d.PreQueued != 4 || d.Placed != 0 {
		t.Fatalf("draw before the start: %+v; want SCHEDULED, a 64-digit hash, no seed, 4 pre-queued", d)
	}
	if got := rdb.HGet(ctx, k.Draw(), "seed").Val(); len(got) != 64 {
		t.Errorf("stored seed %q, want 64 hex digits", got)
	}
}

// TestDrawPlacesThePreQueueAheadOfLaterEntrants: the first enter after the
// start closes the pre-queue; the tick holds admission (DRAW) until the
// leader has placed everyone; a repeated place call and a repeated finish
// change nothing; one person who left during the draw is skipped; the line
// is the drawn order followed by the later entrants in arrival order, and
// admission follows it. QueueStarted carries the hash before the draw,
// QueueDrawn the seed that reproduces the order.
func TestDrawPlacesThePreQueueAheadOfLaterEntrants(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	starts := time.Now().Add(400 * time.Millisecond)
	q := scheduled(t, s, starts, nil)
	k := redisstore.KeysFor(q)
	early := names("e", 20)
	enterAll(t, s, q, queue.PreQueue, early...)
	epoch := lead(t, s, q, "d1")
	time.Sleep(time.Until(starts) + 20*time.Millisecond)

	late := names("l", 5)
	for i, st := range enterAll(t, s, q, queue.Waiting, late...) {
		if st.Position != int64(i+1) {
			t.Errorf("%s entered after the start at position %d, want %d (the pre-queue is not placed yet)", late[i], st.Position, i+1)
		}
	}
	if st := enterAll(t, s, q, queue.PreQueue, early[0])[0]; st.StartsIn != 0 {
		t.Errorf("pre-queued person after the start: starts in %v, want 0", st.StartsIn)
	}
	if got := rdb.Get(ctx, k.Seq()).Val(); got != "25" {
		t.Errorf("seq %s after 20 reserved and 5 entered, want 25", got)
	}
	tick := func() queue.IssueResult {
		t.Helper()
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 100)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := tick(); r.Held != queue.HeldDraw || r.Issued != 0 {
		t.Fatalf("tick during the draw: %+v, want held for DRAW, nobody issued", r)
	}

	w, err := s.StartDraw(ctx, q, epoch, queue.DrawTotals{})
	if err != nil || w.State != queue.DrawDrawing || len(w.Remaining) != 20 || w.PreQueued != 20 {
		t.Fatalf("start draw: %+v %v; want DRAWING with 20 to place", w, err)
	}
	if _, err := s.StartDraw(ctx, q, epoch, queue.DrawTotals{}); err != nil {
		t.Fatal(err)
	}
	started := outboxOf(t, rdb, q, queue.EventQueueStarted)
	_, stats, _ := s.Config(ctx, q)
	if len(started) != 1 || started[0]["sha"] != stats.Draw.SeedSHA256 || started[0]["pre"] != "20" || stats.Draw.Seed != "" {
		t.Fatalf("QueueStarted %v (seed shown %q); want one, with the committed hash and 20 pre-queued, seed not shown", started, stats.Draw.Seed)
	}
	order, err := queue.DrawOrder(w.Seed, w.Remaining)
	if err != nil {
		t.Fatal(err)
	}
	// One of the drawn leaves before being placed: skipped.
	gone := order[9]
	if left, err := s.Leave(ctx, q, gone); err != nil || !left {
		t.Fatalf("leave during the draw: %v %v", left, err)
	}
	for _, chunk := range [][]string{order[:7], order[:7], order[7:14], order[14:]} {
		if _, err := s.PlaceDrawn(ctx, q, epoch, chunk); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if w, err = s.FinishDraw(ctx, q, epoch, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn || w.Placed != 19 {
			t.Fatalf("finish: %+v %v; want DRAWN with 19 placed", w, err)
		}
	}
	want := append(slices.DeleteFunc(slices.Clone(order), func(u string) bool { return u == gone }), late...)
	line := rdb.ZRangeWithScores(ctx, k.Waiting(), 0, -1).Val()
	if len(line) != 24 {
		t.Fatalf("%d in line after the draw, want 24", len(line))
	}
	for i, z := range line {
		if z.Member != want[i] {
			t.Fatalf("place %d is %v, want %s: the drawn order, then the later entrants", i+1, z.Member, want[i])
		}
	}
	if line[0].Score != 1 || line[18].Score != 19 || line[19].Score != 21 {
		t.Errorf("sequence numbers %v %v %v, want 1, 19 (the drawn), 21 (the first later entrant)", line[0].Score, line[18].Score, line[19].Score)
	}
	drawn := outboxOf(t, rdb, q, queue.EventQueueDrawn)
	if len(drawn) != 1 || drawn[0]["seed"] != w.Seed || drawn[0]["placed"] != "19" || drawn[0]["first"] != "1" || drawn[0]["last"] != "19" {
		t.Fatalf("QueueDrawn %v, want one with the seed, 19 placed, sequence 1..19", drawn)
	}
	sha, err := queue.SeedSHA256(w.Seed)
	if err != nil || sha != stats.Draw.SeedSHA256 {
		t.Errorf("sha256 of the published seed %s, committed %s (%v)", sha, stats.Draw.SeedSHA256, err)
	}
	if _, stats, _ = s.Config(ctx, q); stats.Draw.State != queue.DrawDrawn || stats.Draw.Seed != w.Seed || stats.Draw.Placed != 19 || stats.Draw.DrawnAt.IsZero() {
		t.Errorf("draw after finishing: %+v", stats.Draw)
	}
	// The number reserved for the one who left is an empty place: a leaver
	// of the frontier's bins, so the later entrants' places count right.
	if m := rdb.ZRangeWithScores(ctx, k.Left(), 0, -1).Val(); len(m) != 1 || m[0].Member != "20:" || m[0].Score != 20 {
		t.Errorf("left after the draw: %v, want the unused number 20", m)
	}
	fs, err := s.Frontiers(ctx, []string{q})
	if err != nil || fs[q] == nil || !fs[q].Usable || fs[q].Tail != 25 {
		t.Fatalf("frontier after the draw: %+v %v, want usable with tail 25", fs[q], err)
	}
	if b := rdb.HGetAll(ctx, k.LeftBins()).Val(); len(b) != 2 || b["f1"] != "1" || b["c0"] != "1" {
		t.Errorf("leftbins %v, want the one empty place in fine bin 1 and coarse bin 0", b)
	}
	// Within its bin of 16 the empty place is spread evenly: off by at most one.
	for i, u := range late {
		if want, got := int64(20+i), fs[q].Place(int64(21+i)); got < want || got > want+1 {
			t.Errorf("frontier place of %s (seq %d): %d, want %d (or one more)", u, 21+i, got, want)
		}
	}

	var admitted []string
	for len(admitted) < 24 {
		if r := tick(); r.Held != "" {
			t.Fatalf("tick after the draw held: %+v", r)
		}
		admitted = admitted[:0]
		for _, e := range outboxOf(t, rdb, q, queue.EventTokenIssued) {
			admitted = append(admitted, e["user"].(string))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Equal(admitted, want) {
		t.Errorf("admitted %v, want %v", admitted, want)
	}
	// The unused number left the bins and the leavers' set once passed,
	// and is no leaver of the leave share (its person never had a place).
	if r := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldLeftResolved).Val(); r != "" && r != "0" {
		t.Errorf("leftResolved %q after the draw's unused number was passed, want none", r)
	}
	if n, b := rdb.ZCard(ctx, k.Left()).Val(), rdb.HLen(ctx, k.LeftBins()).Val(); n != 0 || b != 0 {
		t.Errorf("after everyone was admitted: %d in left, %d leaver bins; want 0 and 0", n, b)
	}
}

// TestDrawResumedByANewLeaderKeepsTheOrder: a leader places part of the
// pre-queue and dies; the next leader places whoever is left in the same
// drawn order, and the line is exactly the order of the whole draw. The
// old leader's late call is refused and changes nothing.
func TestDrawResumedByANewLeaderKeepsTheOrder(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	starts := time.Now().Add(300 * time.Millisecond)
	q := scheduled(t, s, starts, nil)
	early := names("e", 30)
	enterAll(t, s, q, queue.PreQueue, early...)
	old := lead(t, s, q, "d1")
	time.Sleep(time.Until(starts) + 20*time.Millisecond)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: old, Tick: 100 * time.Millisecond, Grants: grants(t, 10)})
	if err != nil || r.Held != queue.HeldDraw {
		t.Fatalf("the tick that closes the pre-queue: %+v %v", r, err)
	}
	w, err := s.StartDraw(ctx, q, old, queue.DrawTotals{})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := queue.DrawOrder(w.Seed, w.Remaining)
	if _, err := s.PlaceDrawn(ctx, q, old, full[:11]); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, q, "d1", old); err != nil {
		t.Fatal(err)
	}
	next := lead(t, s, q, "d2")
	if _, err := s.PlaceDrawn(ctx, q, old, full[11:]); !errors.Is(err, queue.ErrStaleEpoch) {
		t.Fatalf("the old leader's place: %v, want stale epoch", err)
	}
	w, err = s.StartDraw(ctx, q, next, queue.DrawTotals{})
	if err != nil || len(w.Remaining) != 19 || w.Placed != 11 {
		t.Fatalf("the new leader resumes: %+v %v; want 19 left, 11 placed", w, err)
	}
	rest, _ := queue.DrawOrder(w.Seed, w.Remaining)
	if _, err := s.PlaceDrawn(ctx, q, next, rest); err != nil {
		t.Fatal(err)
	}
	if w, err = s.FinishDraw(ctx, q, next, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn || w.Placed != 30 {
		t.Fatalf("finish: %+v %v", w, err)
	}
	line := rdb.ZRange(ctx, redisstore.KeysFor(q).Waiting(), 0, -1).Val()
	if !slices.Equal(line, full) {
		t.Errorf("line %v, want the whole draw's order %v", line, full)
	}
	if n := len(outboxOf(t, rdb, q, queue.EventQueueStarted)); n != 1 {
		t.Errorf("%d QueueStarted after two leaders, want 1", n)
	}
}

// TestStartsAtCommitsTheSeedOnceAndFreezesAtTheStart: setting a start time
// commits a seed; moving it before the start keeps that seed; once the
// pre-queue is closed a change is refused (queue.ErrStarted) and writes
// nothing, while a PUT that repeats the same start time passes.
func TestStartsAtCommitsTheSeedOnceAndFreezesAtTheStart(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, nil)
	k := redisstore.KeysFor(q)
	if n := rdb.Exists(ctx, k.Draw()).Val(); n != 0 {
		t.Fatalf("a queue without a start time has a draw")
	}
	set := func(at time.Time) error {
		_, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
			c.StartsAt = at
			return c, nil
		})
		return err
	}
	first := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := set(first); err != nil {
		t.Fatal(err)
	}
	sha := rdb.HGet(ctx, k.Draw(), "seedSha256").Val()
	if err := set(first.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if again := rdb.HGet(ctx, k.Draw(), "seedSha256").Val(); again != sha || len(sha) != 64 {
		t.Fatalf("seed hash %q after moving the start, was %q: the commitment must not change", again, sha)
	}
	soon := time.Now().Add(200 * time.Millisecond).Truncate(time.Millisecond)
	if err := set(soon); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(soon) + 20*time.Millisecond)
	enterAll(t, s, q, queue.Waiting, "after")
	if err := set(time.Now().Add(time.Hour)); !errors.Is(err, queue.ErrStarted) {
		t.Fatalf("moving the start after it: %v, want queue.ErrStarted", err)
	}
	cfg, _, _ := s.Config(ctx, q)
	if !cfg.StartsAt.Equal(soon) {
		t.Errorf("startsAt %v after a refused change, want %v", cfg.StartsAt, soon)
	}
	if err := set(soon); err != nil {
		t.Errorf("repeating the same start time: %v", err)
	}
}
