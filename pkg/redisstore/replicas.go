package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// replication is what an acknowledged change needs: replicas Redis
// replicas holding it within timeout (see RequireReplicas); AllReplicas
// for every replica its primary has streaming, read from the primary
// (online).
type replication struct {
	replicas int
	timeout  time.Duration
	online   onlineReplicas
}

// AllReplicas, given to RequireReplicas, waits for every replica the
// primary has streaming at the time (at least one): whichever is promoted
// holds every acknowledged change. A replica that dropped is not waited
// for, so changes go on while one is down; a failover promotes the one
// furthest ahead, never one that dropped.
const AllReplicas = -1

// RequireReplicas makes the Store acknowledge a change only once n
// replicas hold it (AllReplicas: every replica streaming): a WAIT follows
// the change on the connection that made it, in the same round trip. It
// covers what a failover must not undo once someone was told: a place
// (Enter), a consumed token (Consume), a restored one (Restore), a lease
// grant and a line's epoch (the lease script's acquire and follow), and
// the outbox events the relay publishes (OutboxReplicated). A change fewer
// replicas confirm in time fails with queue.ErrNotReplicated; it was made
// on the primary, and calling again is safe (the scripts answer a repeat
// with the first call's result and write a no-op the replicas must confirm
// again, see "acked" in lua/prelude.lua). n = 0, the default, waits for
// nothing. Call it before the Store is used.
func (s *Store) RequireReplicas(n int, timeout time.Duration) {
	s.repl.replicas, s.repl.timeout = max(n, AllReplicas), timeout
}

// acking reports whether changes wait for replicas.
func (s *Store) acking() bool { return s.repl.replicas != 0 }

// waitFor is how many replicas a round on c must wait for.
func (s *Store) waitFor(ctx context.Context, c pipeliner) int {
	if s.repl.replicas != AllReplicas {
		return s.repl.replicas
	}
	return max(1, s.repl.online.of(ctx, c))
}

// onlineReplicas remembers, per primary, how many replicas it has
// streaming (INFO replication: state=online), read at most every
// onlineMaxAge, in the background once a first reading exists.
type onlineReplicas struct {
	bg    *background // the Store's, which waits for a background reading
	mu    sync.Mutex
	by    map[pipeliner]onlineReading
	fresh sync.Map // pipeliner -> *sync.Mutex, one reading at a time
}

type onlineReading struct {
	n  int
	at time.Time
}

const onlineMaxAge = 500 * time.Millisecond

func (o *onlineReplicas) of(ctx context.Context, c pipeliner) int {
	o.mu.Lock()
	r, ok := o.by[c]
	o.mu.Unlock()
	if !ok {
		return o.read(ctx, c)
	}
	if time.Since(r.at) > onlineMaxAge {
		o.bg.Go(func() { o.read(context.WithoutCancel(ctx), c) })
	}
	return r.n
}

// read asks c's primary; a failed reading keeps the last one.
func (o *onlineReplicas) read(ctx context.Context, c pipeliner) int {
	m, _ := o.fresh.LoadOrStore(c, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.by[c].n
	}
	defer mu.Unlock()
	var info *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "replication")
		return nil
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by == nil {
		o.by = map[pipeliner]onlineReading{}
	}
	if err != nil {
		return o.by[c].n
	}
	n := 0
	for _, l := range strings.Split(info.Val(), "\n") {
		if strings.HasPrefix(l, "slave") && strings.Contains(l, "state=online") {
			n++
		}
	}
	o.by[c] = onlineReading{n: n, at: time.Now()}
	return n
}

// ackFlag is the scripts' ARGV that asks a repeat answer to write its
// no-op for the replicas: "1" while replicas are required.
func (s *Store) ackFlag() string {
	if s.acking() {
		return "1"
	}
	return ""
}

type pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// round is one pipelined round trip on one connection, carrying calls idx.
type round struct {
	c   pipeliner
	idx []int
}

// rounds groups calls 0..n-1 into round trips. Without replicas to wait
// for, one round on the Store's client (a Cluster client splits it per
// node itself). With them the WAIT must follow the changes on the very
// connection that made them: a Cluster's calls are grouped by the master of
// their key's slot, each group sent on that master's own client. A slot
// that moved in between fails its call with MOVED, a transient error
// retried like any other.
func (s *Store) rounds(ctx context.Context, n int, key func(i int) string) ([]round, error) {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok || !s.acking() {
		return []round{{c: s.rdb, idx: all}}, nil
	}
	var out []round
	at := map[*redis.Client]int{}
	for _, i := range all {
		m, err := cc.MasterForKey(ctx, key(i))
		if err != nil {
			return nil, err
		}
		j, seen := at[m]
		if !seen {
			j = len(out)
			at[m] = j
			out = append(out, round{c: m})
		}
		out[j].idx = append(out[j].idx, i)
	}
	return out, nil
}

// pipelineAcked sends calls idx (build queues call i's commands) in as few
// round trips as rounds allows, each ended by a WAIT when replicas are
// required. It reports per call whether the replicas confirmed it (every
// call, when none are required) and the first round's error.
func (s *Store) pipelineAcked(ctx context.Context, idx []int, key func(i int) string, build func(p redis.Pipeliner, i int)) ([]bool, error) {
	n := 0
	for _, i := range idx {
		n = max(n, i+1)
	}
	confirmed := make([]bool, n)
	rs, err := s.rounds(ctx, len(idx), func(j int) string { return key(idx[j]) })
	if err != nil {
		return confirmed, err
	}
	var first error
	for _, r := range rs {
		var wait *redis.Cmd
		need := 0
		if s.acking() {
			need = s.waitFor(ctx, r.c)
		}
		_, rerr := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, j := range r.idx {
				build(p, idx[j])
			}
			if s.acking() {
				// Pipeliner has no Wait; the round's read deadline is the
				// client's ReadTimeout, which Config keeps above the wait.
				wait = p.Do(ctx, "wait", need, s.repl.timeout.Milliseconds())
			}
			return nil
		})
		if rerr != nil && first == nil {
			first = rerr
		}
		if rerr != nil {
			// Sent on a master's own client, the round bypassed the Cluster
			// client, which learns of a failover or a moved slot from its
			// own errors only: have it read the slots again, or the next
			// rounds would go to the dead master until something else did.
			if cc, ok := s.rdb.(*redis.ClusterClient); ok && r.c != pipeliner(s.rdb) {
				cc.ReloadState(context.WithoutCancel(ctx))
			}
		}
		ok := wait == nil
		if wait != nil {
			got, werr := wait.Int64()
			ok = werr == nil && got >= int64(need)
		}
		for _, j := range r.idx {
			confirmed[idx[j]] = ok
		}
	}
	return confirmed, first
}

// evalRounds runs script once per call in pipelined rounds (see
// pipelineAcked, with WAITs only when ack is set) and returns each call's
// command, whether the replicas confirmed it, and the rounds' error.
func (s *Store) evalRounds(ctx context.Context, script *redis.Script, n int, keys func(i int) []string, args func(i int) []any, ack bool) ([]*redis.Cmd, []bool, error) {
	return s.evalMixed(ctx, func(int) *redis.Script { return script }, n, keys, args, ack)
}

// evalMixed is evalRounds with a script per call. A pipeline cannot fall
// back from EVALSHA to EVAL per command, so when a server lost its script
// cache (a restart, a failover to a replica that never saw the script) the
// calls that got NOSCRIPT, which did not run, are sent again as EVAL: the
// script's text, which also caches it on whichever node runs it. (Loading
// the scripts and sending EVALSHA again is not enough on a Cluster just
// failed over: the load goes to the masters the client knew, which may not
// yet include the promoted one.)
func (s *Store) evalMixed(ctx context.Context, script func(i int) *redis.Script, n int, keys func(i int) []string, args func(i int) []any, ack bool) ([]*redis.Cmd, []bool, error) {
	cmds := make([]*redis.Cmd, n)
	confirmed := make([]bool, n)
	send := func(idx []int, text bool) error {
		build := func(p redis.Pipeliner, i int) { cmds[i] = script(i).EvalSha(ctx, p, keys(i), args(i)...) }
		if text {
			build = func(p redis.Pipeliner, i int) { cmds[i] = script(i).Eval(ctx, p, keys(i), args(i)...) }
		}
		if !ack || !s.acking() {
			_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, i := range idx {
					build(p, i)
				}
				return nil
			})
			for _, i := range idx {
				confirmed[i] = true
			}
			return err
		}
		ok, err := s.pipelineAcked(ctx, idx, func(i int) string { return keys(i)[0] }, build)
		for _, i := range idx {
			confirmed[i] = i < len(ok) && ok[i]
		}
		return err
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	err := send(all, false)
	var again []int
	for i, c := range cmds {
		if c == nil {
			continue // its round could not be made (no slot map): err says why
		}
		if cerr := c.Err(); cerr != nil && strings.HasPrefix(cerr.Error(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		err = send(again, true)
	}
	return filled(cmds, err), confirmed, err
}

// filled gives every call that was never queued (its round could not be
// made) a command holding err, so callers read each call's outcome alike.
func filled(cmds []*redis.Cmd, err error) []*redis.Cmd {
	for i, c := range cmds {
		if c == nil {
			c = redis.NewCmd(context.Background())
			if err == nil {
				err = fmt.Errorf("redisstore: call not sent")
			}
			c.SetErr(err)
			cmds[i] = c
		}
	}
	return cmds
}

// evalAcked runs script once and acknowledges it (see RequireReplicas;
// callers run the script themselves while no replica is required, so that
// its span names them):
// its reply, or queue.ErrNotReplicated when it ran but the replicas did not
// confirm it in time. While replicas are required, concurrent calls are
// sent together (group commit, ackBatch): one pipelined round and one WAIT
// for all the calls that came while the previous round was out, so the
// wait for the replica costs a round trip per batch, not per call.
func (s *Store) evalAcked(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &ackCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	b := &s.acks
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := b.flushers < ackFlushers
	if lead {
		b.flushers++
	}
	b.mu.Unlock()
	if lead {
		s.flushAcked(c)
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		// The call may still run with its batch: as with any call whose
		// answer was not awaited, its repeat is safe.
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// ackFlushers bounds the rounds in flight at once (each holds one
// connection); ackBatchMax bounds one round's calls.
const (
	ackFlushers = 4
	ackBatchMax = 128
)

// ackBatch is the Store's group commit of acknowledged calls.
type ackBatch struct {
	mu       sync.Mutex
	pending  []*ackCall
	flushers int
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ackCall is one acknowledged script call waiting for its round.
type ackCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

// flushAcked sends the pending calls in rounds until none is left; the
// caller that found fewer than ackFlushers rounds going runs it, with own
// its call. Once own is answered, a caller hands what is still pending to
// a goroutine of its own and returns: under a steady stream of calls the
// pending list may never empty, and the caller's request must not wait on
// others' rounds.
func (s *Store) flushAcked(own *ackCall) {
	b := &s.acks
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		if own != nil && isDone(own.done) {
			b.mu.Unlock()
			// Another flusher takes this one's place; after Wait, this
			// goroutine does, its own call being done.
			if !s.bg.Go(func() { s.flushAcked(nil) }) {
				s.flushAcked(nil)
			}
			return
		}
		n := min(len(b.pending), ackBatchMax)
		batch := make([]*ackCall, n)
		copy(batch, b.pending)
		b.pending = b.pending[n:]
		b.mu.Unlock()

		// The round outlives any one caller's context (another's call is
		// in it); it keeps the first call's values, its trace among them.
		ctx := context.WithoutCancel(batch[0].ctx)
		cmds, confirmed, _ := s.evalMixed(ctx, func(i int) *redis.Script { return batch[i].script }, n,
			func(i int) []string { return batch[i].keys }, func(i int) []any { return batch[i].args }, true)
		for i, c := range batch {
			if cmds[i].Err() == nil && !confirmed[i] {
				cmds[i].SetErr(notReplicated{})
			}
			c.cmd = cmds[i]
			close(c.done)
		}
	}
}

// notReplicated is the command error of a change the replicas did not
// confirm; classify turns it into queue.ErrNotReplicated.
type notReplicated struct{}

func (notReplicated) Error() string { return "redisstore: not confirmed by the replicas in time" }

func (notReplicated) Unwrap() error { return queue.ErrNotReplicated }

// OutboxReplicated confirms that the replicas hold the events of batches
// before the relay publishes them: a TokenIssued published for a tick a
// failover then undid would admit its person twice (the new primary admits
// them again). For each queue it checks that the primary it asks holds the
// events read (entry and event ids: the client may have moved to a new
// primary since the read) and writes a no-op after them (lua/touch.lua:
// the queue's epoch rewritten with itself), then waits (WAIT) on the same
// connection: one round for all the queues (one per master on a Cluster).
// It returns nil at once when no replicas are required, and
// queue.ErrNotReplicated when they did not confirm in time or an event is
// not on the primary (the relay reads again; what a failover lost is never
// published).
func (s *Store) OutboxReplicated(ctx context.Context, batches []queue.OutboxBatch) error {
	if !s.acking() {
		return nil
	}
	var with []queue.OutboxBatch
	for _, b := range batches {
		if len(b.Events) > 0 {
			with = append(with, b)
		}
	}
	if len(with) == 0 {
		return nil
	}
	keys, err := s.keysOfAll(ctx, len(with), func(i int) string { return with[i].QueueID })
	if err != nil {
		return fmt.Errorf("outbox replicated %w", err)
	}
	cmds, confirmed, err := s.evalRounds(ctx, touchScript, len(with),
		func(i int) []string { return []string{keys[i].Dispatch(), keys[i].Outbox()} },
		func(i int) []any {
			// A batch is one XREADGROUP's reply: in entry id order.
			last := with[i].Events[len(with[i].Events)-1]
			return []any{last.StreamID, last.ID}
		}, true)
	if err != nil {
		return classifyf("outbox replicated", err)
	}
	for i, c := range cmds {
		switch n, _ := c.Int64(); {
		case n == -1:
			return fmt.Errorf("outbox %s: events read are not on the primary (a failover since the read): %w", with[i].QueueID, queue.ErrNotReplicated)
		case n != 1 || !confirmed[i]:
			return fmt.Errorf("outbox %s: %w", with[i].QueueID, queue.ErrNotReplicated)
		}
	}
	return nil
}
