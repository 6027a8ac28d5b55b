package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartRedisClusterNodes starts a private Redis Cluster of n masters (n >= 1)
// and no replicas, and returns the node addresses ("127.0.0.1:port") in slot
// order: node i serves the i-th equal share of the 16384 slots. Unlike
// StartRedisCluster it does not need redis-cli --cluster create, which
// refuses fewer than three masters, so a test can move a slot between
// exactly two nodes. The processes are killed (by PID) when the test ends.
func StartRedisClusterNodes(t testing.TB, n int) []string {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartRedisClusterNodes: %d masters", n)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("this test runs its own Redis Cluster, which needs redis-server: apt-get install -y redis-server (%v)", err)
	}
	dir := t.TempDir()
	addrs := make([]string, n)
	buses := make([]int, n)
	for i := range addrs {
		port, bus := FreePort(t), FreePort(t)
		addrs[i], buses[i] = "127.0.0.1:"+strconv.Itoa(port), bus
		startClusterNode(t, dir, port, bus)
	}
	for _, a := range addrs {
		waitListening(t, dir, a)
		waitClusterNode(t, dir, a, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() })
	}

	// What redis-cli --cluster create does, for any n: distinct config
	// epochs (no collision to resolve), a contiguous slot range per node,
	// then every node meets the first one (the bus port is not port+10000).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, firstPort, _ := strings.Cut(addrs[0], ":")
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		lo, hi := i*16384/n, (i+1)*16384/n-1
		steps := [][]any{
			{"CLUSTER", "SET-CONFIG-EPOCH", i + 1},
			{"CLUSTER", "ADDSLOTSRANGE", lo, hi},
		}
		if i > 0 {
			steps = append(steps, []any{"CLUSTER", "MEET", first, firstPort, buses[0]})
		}
		for _, s := range steps {
			if err := c.Do(ctx, s...).Err(); err != nil {
				_ = c.Close()
				t.Fatalf("redis cluster node %s: %v: %v", a, s, err)
			}
		}
		_ = c.Close()
	}

	for _, a := range addrs {
		waitClusterNode(t, dir, a, func(ctx context.Context, c *redis.Client) error {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(n)} {
				if !strings.Contains(info, want) {
					return fmt.Errorf("cluster info lacks %q:\n%s", want, info)
				}
			}
			return nil
		})
	}
	return addrs
}

// SlotMove moves one slot of a cluster from the master serving it to
// another, step by step, with the commands redis-cli --cluster reshard
// sends, so a test can act while the slot is half moved.
type SlotMove struct {
	t            testing.TB
	Slot         int64
	src, dst     *redis.Client
	srcID, dstID string
	dstHost      string
	dstPort      string
}

// NewSlotMove prepares moving key's slot from its master to another master
// of rdb's cluster. Nothing changes until Begin.
func NewSlotMove(t testing.TB, rdb *redis.ClusterClient, key string) *SlotMove {
	t.Helper()
	ctx := context.Background()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
	}
	owner, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("master of %s: %v", key, err)
	}
	srcAddr, dstAddr := owner.Options().Addr, ""
	var mu sync.Mutex
	err = rdb.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		if a := c.Options().Addr; a != srcAddr {
			dstAddr = a
		}
		return nil
	})
	if err != nil || dstAddr == "" {
		t.Fatalf("no second master to move slot %d to (%v)", slot, err)
	}
	m := &SlotMove{t: t, Slot: slot,
		src: redis.NewClient(&redis.Options{Addr: srcAddr}),
		dst: redis.NewClient(&redis.Options{Addr: dstAddr})}
	t.Cleanup(func() { _ = m.src.Close(); _ = m.dst.Close() })
	m.dstHost, m.dstPort, _ = strings.Cut(dstAddr, ":")
	m.srcID = m.do(m.src, "CLUSTER", "MYID")
	m.dstID = m.do(m.dst, "CLUSTER", "MYID")
	return m
}

func (m *SlotMove) do(c *redis.Client, args ...any) string {
	m.t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		m.t.Fatalf("%s %v: %v", c.Options().Addr, args, err)
	}
	return fmt.Sprint(v)
}

// Begin opens the move: IMPORTING on the target first, then MIGRATING on
// the source, so no redirection points at a node that would refuse it.
func (m *SlotMove) Begin() {
	m.t.Helper()
	m.do(m.dst, "CLUSTER", "SETSLOT", m.Slot, "IMPORTING", m.srcID)
	m.do(m.src, "CLUSTER", "SETSLOT", m.Slot, "MIGRATING", m.dstID)
}

// Keys lists, sorted, the slot's keys still on the source.
func (m *SlotMove) Keys() []string {
	m.t.Helper()
	ks, err := m.src.ClusterGetKeysInSlot(context.Background(), int(m.Slot), 1_000_000).Result()
	if err != nil {
		m.t.Fatalf("CLUSTER GETKEYSINSLOT %d: %v", m.Slot, err)
	}
	sort.Strings(ks)
	return ks
}

// Move migrates keys (of the slot, on the source) to the target in one
// MIGRATE.
func (m *SlotMove) Move(keys ...string) {
	m.t.Helper()
	if len(keys) == 0 {
		m.t.Fatal("SlotMove.Move: no keys")
	}
	args := []any{"MIGRATE", m.dstHost, m.dstPort, "", 0, 10_000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if got := m.do(m.src, args...); got != "OK" {
		m.t.Fatalf("MIGRATE of %d keys: %s", len(keys), got)
	}
}

// MoveAll migrates whatever is left of the slot.
func (m *SlotMove) MoveAll() {
	m.t.Helper()
	for ks := m.Keys(); len(ks) > 0; ks = m.Keys() {
		m.Move(ks...)
	}
}

// End gives the slot to the target, telling the target first. Every key
// must have moved.
func (m *SlotMove) End() {
	m.t.Helper()
	m.do(m.dst, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.dstID)
	m.do(m.src, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.dstID)
}
