package redisstore_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// clusterStore starts a private 3-master Redis Cluster and returns a Store
// built the way the services build it: NewClient on a REDIS_URL seed list.
func clusterStore(t *testing.T) (*redisstore.Store, *redis.ClusterClient) {
	t.Helper()
	url := testenv.StartRedisCluster(t)
	if n := len(strings.Split(url, ",")); n != 3 {
		t.Fatalf("cluster URL %q names %d nodes, want 3", url, n)
	}
	rdb, err := redisstore.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("NewClient(%q) is %T, want *redis.ClusterClient", url, rdb)
	}
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, cc
}

// masterAddrs lists the address of every master the client knows.
func masterAddrs(t *testing.T, cc *redis.ClusterClient) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(context.Background(), func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, c.Options().Addr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	if len(out) != 3 {
		t.Fatalf("masters = %v, want 3", out)
	}
	return out
}

// masterOf is the address of the master serving key, checked against the
// server's own CLUSTER KEYSLOT and CLUSTER SHARDS view.
func masterOf(t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	ctx := context.Background()
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) {
			got := r.Nodes[0].Addr
			if got != m.Options().Addr {
				t.Fatalf("slot %d of %s: CLUSTER SLOTS says %s, client routes to %s", slot, key, got, m.Options().Addr)
			}
			return got
		}
	}
	t.Fatalf("slot %d of %s is served by no master", slot, key)
	return ""
}

// queuesOnEveryMaster picks one queue id per master (by its hash tag) and
// creates each queue through UpdateConfig.
func queuesOnEveryMaster(t *testing.T, s *redisstore.Store, cc *redis.ClusterClient, mut func(*queue.Config)) (ids []string, master map[string]string) {
	t.Helper()
	ctx := context.Background()
	masters := masterAddrs(t, cc)
	master = map[string]string{}
	taken := map[string]bool{}
	for i := 0; len(ids) < len(masters); i++ {
		if i > 1000 {
			t.Fatalf("no queue id found for every master of %v", masters)
		}
		q := fmt.Sprintf("cl%d-%s", i, randHex())
		m := masterOf(t, cc, redisstore.KeysFor(q).Config())
		if taken[m] {
			continue
		}
		taken[m] = true
		ids = append(ids, q)
		master[q] = m
	}
	distinct := map[string]bool{}
	for _, q := range ids {
		distinct[master[q]] = true
		cfg, created, err := s.UpdateConfig(ctx, q, func(c queue.Config, exists bool) (queue.Config, error) {
			if exists {
				return c, errors.New("queue exists before it was created")
			}
			if mut != nil {
				mut(&c)
			}
			return c, nil
		})
		if err != nil || !created {
			t.Fatalf("create %s on %s: created=%v err=%v", q, master[q], created, err)
		}
		if cfg.State != queue.Open {
			t.Fatalf("created %s in state %s, want OPEN", q, cfg.State)
		}
		t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
	}
	if len(distinct) < 2 {
		t.Fatalf("queues %v all on one master", ids)
	}
	return ids, master
}

// keysOf counts q's keys on every master.
func keysOf(t *testing.T, cc *redis.ClusterClient, q string) map[string]int {
	t.Helper()
	var mu sync.Mutex
	out := map[string]int{}
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, redisstore.KeysFor(q).Prefix()+"*").Result()
		mu.Lock()
		defer mu.Unlock()
		if len(keys) > 0 {
			out[c.Options().Addr] = len(keys)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestClusterStoreOperations(t *testing.T) {
	t.Parallel()
	s, cc := clusterStore(t)
	ctx := context.Background()
	ids, master := queuesOnEveryMaster(t, s, cc, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.ActivationSpreadMs, c.TokenTTLSeconds = 1000, 0, 60
	})
	t.Logf("queues: %v", master)

	known, err := s.Queues(ctx)
	if err != nil {
		t.Fatalf("Queues on a cluster: %v", err)
	}
	for _, q := range ids {
		if !slices.Contains(known, q) {
			t.Fatalf("Queues() = %v, lacks %s", known, q)
		}
	}

	for _, q := range ids {
		t.Run(master[q], func(t *testing.T) {
			t.Parallel()
			clusterQueueLifecycle(t, s, cc, q)
		})
	}
}

func clusterQueueLifecycle(t *testing.T, s *redisstore.Store, cc *redis.ClusterClient, q string) {
	ctx := context.Background()
	k := redisstore.KeysFor(q)

	// UpdateConfig again: not created, knobs kept, one changed.
	cfg, created, err := s.UpdateConfig(ctx, q, func(c queue.Config, exists bool) (queue.Config, error) {
		if !exists {
			return c, errors.New("existing queue reported as new")
		}
		c.MaxQueueSize = 50
		return c, nil
	})
	if err != nil || created || cfg.AdmissionRatePerSec != 1000 || cfg.MaxQueueSize != 50 || cfg.TokenTTLSeconds != 60 {
		t.Fatalf("update: %+v created=%v err=%v", cfg, created, err)
	}
	cfg, stats, err := s.Config(ctx, q)
	if err != nil || cfg.MaxQueueSize != 50 || cfg.ActivationSpreadMs != 0 || stats.Waiting != 0 || stats.Active != 0 {
		t.Fatalf("config: %+v %+v %v", cfg, stats, err)
	}

	// Enter x5: positions 1..5; a refresh keeps the place.
	const n = 5
	for i := range n {
		st, err := s.Enter(ctx, q, fmt.Sprintf("u%d", i))
		if err != nil || st.State != queue.Waiting || st.Position != int64(i+1) || st.Total != int64(i+1) {
			t.Fatalf("enter u%d: %+v %v, want position %d", i, st, err, i+1)
		}
	}
	if st, err := s.Enter(ctx, q, "u2"); err != nil || st.Position != 3 || st.Total != 5 {
		t.Fatalf("re-enter u2: %+v %v, want position 3 of 5", st, err)
	}
	if st, err := s.Position(ctx, q, "u3"); err != nil || st.State != queue.Waiting || st.Position != 4 || st.Total != 5 {
		t.Fatalf("position u3: %+v %v, want 4 of 5", st, err)
	}
	if st, err := s.Position(ctx, q, "nobody"); err != nil || st.State != queue.NotInQueue {
		t.Fatalf("position nobody: %+v %v", st, err)
	}

	// Leave: u4 goes, the second leave finds nobody.
	if ok, err := s.Leave(ctx, q, "u4"); err != nil || !ok {
		t.Fatalf("leave u4: %v %v", ok, err)
	}
	if ok, err := s.Leave(ctx, q, "u4"); err != nil || ok {
		t.Fatalf("second leave u4: %v %v", ok, err)
	}
	if st, _ := s.Position(ctx, q, "u3"); st.Position != 4 || st.Total != 4 {
		t.Fatalf("after leave: u3 %+v, want 4 of 4", st)
	}
	if w, err := s.Waiting(ctx, []string{q}); err != nil || w[q] != 4 {
		t.Fatalf("waiting: %v %v", w, err)
	}

	// Lease and issue: u0..u3 admitted in entry order.
	epoch, err := s.AcquireLease(ctx, q, "a", 5*time.Second)
	if err != nil || epoch <= 0 {
		t.Fatalf("acquire: epoch %d err %v, want an epoch", epoch, err)
	}
	if e, err := s.AcquireLease(ctx, q, "b", 5*time.Second); err != nil || e != 0 {
		t.Fatalf("second owner: epoch %d err %v, want 0", e, err)
	}
	tick := 100 * time.Millisecond
	if r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: nil}); err != nil || r.Issued != 0 {
		t.Fatalf("first tick: %+v %v", r, err)
	}
	time.Sleep(30 * time.Millisecond) // 1000/s: credit for 30 admissions
	g := grants(t, 4)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: g})
	if err != nil || r.Issued != 4 || r.Waiting != 0 || r.Expired != 0 {
		t.Fatalf("issue: %+v %v, want 4 issued, 0 waiting", r, err)
	}
	if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch - 1, Tick: tick, Grants: g}); !errors.Is(err, queue.ErrStaleEpoch) {
		t.Fatalf("issue at epoch 0: %v, want ErrStaleEpoch", err)
	}
	msgs := outbox(t, cc, q)
	if len(msgs) != 4 {
		t.Fatalf("outbox has %d events, want 4", len(msgs))
	}
	for i, m := range msgs {
		if m.Values["type"] != "TokenIssued" || m.Values["user"] != fmt.Sprintf("u%d", i) ||
			m.Values["seq"] != fmt.Sprint(i+1) || m.Values["tid"] != g[i].TokenID {
			t.Fatalf("event %d = %v, want TokenIssued u%d seq %d tid %s", i, m.Values, i, i+1, g[i].TokenID)
		}
	}
	if a := cc.ZCard(ctx, k.Active()).Val(); a != 4 {
		t.Fatalf("active = %d, want 4", a)
	}
	if st, err := s.Position(ctx, q, "u0"); err != nil || st.State != queue.Admitted || st.Token == nil || st.Token.Secret != g[0].Secret || st.Token.ID != g[0].TokenID {
		t.Fatalf("position u0 after issue: %+v %v", st, err)
	}

	// Consume: exactly one of 20 concurrent calls.
	order0 := consumeRace(t, s, q, "u0", g[0].Secret, 20)
	if z := cc.ZCard(ctx, k.Inflight()).Val(); z != 1 {
		t.Fatalf("inflight = %d, want 1", z)
	}

	// Settle u0's order: slot freed, ORDERED, only once.
	if ok, err := s.Settle(ctx, q, "u0", g[0].TokenID, order0); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if ok, err := s.Settle(ctx, q, "u0", g[0].TokenID, order0); err != nil || ok {
		t.Fatalf("second settle: %v %v", ok, err)
	}
	if st, _ := s.Position(ctx, q, "u0"); st.State != queue.Ordered {
		t.Fatalf("u0 after settle: %s, want ORDERED", st.State)
	}
	if a, z := cc.ZCard(ctx, k.Active()).Val(), cc.ZCard(ctx, k.Inflight()).Val(); a != 3 || z != 0 {
		t.Fatalf("after settle: active %d inflight %d, want 3 and 0", a, z)
	}

	// Restore u1's failed order three times: restored once.
	c1, err := s.Consume(ctx, q, "u1", g[1].Secret, "order-u1", 30*time.Second, time.Minute)
	if err != nil || c1.TokenID != g[1].TokenID {
		t.Fatalf("consume u1: %+v %v", c1, err)
	}
	outcomes := map[queue.RestoreOutcome]int{}
	for range 3 {
		o, err := s.Restore(ctx, q, "u1", c1.TokenID, "order-u1", true)
		if err != nil {
			t.Fatal(err)
		}
		outcomes[o]++
	}
	if outcomes[queue.Restored] != 1 || outcomes[queue.Duplicate] != 2 {
		t.Fatalf("restore outcomes %v, want 1 RESTORED and 2 DUPLICATE", outcomes)
	}
	if st, err := s.Position(ctx, q, "u1"); err != nil || st.State != queue.Admitted || st.Ordering || st.Token == nil || st.Token.Secret != g[1].Secret {
		t.Fatalf("u1 after restore: %+v %v", st, err)
	}

	// Overdue and HandOff: u2's lease of 1 ms runs out.
	if _, err := s.Consume(ctx, q, "u2", g[2].Secret, "order-u2", time.Millisecond, time.Minute); err != nil {
		t.Fatalf("consume u2: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	over, err := s.Overdue(ctx, q, 10)
	if err != nil || len(over) != 1 || over[0].TokenID != g[2].TokenID || over[0].UserID != "u2" || over[0].OrderID != "order-u2" || over[0].ExpiresAt.IsZero() {
		t.Fatalf("overdue: %+v %v, want u2's token", over, err)
	}
	if err := s.HandOff(ctx, q, "u2", g[2].TokenID); err != nil {
		t.Fatal(err)
	}
	if over, err := s.Overdue(ctx, q, 10); err != nil || len(over) != 0 {
		t.Fatalf("overdue after hand-off: %+v %v", over, err)
	}

	// PositionMany: one pipelined round over the queue's slot.
	many, err := s.PositionMany(ctx, q, []string{"u0", "u1", "u2", "u3", "nobody"})
	if err != nil || len(many) != 5 {
		t.Fatalf("position many: %v %v", many, err)
	}
	if many["u0"].State != queue.Ordered || many["u1"].State != queue.Admitted || many["u1"].Token == nil ||
		many["u2"].State != queue.Admitted || !many["u2"].Ordering || many["u3"].State != queue.Admitted ||
		many["u3"].Token == nil || many["u3"].Token.Secret != g[3].Secret || many["nobody"].State != queue.NotInQueue {
		t.Fatalf("position many: %+v", many)
	}

	// Outbox relay: 4 TokenIssued + 1 TokenRestored, read, acked, gone.
	for range 2 {
		if err := s.EnsureOutboxGroup(ctx, q); err != nil {
			t.Fatalf("ensure outbox group: %v", err)
		}
	}
	if l, err := s.OutboxLen(ctx, q); err != nil || l != 5 {
		t.Fatalf("outbox length %d %v, want 5", l, err)
	}
	evs, err := readOutbox(ctx, s, q, "relay-1", false)
	if err != nil || len(evs) != 5 {
		t.Fatalf("read outbox: %d events %v, want 5", len(evs), err)
	}
	for i, e := range evs {
		want := "TokenIssued"
		if i == 4 {
			want = "TokenRestored"
		}
		if e.Type != want || e.QueueID != q {
			t.Fatalf("event %d: %+v, want %s of %s", i, e, want, q)
		}
	}
	if evs[4].UserID != "u1" || evs[4].TokenID != g[1].TokenID {
		t.Fatalf("restored event %+v, want u1's token", evs[4])
	}
	// Unacknowledged: the same consumer reads them again.
	if again, err := readOutbox(ctx, s, q, "relay-1", true); err != nil || len(again) != 5 {
		t.Fatalf("re-read pending: %d %v, want 5", len(again), err)
	}
	if err := s.AckOutbox(ctx, q, evs); err != nil {
		t.Fatalf("ack outbox: %v", err)
	}
	if l, err := s.OutboxLen(ctx, q); err != nil || l != 0 {
		t.Fatalf("outbox length after ack %d %v, want 0", l, err)
	}
	if rest, err := readOutbox(ctx, s, q, "relay-1", false); err != nil || len(rest) != 0 {
		t.Fatalf("read after ack: %d %v, want 0", len(rest), err)
	}

	// Purge: every key of q gone from every master, and the registration.
	home := masterOf(t, cc, k.Config())
	before := keysOf(t, cc, q)
	if len(before) != 1 || before[home] < 8 {
		t.Fatalf("keys of %s before purge: %v, want them all on %s", q, before, home)
	}
	if err := s.Purge(ctx, q); err != nil {
		t.Fatalf("purge on a cluster: %v", err)
	}
	if after := keysOf(t, cc, q); len(after) != 0 {
		t.Fatalf("keys of %s after purge: %v", q, after)
	}
	if known, err := s.Queues(ctx); err != nil || slices.Contains(known, q) {
		t.Fatalf("queues after purge: %v %v", known, err)
	}
	if _, err := s.Position(ctx, q, "u3"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("position after purge: %v, want ErrNotFound", err)
	}
}

func TestClusterRateLimiter(t *testing.T) {
	t.Parallel()
	s, cc := clusterStore(t)
	ctx := context.Background()
	// 1 per second, burst 1: the second event within a second is refused,
	// however slow the machine runs the test.
	lim, err := redisstore.NewRateLimiter(s.Client(), "cltest:", 1)
	if err != nil {
		t.Fatal(err)
	}
	// One key per master.
	masters := masterAddrs(t, cc)
	byMaster := map[string]string{}
	for i := 0; len(byMaster) < len(masters); i++ {
		if i > 1000 {
			t.Fatal("no rate key found for every master")
		}
		key := fmt.Sprintf("ip-%d", i)
		if m := masterOf(t, cc, "rate:cltest:"+key); byMaster[m] == "" {
			byMaster[m] = key
		}
	}
	var retry time.Duration
	var last string
	for m, key := range byMaster {
		if ok, _, err := lim.Allow(ctx, key); err != nil || !ok {
			t.Fatalf("%s on %s: first event refused (%v), want allowed", key, m, err)
		}
		var ok bool
		ok, retry, err = lim.Allow(ctx, key)
		if err != nil || ok || retry <= 0 || retry > time.Second {
			t.Fatalf("%s on %s: second event allowed=%v retry=%v err=%v, want refused within 1s", key, m, ok, retry, err)
		}
		if n := cc.Exists(ctx, "rate:cltest:"+key).Val(); n != 1 {
			t.Fatalf("rate key of %s on %s: exists=%d, want 1", key, m, n)
		}
		last = key
	}
	// After the announced wait, the last key is allowed again.
	time.Sleep(retry + 20*time.Millisecond)
	if ok, _, err := lim.Allow(ctx, last); err != nil || !ok {
		t.Fatalf("%s after waiting %v: refused (%v), want allowed", last, retry, err)
	}
}

// gatewayScriptHashes recomputes the SHA1 of the gateway's scripts the way
// scripts.go builds them (prelude, newline, body).
func gatewayScriptHashes(t *testing.T) []string {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile("lua/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hash := func(name string) string {
		sum := sha1.Sum([]byte(read("prelude") + "\n" + read(name)))
		return hex.EncodeToString(sum[:])
	}
	// The recomputation matches the exported scripts' hashes.
	if h := hash("settle"); !slices.ContainsFunc(redisstore.DispatcherScripts, func(s *redis.Script) bool { return s.Hash() == h }) {
		t.Fatalf("recomputed settle hash %s is not a dispatcher script's", h)
	}
	var out []string
	for _, n := range []string{"enter", "position", "leave", "stats", "close"} {
		out = append(out, hash(n))
	}
	return out
}

// scriptsOnMasters runs SCRIPT EXISTS on every master.
func scriptsOnMasters(t *testing.T, cc *redis.ClusterClient, hashes []string) map[string][]bool {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]bool{}
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		ex, err := c.ScriptExists(ctx, hashes...).Result()
		mu.Lock()
		defer mu.Unlock()
		out[c.Options().Addr] = ex
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("SCRIPT EXISTS answered by %d masters, want 3", len(out))
	}
	return out
}

func flushScripts(t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		return c.ScriptFlush(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClusterScriptsLoadAndSurviveFlush(t *testing.T) {
	t.Parallel()
	s, cc := clusterStore(t)
	ctx := context.Background()
	ids, master := queuesOnEveryMaster(t, s, cc, nil)

	gateway := gatewayScriptHashes(t)
	var others []string
	for _, sc := range slices.Concat(redisstore.DispatcherScripts, redisstore.OrderScripts) {
		others = append(others, sc.Hash())
	}
	all := slices.Concat(gateway, others)

	flushScripts(t, cc)
	for m, ex := range scriptsOnMasters(t, cc, all) {
		if slices.Contains(ex, true) {
			t.Fatalf("%s: scripts present after SCRIPT FLUSH: %v", m, ex)
		}
	}
	// LoadScripts reaches every master, not only the seed.
	if err := s.LoadScripts(ctx); err != nil {
		t.Fatalf("LoadScripts on a cluster: %v", err)
	}
	for m, ex := range scriptsOnMasters(t, cc, gateway) {
		if !slices.Equal(ex, []bool{true, true, true, true, true}) {
			t.Fatalf("%s: gateway scripts loaded %v, want all 5", m, ex)
		}
	}
	if err := redisstore.LoadScripts(ctx, cc, slices.Concat(redisstore.DispatcherScripts, redisstore.OrderScripts)...); err != nil {
		t.Fatalf("LoadScripts(dispatcher, order) on a cluster: %v", err)
	}
	for m, ex := range scriptsOnMasters(t, cc, all) {
		if slices.Contains(ex, false) {
			t.Fatalf("%s: scripts loaded %v, want all %d", m, ex, len(all))
		}
	}

	// Every master forgets its scripts, as after a restart or failover:
	// Enter falls back to EVAL, PositionMany reloads and pipelines again.
	for _, q := range ids {
		flushScripts(t, cc)
		for i := range 3 {
			st, err := s.Enter(ctx, q, fmt.Sprintf("u%d", i))
			if err != nil || st.Position != int64(i+1) {
				t.Fatalf("enter %s on %s after SCRIPT FLUSH: position %d err %v", q, master[q], st.Position, err)
			}
		}
	}
	for _, q := range ids {
		flushScripts(t, cc)
		many, err := s.PositionMany(ctx, q, []string{"u0", "u1", "u2", "nobody"})
		if err != nil || len(many) != 4 {
			t.Fatalf("position many %s on %s after SCRIPT FLUSH: %v %v", q, master[q], many, err)
		}
		for i := range 3 {
			if st := many[fmt.Sprintf("u%d", i)]; st.State != queue.Waiting || st.Position != int64(i+1) || st.Total != 3 {
				t.Fatalf("%s u%d: %+v, want %d of 3", q, i, st, i+1)
			}
		}
		if many["nobody"].State != queue.NotInQueue {
			t.Fatalf("%s nobody: %+v", q, many["nobody"])
		}
	}
}

// readOutbox reads one queue's outbox through ReadOutboxes.
func readOutbox(ctx context.Context, s *redisstore.Store, q, consumer string, pending bool) ([]queue.Event, error) {
	b, err := s.ReadOutboxes(ctx, consumer, 100, []queue.OutboxRead{{QueueID: q, Pending: pending}})
	if err != nil {
		return nil, err
	}
	if len(b) != 1 {
		return nil, fmt.Errorf("%d batches for one read", len(b))
	}
	return b[0].Events, b[0].Err
}
