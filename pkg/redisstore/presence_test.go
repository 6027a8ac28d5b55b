package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// presenceLine is a queue with presence on, ten people in line (u0000 ..
// u0009, places 1 .. 10) and a leader whose first tick started the clock.
type presenceLine struct {
	t     *testing.T
	s     *redisstore.Store
	rdb   redis.UniversalClient
	q     string
	k     redisstore.Keys
	epoch int64
}

func newPresenceLine(t *testing.T, mut func(*queue.Config)) *presenceLine {
	t.Helper()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec = 1000
		c.AwayAfterSeconds, c.AwayGraceSeconds = 10, 30
		if mut != nil {
			mut(c)
		}
	})
	fill(t, s, q, 10)
	p := &presenceLine{t: t, s: s, rdb: rdb, q: q, k: redisstore.KeysFor(q), epoch: lead(t, s, q, "leader")}
	p.tick(0)
	return p
}

// sightingsForAMinute has a line's sightings arriving for a minute without
// a gap, as the sweep requires (presenceSinceMs; the next batch goes on
// with the run).
func sightingsForAMinute(t *testing.T, rdb redis.UniversalClient, k redisstore.Keys) {
	t.Helper()
	now := time.Now()
	if err := rdb.HSet(context.Background(), k.Dispatch(), "presenceSinceMs", now.Add(-time.Minute).UnixMilli(), "presenceMs", now.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
}

// quiet makes users last seen a minute ago, in sightings that have arrived
// for a minute.
func (p *presenceLine) quiet(users ...string) {
	p.t.Helper()
	sightingsForAMinute(p.t, p.rdb, p.k)
	for _, u := range users {
		if err := p.rdb.ZAdd(context.Background(), p.k.Seen(), redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: u}).Err(); err != nil {
			p.t.Fatal(err)
		}
	}
}

// sighted sends one batch of sightings, as a replica does.
func (p *presenceLine) sighted(users ...string) queue.Sightings {
	p.t.Helper()
	got, err := p.s.Sighted(context.Background(), p.q, users)
	if err != nil {
		p.t.Fatal(err)
	}
	return got
}

// tick admits up to n people (n grants) after letting credit build up, and
// returns who was admitted, in order, from the outbox.
func (p *presenceLine) tick(n int) []string {
	p.t.Helper()
	ctx := context.Background()
	before := len(outbox(p.t, p.rdb, p.q))
	time.Sleep(30 * time.Millisecond) // 30 credit at 1,000/s
	if _, err := p.s.Issue(ctx, p.q, queue.IssueRequest{Epoch: p.epoch, Tick: 100 * time.Millisecond, Grants: grants(p.t, n)}); err != nil {
		p.t.Fatal(err)
	}
	var admitted []string
	for _, m := range outbox(p.t, p.rdb, p.q)[before:] {
		if m.Values["type"] == queue.EventTokenIssued {
			admitted = append(admitted, m.Values["user"].(string))
		}
	}
	return admitted
}

func (p *presenceLine) standing(user string) queue.Standing {
	p.t.Helper()
	st, err := p.s.Position(context.Background(), p.q, user)
	if err != nil {
		p.t.Fatal(err)
	}
	return st
}

func (p *presenceLine) presence() queue.Presence {
	p.t.Helper()
	_, st, err := p.s.Config(context.Background(), p.q)
	if err != nil {
		p.t.Fatal(err)
	}
	return st.Presence
}

func users(ids ...int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("u%04d", id)
	}
	return out
}

func TestAwayPeopleArePassedOverAndThePresentAdmittedInTheirPlace(t *testing.T) {
	t.Parallel()
	p := newPresenceLine(t, nil)
	p.quiet(users(1, 3, 5)...)
	if got := p.sighted(users(0, 2, 4, 6, 7, 8, 9)...); got.Seen != 7 || got.CameBack != 0 {
		t.Fatalf("sightings of the seven present: %+v, want 7 seen", got)
	}
	// The next tick sweeps the three quiet out of the line.
	if got := p.tick(0); len(got) != 0 {
		t.Fatalf("a tick without grants admitted %v", got)
	}
	if pr := p.presence(); pr.Away != 3 || pr.Skipped != 0 || pr.AwayTotal != 3 {
		t.Fatalf("presence after the sweep: %+v, want 3 away", pr)
	}
	// Only present people ahead count: u0004 has u0000 and u0002 ahead.
	if st := p.standing("u0004"); st.State != queue.Waiting || st.Position != 3 {
		t.Fatalf("u0004: %s at %d, want WAITING at 3", st.State, st.Position)
	}
	// An away person is told their place among the present, and keeps it.
	if st := p.standing("u0003"); st.State != queue.Waiting || st.Position != 3 {
		t.Fatalf("away u0003: %s at %d, want WAITING at 3", st.State, st.Position)
	}
	// Four grants go to the first four present people, in their order.
	if got := p.tick(4); !slices.Equal(got, users(0, 2, 4, 6)) {
		t.Fatalf("admitted %v, want %v", got, users(0, 2, 4, 6))
	}
	if pr := p.presence(); pr.Away != 3 || pr.Skipped != 3 {
		t.Fatalf("presence after admitting past them: %+v, want 3 away, all 3 skipped", pr)
	}
	// Passed over, the away are leavers of the leave share, as if they
	// had pressed leave; one who comes back is taken out of it again.
	leftResolved := func() int {
		n, err := p.rdb.HGet(context.Background(), p.k.Dispatch(), redisstore.DispatchFieldLeftResolved).Int()
		if err != nil {
			t.Fatalf("leftResolved: %v", err)
		}
		return n
	}
	if n := leftResolved(); n != 3 {
		t.Fatalf("leftResolved %d after passing 3 away, want 3", n)
	}
	// u0003 comes back within the grace: the next admitted, ahead of u0007.
	if got := p.sighted("u0003"); got.CameBack != 1 {
		t.Fatalf("u0003's sighting: %+v, want 1 came back", got)
	}
	if n := leftResolved(); n != 2 {
		t.Fatalf("leftResolved %d after u0003 came back, want 2", n)
	}
	if st := p.standing("u0003"); st.State != queue.Waiting || st.Position != 1 {
		t.Fatalf("u0003 back: %s at %d, want WAITING at 1", st.State, st.Position)
	}
	if got := p.tick(2); !slices.Equal(got, users(3, 7)) {
		t.Fatalf("admitted %v, want %v", got, users(3, 7))
	}
	// u0005's grace ends: removed, told ABANDONED, an event says so.
	if err := p.rdb.ZAdd(context.Background(), p.k.Skipped(), redis.Z{Score: float64(time.Now().Add(-time.Hour).UnixMilli()), Member: "u0005"}).Err(); err != nil {
		t.Fatal(err)
	}
	p.tick(0)
	if st := p.standing("u0005"); st.State != queue.Abandoned {
		t.Fatalf("u0005 after the grace: %s, want ABANDONED", st.State)
	}
	var abandoned []string
	for _, m := range outbox(t, p.rdb, p.q) {
		if m.Values["type"] == queue.EventUserAbandoned {
			abandoned = append(abandoned, fmt.Sprint(m.Values["user"], " ", m.Values["seq"]))
		}
	}
	if !slices.Equal(abandoned, []string{"u0005 6"}) {
		t.Fatalf("UserAbandoned events: %v, want [u0005 6]", abandoned)
	}
	if pr := p.presence(); pr.Away != 1 || pr.Skipped != 1 || pr.AbandonedTotal != 1 || pr.CameBackTotal != 1 {
		t.Fatalf("presence at the end: %+v, want u0001 away and skipped, 1 abandoned, 1 came back", pr)
	}
	// A sighting of the abandoned writes nothing; entering again is a new
	// place at the back.
	if got := p.sighted("u0005"); got != (queue.Sightings{}) {
		t.Fatalf("sighting of the abandoned: %+v, want nothing", got)
	}
	st, err := p.s.Enter(context.Background(), p.q, "u0005")
	if err != nil || st.State != queue.Waiting || st.Seq != 11 || st.Position != 3 {
		t.Fatalf("u0005 enters again: %+v %v, want WAITING at place 11, position 3 (after u0008, u0009)", st, err)
	}
	// An enter is a sign of life too: u0001, away, enters and is back at
	// its place, first in line.
	st, err = p.s.Enter(context.Background(), p.q, "u0001")
	if err != nil || st.State != queue.Waiting || st.Seq != 2 || st.Position != 1 {
		t.Fatalf("away u0001 enters: %+v %v, want WAITING at place 2, position 1", st, err)
	}
}

func TestPresenceSkipsNobodyWhileNoSightingsArrive(t *testing.T) {
	t.Parallel()
	p := newPresenceLine(t, nil)
	ctx := context.Background()
	// Everyone quiet, and no batch came for 10 s: a gateway cut off from
	// Redis must not make its people away.
	p.quiet(users(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)...)
	if err := p.rdb.HSet(ctx, p.k.Dispatch(), "presenceMs", time.Now().Add(-10*time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := p.tick(3); !slices.Equal(got, users(0, 1, 2)) {
		t.Fatalf("admitted %v, want %v", got, users(0, 1, 2))
	}
	if pr := p.presence(); pr.Away != 0 {
		t.Fatalf("presence without sightings: %+v, want nobody away", pr)
	}
	// A batch (of someone else) arrives after the gap: a new run of
	// sightings, too young to take anyone for away (after a failover to a
	// replica that lacks the last batches, the present are not all seen
	// yet). u0003 is admitted in their place.
	p.sighted("u0009")
	since, err := p.rdb.HGet(ctx, p.k.Dispatch(), "presenceSinceMs").Int64()
	if err != nil || time.Since(time.UnixMilli(since)) > 5*time.Second {
		t.Fatalf("presenceSinceMs %d %v after the first batch past a gap, want about now", since, err)
	}
	if got := p.tick(1); !slices.Equal(got, users(3)) {
		t.Fatalf("admitted %v in a run of sightings younger than awayAfterSeconds, want %v", got, users(3))
	}
	if pr := p.presence(); pr.Away != 0 {
		t.Fatalf("presence in a young run: %+v, want nobody away", pr)
	}
	// Another batch a moment later goes on with the run; once the run is
	// awayAfterSeconds (10 s) old, the quiet are swept.
	p.sighted("u0009")
	if again, _ := p.rdb.HGet(ctx, p.k.Dispatch(), "presenceSinceMs").Int64(); again != since {
		t.Fatalf("presenceSinceMs %d after a batch without a gap, want %d kept", again, since)
	}
	if err := p.rdb.HSet(ctx, p.k.Dispatch(), "presenceSinceMs", time.Now().Add(-10*time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := p.tick(3); !slices.Equal(got, users(9)) {
		t.Fatalf("admitted %v, want only the one present, %v", got, users(9))
	}
	if pr := p.presence(); pr.Away != 5 || pr.Skipped != 5 {
		t.Fatalf("presence: %+v, want 5 away, all passed", pr)
	}
}

func TestPresenceOffPutsTheAwayBack(t *testing.T) {
	t.Parallel()
	p := newPresenceLine(t, nil)
	p.quiet(users(0, 1)...)
	p.sighted("u0002")
	p.tick(0)
	if pr := p.presence(); pr.Away != 2 {
		t.Fatalf("presence: %+v, want 2 away", pr)
	}
	// An away person who leaves is gone for good.
	if ok, err := p.s.Leave(context.Background(), p.q, "u0001"); err != nil || !ok {
		t.Fatalf("away u0001 leaves: %v %v", ok, err)
	}
	if st := p.standing("u0001"); st.State != queue.NotInQueue {
		t.Fatalf("u0001 after leaving: %s, want NOT_IN_QUEUE", st.State)
	}
	if _, _, err := p.s.UpdateConfig(context.Background(), p.q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.AwayAfterSeconds = 0
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	p.tick(0)
	if pr := p.presence(); pr.Away != 0 {
		t.Fatalf("presence off: %+v, want nobody away", pr)
	}
	if got := p.tick(3); !slices.Equal(got, users(0, 2, 3)) {
		t.Fatalf("admitted %v, want %v", got, users(0, 2, 3))
	}
	p.tick(0)
	if n, err := p.rdb.Exists(context.Background(), p.k.Seen(), p.k.Away(), p.k.Skipped()).Result(); err != nil || n != 0 {
		t.Fatalf("presence keys left with presence off: %d %v", n, err)
	}
	// Nothing flags the line any more: its scripts touch no presence key,
	// so its ticks keep working while its slot migrates.
	if f, err := p.rdb.HGet(context.Background(), p.k.Dispatch(), "presenceKeys").Result(); err != redis.Nil {
		t.Fatalf("presenceKeys %q %v after the keys went, want none", f, err)
	}
}

// A queue split into lines: sightings go to each person's line, each line
// sweeps its own quiet, and the lines admit only the present.
func TestPresenceInAQueueSplitIntoLines(t *testing.T) {
	t.Parallel()
	const shards, n = 3, 60
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, func(c *queue.Config) {
		c.Shards, c.AdmissionRatePerSec, c.ActivationSpreadMs = shards, 1000, 0
		c.AwayAfterSeconds, c.AwayGraceSeconds = 10, 30
	})
	var quiet, present []string
	for i := range n {
		u := fmt.Sprintf("s%03d", i)
		if _, err := s.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			quiet = append(quiet, u)
			line := lineOf(t, s, q, u)
			sightingsForAMinute(t, rdb, redisstore.KeysFor(queue.LineID(q, line)))
			if err := rdb.ZAdd(ctx, redisstore.KeysFor(queue.LineID(q, line)).Seen(),
				redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: u}).Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			present = append(present, u)
		}
	}
	if got, err := s.Sighted(ctx, q, present); err != nil || got.Seen != int64(len(present)) {
		t.Fatalf("sightings of the %d present: %+v %v", len(present), got, err)
	}
	_, epoch := leadAllLines(t, s, q, shards)
	tick := func(k int) []string {
		t.Helper()
		var calls []queue.IssueCall
		for line := range shards {
			calls = append(calls, queue.IssueCall{QueueID: q, Line: line, IssueRequest: queue.IssueRequest{
				Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, k), Share: 1.0 / shards}})
		}
		var admitted []string
		for i, r := range s.IssueAll(ctx, calls) {
			if r.Err != nil {
				t.Fatalf("issue line %d: %v", i, r.Err)
			}
		}
		for line := range shards {
			for _, m := range outbox(t, rdb, queue.LineID(q, line)) {
				if m.Values["type"] == queue.EventTokenIssued {
					admitted = append(admitted, m.Values["user"].(string))
				}
			}
		}
		slices.Sort(admitted)
		return admitted
	}
	tick(0) // starts the lines' clocks and sweeps the quiet out
	_, st, err := s.Config(ctx, q)
	if err != nil || st.Presence.Away != int64(len(quiet)) || st.Waiting != int64(len(present)) {
		t.Fatalf("after the sweep: %d waiting, presence %+v, %v; want %d waiting, %d away", st.Waiting, st.Presence, err, len(present), len(quiet))
	}
	time.Sleep(200 * time.Millisecond)
	if got := tick(30); !slices.Equal(got, present) {
		t.Fatalf("admitted %v, want the %d present %v", got, len(present), present)
	}
	// A quiet one comes back, through their own line.
	if got, err := s.Sighted(ctx, q, quiet[:1]); err != nil || got.CameBack != 1 {
		t.Fatalf("%s's sighting: %+v %v, want 1 came back", quiet[0], got, err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := tick(30); !slices.Contains(got, quiet[0]) || len(got) != len(present)+1 {
		t.Fatalf("admitted %v, want the present and %s", got, quiet[0])
	}
}

// A batch is safe to send twice (a client that timed out and retried) and
// to arrive late (held on the way): it brings back nobody who left, was
// admitted or was removed, and moves nobody twice.
func TestSightingsAreSafeToRepeatAndToArriveLate(t *testing.T) {
	t.Parallel()
	p := newPresenceLine(t, nil)
	p.quiet(users(1, 2)...)
	p.sighted("u0000")
	p.tick(0)
	if got := p.tick(1); !slices.Equal(got, users(0)) {
		t.Fatalf("admitted %v, want u0000", got)
	}
	// u0001 comes back; the batch is sent again.
	for i, want := range []queue.Sightings{{CameBack: 1}, {Seen: 1}} {
		if got := p.sighted("u0001"); got != want {
			t.Fatalf("u0001's batch, send %d: %+v, want %+v", i+1, got, want)
		}
	}
	if st := p.standing("u0001"); st.State != queue.Waiting || st.Position != 1 {
		t.Fatalf("u0001 after two sends: %+v, want WAITING first in line", st)
	}
	// u0002 leaves; a batch of sightings from before arrives late, with
	// the admitted u0000 in it too.
	if ok, err := p.s.Leave(context.Background(), p.q, "u0002"); err != nil || !ok {
		t.Fatalf("u0002 leaves: %v %v", ok, err)
	}
	if got := p.sighted("u0000", "u0002"); got != (queue.Sightings{}) {
		t.Fatalf("late sightings of the admitted and the gone: %+v, want nothing", got)
	}
	if st := p.standing("u0002"); st.State != queue.NotInQueue {
		t.Fatalf("u0002 after a late sighting: %s, want NOT_IN_QUEUE", st.State)
	}
	if pr := p.presence(); pr.Away != 0 || pr.CameBackTotal != 1 || pr.AwayTotal != 2 {
		t.Fatalf("presence: %+v, want nobody away, 1 came back of 2 who went", pr)
	}
}

// The draw places the pre-queued absentees like anyone else; the next
// ticks pass over them and admit the present in drawn order.
func TestPresenceAfterTheDraw(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	starts := time.Now().Add(400 * time.Millisecond)
	q := scheduled(t, s, starts, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.AwayAfterSeconds, c.AwayGraceSeconds = 1000, 10, 30
	})
	k := redisstore.KeysFor(q)
	early := names("e", 10)
	enterAll(t, s, q, queue.PreQueue, early...)
	quiet := early[:4]
	sightingsForAMinute(t, rdb, k)
	for _, u := range quiet {
		if err := rdb.ZAdd(ctx, k.Seen(), redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: u}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	epoch := lead(t, s, q, "d1")
	time.Sleep(time.Until(starts) + 20*time.Millisecond)
	if _, err := s.Sighted(ctx, q, early[4:]); err != nil { // the pre-queued who poll
		t.Fatal(err)
	}
	issue := func(n int) queue.IssueResult {
		t.Helper()
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, n)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := issue(10); r.Held != queue.HeldDraw {
		t.Fatalf("tick during the draw: %+v, want held for DRAW", r)
	}
	if pr, _ := presenceOf(t, s, q); pr.Away != 0 {
		t.Fatalf("presence while the draw is pending: %+v, want nobody away", pr)
	}
	w, err := s.StartDraw(ctx, q, epoch, queue.DrawTotals{})
	if err != nil {
		t.Fatal(err)
	}
	order, err := queue.DrawOrder(w.Seed, w.Remaining)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PlaceDrawn(ctx, q, epoch, order); err != nil {
		t.Fatal(err)
	}
	if w, err := s.FinishDraw(ctx, q, epoch, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn {
		t.Fatalf("finish: %+v %v", w, err)
	}
	if _, err := s.Sighted(ctx, q, early[4:]); err != nil {
		t.Fatal(err)
	}
	issue(0)
	if pr, waiting := presenceOf(t, s, q); pr.Away != int64(len(quiet)) || waiting != int64(len(early)-len(quiet)) {
		t.Fatalf("after the draw: presence %+v, %d waiting; want %d away, %d waiting", pr, waiting, len(quiet), len(early)-len(quiet))
	}
	time.Sleep(30 * time.Millisecond)
	issue(10)
	var admitted []string
	for _, m := range outboxOf(t, rdb, q, queue.EventTokenIssued) {
		admitted = append(admitted, m["user"].(string))
	}
	want := slices.DeleteFunc(slices.Clone(order), func(u string) bool { return slices.Contains(quiet, u) })
	if !slices.Equal(admitted, want) {
		t.Fatalf("admitted %v, want the present in drawn order %v", admitted, want)
	}
}

func presenceOf(t *testing.T, s *redisstore.Store, q string) (queue.Presence, int64) {
	t.Helper()
	_, st, err := s.Config(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return st.Presence, st.Waiting
}

// An away person at the tail, with nobody behind to be admitted past them,
// reaches their turn when the present run out: skipped then, so their
// grace runs and they are removed, not kept forever.
func TestTheAwayAtTheTailAreSkippedWhenThePresentRunOut(t *testing.T) {
	t.Parallel()
	p := newPresenceLine(t, func(c *queue.Config) { c.AwayGraceSeconds = 0 })
	p.quiet("u0009")
	p.sighted(users(0, 1, 2, 3, 4, 5, 6, 7, 8)...)
	p.tick(0)
	// Four grants: the present are not done, u0009's turn has not come.
	if got := p.tick(4); !slices.Equal(got, users(0, 1, 2, 3)) {
		t.Fatalf("admitted %v, want %v", got, users(0, 1, 2, 3))
	}
	if pr := p.presence(); pr.Away != 1 || pr.Skipped != 0 {
		t.Fatalf("presence with people present behind: %+v, want 1 away, not skipped", pr)
	}
	if got := p.tick(20); !slices.Equal(got, users(4, 5, 6, 7, 8)) {
		t.Fatalf("admitted %v, want %v", got, users(4, 5, 6, 7, 8))
	}
	if pr := p.presence(); pr.Away != 1 || pr.Skipped != 1 {
		t.Fatalf("presence once the present ran out: %+v, want u0009 skipped", pr)
	}
	p.sighted("u0000") // sightings keep arriving
	p.tick(0)          // no grace: removed
	if st := p.standing("u0009"); st.State != queue.Abandoned {
		t.Fatalf("u0009: %s, want ABANDONED", st.State)
	}
}

// The same when the sightings have stopped (the drill of a Redis failover
// to a lagging replica found it: the replica's first batch started a new
// run, the last pollers were admitted before it was awayAfterSeconds old,
// and no batch came again): the present run out, so the away person at
// the tail has reached their turn whether or not sightings arrive; skipped,
// their grace runs out and they are removed, not kept away for ever.
func TestTheAwayAtTheTailAreSkippedWhenSightingsHaveStopped(t *testing.T) {
	t.Parallel()
	p := newPresenceLine(t, func(c *queue.Config) { c.AwayGraceSeconds = 0 })
	ctx := context.Background()
	p.quiet("u0009")
	p.sighted(users(0, 1, 2, 3, 4, 5, 6, 7, 8)...)
	if got := p.tick(4); !slices.Equal(got, users(0, 1, 2, 3)) {
		t.Fatalf("admitted %v, want %v", got, users(0, 1, 2, 3))
	}
	if pr := p.presence(); pr.Away != 1 || pr.Skipped != 0 {
		t.Fatalf("presence with people present behind: %+v, want 1 away, not skipped", pr)
	}
	// The last batch came 10 s ago, in a run that began just before it.
	if err := p.rdb.HSet(ctx, p.k.Dispatch(), "presenceMs", time.Now().Add(-10*time.Second).UnixMilli(),
		"presenceSinceMs", time.Now().Add(-11*time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := p.tick(20); !slices.Equal(got, users(4, 5, 6, 7, 8)) {
		t.Fatalf("admitted %v, want %v", got, users(4, 5, 6, 7, 8))
	}
	if pr := p.presence(); pr.Away != 1 || pr.Skipped != 1 {
		t.Fatalf("presence once the present ran out without sightings: %+v, want u0009 skipped", pr)
	}
	p.tick(0) // no grace, no sightings: removed all the same
	if st := p.standing("u0009"); st.State != queue.Abandoned {
		t.Fatalf("u0009: %s, want ABANDONED", st.State)
	}
}
