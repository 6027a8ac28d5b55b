package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// The key audit runs after the suite (from TestMain) on the Redis database
// the tests share: a code path that leaves a key behind forever shows up
// here even when every test passed. Other packages' tests run at the same
// time on the same database, so a live queue is never a finding; only what
// can never be right is:
//
//   - a key under wr: without an expiry that docs/DESIGN.md's Redis layout
//     does not allow to live forever (every per-user key - token, status,
//     consumed, spent - must expire, as must a used challenge's pow:<id>;
//     so must the dispatcher lock, a PX lease);
//   - an id listed in wr:queues without a wr:{id}:config key.
//
// A finding must still be there at every re-check (after 2 s, then 3 s
// more), so a key caught between two commands of another package's running
// test is not one.

// foreverKeys are the per-queue keys (wr:{q}:<name>) that may have no expiry.
var foreverKeys = []string{"config", "waiting", "seq", "active", "inflight", "dispatch", "outbox", "left", "leftbins", "prequeue", "draw",
	"seen", "away", "skipped", "entered", "traces", "texts", "minutes"}

// keyAuditSettle are the pauses before each re-check of a finding.
var keyAuditSettle = []func(context.Context) error{sleep(2 * time.Second), sleep(3 * time.Second)}

func sleep(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
}

// whyNoExpiryIsWrong says why key must not be without an expiry, or "" if it
// may live forever.
func whyNoExpiryIsWrong(key string) string {
	if key == redisstore.QueuesKey {
		return ""
	}
	q, name, ok := splitQueueKey(key)
	switch {
	case !ok:
		return "not a key of the Redis layout"
	case slices.Contains(foreverKeys, name):
		return ""
	case name == "lock":
		return "the dispatcher lock is a lease (PX)"
	}
	if strings.HasPrefix(name, "pow:") {
		return fmt.Sprintf("used enter challenge of queue %q: every pow:<id> key must expire with its challenge", q)
	}
	for _, per := range []string{"token:", "status:", "consumed:", "spent:"} {
		if strings.HasPrefix(name, per) {
			return fmt.Sprintf("per-user key of queue %q: every %s<user> key must expire", q, per)
		}
	}
	return fmt.Sprintf("queue %q has no key %q in the Redis layout", q, name)
}

// splitQueueKey splits "wr:{q}:name" into q and name.
func splitQueueKey(key string) (q, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, "wr:{")
	if !ok {
		return "", "", false
	}
	q, name, ok = strings.Cut(rest, "}:")
	if !ok || q == "" || name == "" || strings.ContainsAny(q, "{}") {
		return "", "", false
	}
	return q, name, true
}

// keyCounts is what the audit's first look saw.
type keyCounts struct {
	keys, noExpiry, listed, candidates int
}

func (c keyCounts) String() string {
	return fmt.Sprintf("%d keys under wr:, %d of them without expiry, %d ids in %s, %d finding(s) before the re-checks",
		c.keys, c.noExpiry, c.listed, redisstore.QueuesKey, c.candidates)
}

// auditKeys returns one line per finding in the Redis at url (sorted), each
// seen again after every pause of settle, and what the first look saw.
func auditKeys(ctx context.Context, url string, settle []func(context.Context) error) ([]string, keyCounts, error) {
	var first keyCounts
	rdb, err := redisstore.NewClient(url)
	if err != nil {
		return nil, first, err
	}
	defer rdb.Close()

	// look returns the findings now, as line by key (or wr:queues member).
	look := func(counts *keyCounts) (map[string]string, error) {
		found := map[string]string{}
		var keys []string
		iter := rdb.Scan(ctx, 0, "wr:*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		ids, err := rdb.SMembers(ctx, redisstore.QueuesKey).Result()
		if err != nil {
			return nil, fmt.Errorf("smembers %s: %w", redisstore.QueuesKey, err)
		}
		// Pipelines of 500, each well within the client's 1 s read timeout
		// even with other packages' tests loading the shared server.
		ttls := make([]interface{ Val() time.Duration }, len(keys))
		configs := make([]interface{ Val() int64 }, len(ids))
		for from := 0; from < max(len(keys), len(ids)); from += 500 {
			pipe := rdb.Pipeline()
			for i := from; i < min(from+500, len(keys)); i++ {
				ttls[i] = pipe.PTTL(ctx, keys[i])
			}
			for i := from; i < min(from+500, len(ids)); i++ {
				configs[i] = pipe.Exists(ctx, redisstore.KeysFor(ids[i]).Config())
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, fmt.Errorf("pttl/exists: %w", err)
			}
		}
		counts.keys, counts.listed = len(keys), len(ids)
		for i, k := range keys {
			// PTTL -1: no expiry; -2: gone since the scan.
			if ttls[i].Val() != -1 {
				continue
			}
			counts.noExpiry++
			if why := whyNoExpiryIsWrong(k); why != "" {
				found["key "+k] = fmt.Sprintf("%s has no expiry (%s)", k, why)
			}
		}
		for i, id := range ids {
			if configs[i].Val() == 0 {
				found["id "+id] = fmt.Sprintf("%s lists %q, which has no %s", redisstore.QueuesKey, id, redisstore.KeysFor(id).Config())
			}
		}
		counts.candidates = len(found)
		return found, nil
	}

	found, err := look(&first)
	if err != nil {
		return nil, first, err
	}
	for _, pause := range settle {
		if len(found) == 0 {
			break
		}
		if err := pause(ctx); err != nil {
			return nil, first, err
		}
		again, err := look(&keyCounts{})
		if err != nil {
			return nil, first, err
		}
		for k := range found {
			if _, still := again[k]; !still {
				delete(found, k)
			}
		}
	}
	lines := make([]string, 0, len(found))
	for _, l := range found {
		lines = append(lines, l)
	}
	slices.Sort(lines)
	return lines, first, nil
}

// auditSharedRedis audits the database the suite used (testenv.RedisURL)
// and returns what failed, nil when nothing did. It is meant for TestMain,
// after m.Run(); with -v it prints what it looked at.
func auditSharedRedis() error {
	// testenv.RedisURL's choice, without a *testing.T.
	url := testenv.DefaultTestRedisURL
	if u := os.Getenv("REDIS_URL"); u != "" {
		url = u
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lines, seen, err := auditKeys(ctx, url, keyAuditSettle)
	if err != nil {
		return fmt.Errorf("Redis key audit of %s could not run: %w", url, err)
	}
	if testing.Verbose() {
		fmt.Printf("Redis key audit of %s: %s; %d left after the re-checks\n", url, seen, len(lines))
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("Redis key audit of %s: %d key(s) would stay forever (a code path, of this suite or of another package's tests on the same database, leaves them):\n  %s",
		url, len(lines), strings.Join(lines, "\n  "))
}

// TestKeyAuditRules pins which keys may live without an expiry.
func TestKeyAuditRules(t *testing.T) {
	for _, c := range []struct {
		key     string
		forever bool
	}{
		{"wr:queues", true},
		{"wr:{q1}:config", true},
		{"wr:{q1}:waiting", true},
		{"wr:{q1}:seq", true},
		{"wr:{q1}:active", true},
		{"wr:{q1}:inflight", true},
		{"wr:{q1}:dispatch", true},
		{"wr:{q1}:outbox", true},
		{"wr:{q1}:lock", false},
		{"wr:{q1}:token:u1", false},
		{"wr:{q1}:status:u1", false},
		{"wr:{q1}:consumed:u1", false},
		{"wr:{q1}:consumed:", false},
		{"wr:{q1}:spent:u1", false},
		{"wr:{q1}:pow:0123456789abcdef0123456789abcdef", false},
		{"wr:{q1}:configx", false},
		{"wr:{q1}:", false},
		{"wr:{}:config", false},
		{"wr:q1:config", false},
		{"wr:enter:ip:1.2.3.4", false},
		{"wr:{a{b}:config", false},
	} {
		t.Run(c.key, func(t *testing.T) {
			why := whyNoExpiryIsWrong(c.key)
			if (why == "") != c.forever {
				t.Fatalf("whyNoExpiryIsWrong(%q) = %q; want forever=%v", c.key, why, c.forever)
			}
		})
	}
}

// TestKeyAuditFindsLeftovers plants leftovers next to legitimate keys in a
// private redis-server (the shared one is other tests' business) and checks
// the audit reports exactly the leftovers, and drops the findings that are
// mended before its re-check.
func TestKeyAuditFindsLeftovers(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	rdb, err := redisstore.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	live, dead, gone := redisstore.KeysFor("live"), redisstore.KeysFor("dead"), redisstore.KeysFor("gone")
	set := func(key string, ttl time.Duration) {
		if err := rdb.Set(ctx, key, "x", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Legitimate: a live queue's forever keys, per-user keys with expiry,
	// a lock with its lease, and a deleted queue's dispatch hash with 1 h.
	for _, k := range []string{live.Config(), live.Waiting(), live.Seq(), live.Active(), live.Inflight(), live.Dispatch(), live.Outbox()} {
		set(k, 0)
	}
	set(live.Token("u1"), time.Hour)
	set(live.Status("u1"), time.Hour)
	set(live.Consumed("u1"), time.Hour)
	set(live.Lock(), time.Minute)
	set(gone.Dispatch(), time.Hour)
	// Enough keys for the audit to need several pipelines.
	pipe := rdb.Pipeline()
	for i := range 1200 {
		pipe.Set(ctx, live.Status(fmt.Sprintf("many%04d", i)), "x", time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	set("rate:wr:enter:ip:1.2.3.4", 0) // not under wr:
	// Leftovers.
	set(live.Status("u2"), 0)
	set(live.Consumed("u3"), 0)
	set(dead.Lock(), 0)
	set("wr:{dead}:ordering", 0)
	set("wr:stray", 0)
	// Transient: gone before the re-check.
	set(live.Token("u4"), 0)
	if err := rdb.SAdd(ctx, redisstore.QueuesKey, "live", "dead", "late").Err(); err != nil {
		t.Fatal(err)
	}

	// Transient findings, mended between the first look and the re-check:
	// u4's token gets its expiry, "late" its config.
	mend := func(context.Context) error {
		if err := rdb.Expire(ctx, live.Token("u4"), time.Hour).Err(); err != nil {
			return err
		}
		return rdb.Set(ctx, redisstore.KeysFor("late").Config(), "x", 0).Err()
	}
	// Without the re-check the transient ones are findings too.
	lines, seen, err := auditKeys(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// 1219 keys: 7 forever, 1203 per-user with expiry, a lock with its
	// lease, a dispatch hash with expiry, 5 leftovers, u4's token, wr:queues
	// (rate:... is not under wr:); without expiry: 7 forever, 5 leftovers,
	// u4's token, wr:queues.
	if want := (keyCounts{keys: 1219, noExpiry: 14, listed: 3, candidates: 8}); seen != want || len(lines) != want.candidates {
		t.Fatalf("audit without re-check saw %v and found %d, want %v:\n  %s", seen, len(lines), want, strings.Join(lines, "\n  "))
	}
	lines, seen, err = auditKeys(ctx, srv.URL(), []func(context.Context) error{mend})
	if err != nil {
		t.Fatal(err)
	}
	if seen.candidates != 8 {
		t.Fatalf("first look found %d, want 8 (u4's token and \"late\" mended only after it)", seen.candidates)
	}
	want := []string{
		`wr:queues lists "dead", which has no wr:{dead}:config`,
		`wr:stray has no expiry (not a key of the Redis layout)`,
		`wr:{dead}:lock has no expiry (the dispatcher lock is a lease (PX))`,
		`wr:{dead}:ordering has no expiry (queue "dead" has no key "ordering" in the Redis layout)`,
		`wr:{live}:consumed:u3 has no expiry (per-user key of queue "live": every consumed:<user> key must expire)`,
		`wr:{live}:status:u2 has no expiry (per-user key of queue "live": every status:<user> key must expire)`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("audit found %d:\n  %s\nwant %d:\n  %s", len(lines), strings.Join(lines, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}
