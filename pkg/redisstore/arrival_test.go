package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// TestLineKeyIsMadeOnceAndNeverShown: a queue gets its line key when it is
// created (split or not); a config write keeps it; the lines' config
// copies and the config read the views are made of do not carry it. A queue split before keys
// existed, with people in it, gets none from a config write (its people
// stay in their lines), and one when its count changes while it is empty.
func TestLineKeyIsMadeOnceAndNeverShown(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	keyOf := func(id string) string { return rdb.HGet(ctx, redisstore.KeysFor(id).Config(), "lineKey").Val() }
	setRate := func(q string, rate float64) {
		t.Helper()
		if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
			c.AdmissionRatePerSec = rate
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	split := newQueue(t, s, func(c *queue.Config) { c.Shards = 3 })
	one := newQueue(t, s, nil)
	key := keyOf(split)
	if k, err := queue.ParseLineKey(key); err != nil || len(k) != queue.LineKeyBytes || len(keyOf(one)) != 2*queue.LineKeyBytes {
		t.Fatalf("line keys %q and %q, want %d hex bytes each (%v)", key, keyOf(one), queue.LineKeyBytes, err)
	}
	setRate(split, 42)
	if keyOf(split) != key {
		t.Fatal("a config write changed the line key")
	}
	if k := keyOf(queue.LineID(split, 1)); k != "" {
		t.Fatalf("line 1's config copy carries the line key %q", k)
	}
	cfg, st, err := s.Config(ctx, split)
	if err != nil {
		t.Fatal(err)
	}
	// What the views are made of (the gateway's admin and public views).
	shown, _ := json.Marshal([]any{cfg, st})
	if strings.Contains(string(shown), key) {
		t.Fatalf("the config read shows the line key: %s", shown)
	}

	// Before keys: people are in their FNV-1a lines.
	legacy := newQueue(t, s, func(c *queue.Config) { c.Shards, c.State = 3, queue.Paused })
	rdb.HDel(ctx, redisstore.KeysFor(legacy).Config(), "lineKey")
	fresh, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		u := fmt.Sprintf("p%02d", i)
		st, err := fresh.Enter(ctx, legacy, u)
		if err != nil || st.State != queue.Waiting || st.Line != queue.LineOf(nil, u, 3) {
			t.Fatalf("enter %s: %+v %v; want WAITING in line %d", u, st, err, queue.LineOf(nil, u, 3))
		}
	}
	setRate(legacy, 7)
	if k := keyOf(legacy); k != "" {
		t.Fatalf("a config write gave a queue with people in it a line key %q", k)
	}
	if st, err := fresh.Position(ctx, legacy, "p07"); err != nil || st.State != queue.Waiting {
		t.Fatalf("p07 after the write: %+v %v", st, err)
	}
	// Emptied, it gets one with its next change of count.
	for i := range 20 {
		if _, err := fresh.Leave(ctx, legacy, fmt.Sprintf("p%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.UpdateConfig(ctx, legacy, func(c queue.Config, _ bool) (queue.Config, error) { c.Shards = 4; return c, nil }); err != nil {
		t.Fatal(err)
	}
	if len(keyOf(legacy)) != 2*queue.LineKeyBytes {
		t.Fatalf("an emptied queue split again has line key %q", keyOf(legacy))
	}
}

// TestEnterTimesGoWithThePeople: in a queue of three lines every place
// comes with its enter time (entered); a tick reports the times of the
// people next in its line, in order; the times go when their people
// leave, are admitted, or the queue closes. A queue not split keeps them
// too (the history measures waits from them), and they go with the
// admitted.
func TestEnterTimesGoWithThePeople(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	const shards, n = 3, 30
	q := newQueue(t, s, func(c *queue.Config) {
		c.Shards, c.State, c.AdmissionRatePerSec, c.ActivationSpreadMs = shards, queue.Paused, 1000, 0
	})
	entered := func() (count int64) {
		for line := range shards {
			count += rdb.HLen(ctx, redisstore.KeysFor(queue.LineID(q, line)).Entered()).Val()
		}
		return count
	}
	before := time.Now().Add(-time.Second).UnixMicro()
	for i := range n {
		if _, err := s.Enter(ctx, q, fmt.Sprintf("p%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now().Add(time.Second).UnixMicro()
	if got := entered(); got != n {
		t.Fatalf("%d enter times for %d people", got, n)
	}
	for i := range 3 {
		if _, err := s.Leave(ctx, q, fmt.Sprintf("p%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := entered(); got != n-3 {
		t.Fatalf("%d enter times after 3 of %d left", got, n)
	}

	// Open, and tick each line with room for 2 and heads asked for 5.
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { c.State = queue.Open; return c, nil }); err != nil {
		t.Fatal(err)
	}
	epoch, err := s.AcquireLease(ctx, q, "owner", 10*time.Second)
	if err != nil || epoch == 0 {
		t.Fatalf("lease: %d %v", epoch, err)
	}
	lines := []queue.LineLease{{QueueID: q, Line: 1, Epoch: epoch}, {QueueID: q, Line: 2, Epoch: epoch}}
	for _, r := range s.FollowLeases(ctx, "owner", lines) {
		if r.Err != nil || r.Epoch != epoch {
			t.Fatalf("follow: %+v", r)
		}
	}
	tick := func(grants, heads int) []queue.IssueReply {
		t.Helper()
		var calls []queue.IssueCall
		for line := range shards {
			g, err := queue.Grants(grants)
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, queue.IssueCall{QueueID: q, Line: line, IssueRequest: queue.IssueRequest{
				Epoch: epoch, Tick: time.Second, Grants: g, Share: 1, Heads: heads}})
		}
		replies := s.IssueAll(ctx, calls)
		for line, r := range replies {
			if r.Err != nil {
				t.Fatalf("line %d: %v", line, r.Err)
			}
		}
		return replies
	}
	tick(0, 0) // the first tick of a queue starts its credit
	time.Sleep(10 * time.Millisecond)
	issued := 0
	for line, r := range tick(2, 5) {
		issued += r.Issued
		want := min(5, int(r.Waiting))
		if !r.HeadsRead || len(r.Heads) != want || !slices.IsSorted(r.Heads) {
			t.Fatalf("line %d: heads %v (read %v) of %d waiting, want %d in order", line, r.Heads, r.HeadsRead, r.Waiting, want)
		}
		for _, at := range r.Heads {
			if at < before || at > after {
				t.Fatalf("line %d: enter time %d not between %d and %d", line, at, before, after)
			}
		}
	}
	if got := entered(); issued == 0 || got != int64(n-3-issued) {
		t.Fatalf("%d enter times after %d of %d were admitted", got, issued, n-3)
	}
	for range 20 {
		time.Sleep(20 * time.Millisecond)
		tick(n, 0)
	}
	if got := entered(); got != 0 {
		t.Fatalf("%d enter times with everyone admitted", got)
	}

	// Close takes the times of the people it drops.
	for i := range 5 {
		if _, err := s.Enter(ctx, q, fmt.Sprintf("late%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if entered() != 5 {
		t.Fatalf("%d enter times for 5 late entrants", entered())
	}
	if _, err := s.Close(ctx, q); err != nil {
		t.Fatal(err)
	}
	if got := entered(); got != 0 {
		t.Fatalf("%d enter times in a closed queue", got)
	}

	plain := newQueue(t, s, nil)
	for _, u := range []string{"someone", "another"} {
		if _, err := s.Enter(ctx, plain, u); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.HLen(ctx, redisstore.KeysFor(plain).Entered()).Val(); n != 2 {
		t.Fatalf("a queue not split keeps %d enter times for 2 people, want 2", n)
	}
	lcAdmit(t, s, plain, lead(t, s, plain, "a"), 0, 1)
	if n := rdb.HLen(ctx, redisstore.KeysFor(plain).Entered()).Val(); n != 1 {
		t.Fatalf("%d enter times after one of 2 was admitted, want 1", n)
	}
}
