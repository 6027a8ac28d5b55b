package redisstore_test

// A reply that arrives after the client's read timeout: Redis has applied the
// script, go-redis gives up on the connection and sends the same command
// again on another. These tests make that happen with testenv.Proxy and check
// that the second execution changes nothing and answers as the first did.
//
// This is an external test package although it needs the scripts' hashes:
// testenv imports redisstore, so an internal test importing testenv would be
// an import cycle. The hashes are recomputed from the Lua files instead and
// checked against the exported script lists.

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const (
	// heldRounds is how many held replies each test goes through.
	heldRounds = 20
	// heldFor is past the client's 1 s read timeout, so every held reply
	// is given up on and the command sent again.
	heldFor = 1500 * time.Millisecond
	// heldAtLeast: a held call cannot come back before the client's 1 s
	// read timeout, so one that took that long and did not fail was
	// answered by its retry (a little under 1 s for the timer's slack).
	heldAtLeast = 950 * time.Millisecond
)

// scriptHash is the SHA1 go-redis sends with EVALSHA for lua/<name>.lua,
// recomputed as scripts.go builds the script (prelude, newline, body) and
// checked against the scripts the services load.
func scriptHash(t *testing.T, name string) string {
	t.Helper()
	read := func(n string) string {
		b, err := os.ReadFile("lua/" + n + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sum := sha1.Sum([]byte(read("prelude") + "\n" + read(name)))
	h := hex.EncodeToString(sum[:])
	loaded := slices.Concat(redisstore.DispatcherScripts, redisstore.OrderScripts)
	if !slices.ContainsFunc(loaded, func(s *redis.Script) bool { return s.Hash() == h }) {
		t.Fatalf("recomputed hash %s of %s is not a loaded script's", h, name)
	}
	return h
}

// requestWith matches a command whose bytes contain every part (a script
// hash, a key, an argument).
func requestWith(parts ...string) func([]byte) bool {
	return func(req []byte) bool {
		for _, p := range parts {
			if !bytes.Contains(req, []byte(p)) {
				return false
			}
		}
		return true
	}
}

// respBulk is how an argument appears in a RESP request.
func respBulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// proxiedStore is a Store whose client (redisstore.NewClient: 1 s read
// timeout, one retry) reaches the test Redis through a proxy, same database.
func proxiedStore(t *testing.T) (*testenv.Proxy, *redisstore.Store) {
	t.Helper()
	s, p := testenv.ProxiedStore(t)
	rdb := s.Client()
	// The premise of every case: a reply held 1.5 s is given up on and the
	// command is sent once more.
	if o := rdb.(*redis.Client).Options(); o.ReadTimeout != time.Second || o.MaxRetries != 1 {
		t.Fatalf("client read timeout %v, retries %d; want 1s and 1", o.ReadTimeout, o.MaxRetries)
	}
	// EVALSHA from the first call on: the matchers look for the hash.
	if err := s.LoadScripts(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p, s
}

// withHeldReply runs call with the next matching reply held, and checks
// that exactly one reply was held (the fault happened) and that the call
// took at least the read timeout (its answer came from the retry).
func withHeldReply(t *testing.T, p *testenv.Proxy, match func([]byte) bool, call func() error) {
	t.Helper()
	before := p.Held()
	p.HoldNextReply(match, heldFor)
	start := time.Now()
	err := call()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("call with its reply held: %v (after %v)", err, took)
	}
	if n := p.Held() - before; n != 1 {
		t.Fatalf("%d replies held, want 1: the command did not go out as matched", n)
	}
	if took < heldAtLeast {
		t.Fatalf("call took %v with its reply held %v: not answered by a retry", took, heldFor)
	}
}

// admitAll fills q with users and issues each a token through s, waiting
// for credit at 1,000/s; it returns each user's token hash.
func admitAll(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, q string, users []string) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	for _, u := range users {
		if _, err := s.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
	}
	epoch := lead(t, s, q, "test")
	k := redisstore.KeysFor(q)
	testenv.WaitFor(t, 10*time.Second, "every user admitted", func() bool {
		if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: grants(t, len(users))}); err != nil {
			t.Fatal(err)
		}
		return rdb.ZCard(ctx, k.Waiting()).Val() == 0
	})
	out := map[string]map[string]string{}
	for _, u := range users {
		h := tokenFields(t, rdb, q, u)
		if h[redisstore.TokenFieldID] == "" {
			t.Fatalf("%s has no token after admission", u)
		}
		out[u] = h
	}
	return out
}

// tokenFields is the token the user's marker holds, by the fields an
// earlier version's token hash had (times in ms); empty for none.
func tokenFields(t *testing.T, rdb redis.UniversalClient, q, user string) map[string]string {
	t.Helper()
	tok, held, _ := heldToken(t, rdb, q, user)
	if !held {
		return map[string]string{}
	}
	return map[string]string{
		redisstore.TokenFieldID:         tok.ID,
		redisstore.TokenFieldSecret:     tok.Secret,
		redisstore.TokenFieldActivateAt: fmt.Sprint(tok.ActivateAt.UnixMilli()),
		redisstore.TokenFieldExpiresAt:  fmt.Sprint(tok.ExpiresAt.UnixMilli()),
	}
}

func userIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u%04d", i)
	}
	return out
}

// retryQueue is a queue that admits 1,000/s, tokens active at once and
// valid ten minutes.
func retryQueue(t *testing.T, s *redisstore.Store) string {
	return newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.ActivationSpreadMs, c.TokenTTLSeconds = 1000, 0, 600
	})
}

// A tick whose reply is held is answered, on retry, with the reply the
// applied tick recorded: the retry admits nobody else and reuses no grant.
// Checked after every round over everything issued so far.
func TestHeldIssueReplyRetriedAppliesOneTick(t *testing.T) {
	t.Parallel()
	// Issue is one queue's tick; IssueAll is the dispatcher's round over
	// every queue it leads, one pipeline (go-redis resends the pipeline).
	for _, tc := range []struct {
		name  string
		issue func(ctx context.Context, s *redisstore.Store, q string, r queue.IssueRequest) (queue.IssueResult, error)
	}{
		{"Issue", func(ctx context.Context, s *redisstore.Store, q string, r queue.IssueRequest) (queue.IssueResult, error) {
			return s.Issue(ctx, q, r)
		}},
		{"IssueAll", func(ctx context.Context, s *redisstore.Store, q string, r queue.IssueRequest) (queue.IssueResult, error) {
			rs := s.IssueAll(ctx, []queue.IssueCall{{QueueID: q, IssueRequest: r}})
			return rs[0].IssueResult, rs[0].Err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			heldIssueRounds(t, tc.issue)
		})
	}
}

func heldIssueRounds(t *testing.T, issue func(ctx context.Context, s *redisstore.Store, q string, r queue.IssueRequest) (queue.IssueResult, error)) {
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	const entered, perTick = 600, 25 // 20 rounds take at most 500
	fill(t, s, q, entered)
	epoch := lead(t, s, q, "leader")
	// The first tick only starts the clock; the pause lets credit accrue
	// so that the first held tick admits someone too.
	if r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond}); err != nil || r.Issued != 0 {
		t.Fatalf("first tick: %+v %v", r, err)
	}
	time.Sleep(30 * time.Millisecond)

	match := requestWith(scriptHash(t, "issue"), k.Dispatch())
	total := 0
	for round := range heldRounds {
		gs := grants(t, perTick)
		var r queue.IssueResult
		withHeldReply(t, p, match, func() (err error) {
			r, err = issue(ctx, ps, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: gs})
			return err
		})
		// The tick's events: the outbox is never drained here, so they are
		// the TokenIssued entries past the ones of earlier rounds.
		var issued []redis.XMessage
		for _, m := range outbox(t, rdb, q) {
			if m.Values["type"] == queue.EventTokenIssued {
				issued = append(issued, m)
			}
		}
		tick := issued[min(total, len(issued)):]
		if r.Issued < 1 || r.Issued != len(tick) {
			t.Fatalf("round %d: the retried tick answered issued=%d, the outbox has %d TokenIssued of it", round, r.Issued, len(tick))
		}
		// One tick applied: one Redis time, the first grants in order, to
		// the head of the line.
		for i, m := range tick {
			if m.Values["at"] != tick[0].Values["at"] || m.Values["tid"] != gs[i].TokenID || m.Values["user"] != fmt.Sprintf("u%04d", total+i) {
				t.Fatalf("round %d event %d = %v; want tid %s for u%04d at %v", round, i, m.Values, gs[i].TokenID, total+i, tick[0].Values["at"])
			}
		}
		total += r.Issued
		checkIssuedOnce(t, rdb, q, total, entered)
		if r.Waiting != int64(entered-total) {
			t.Fatalf("round %d: reply says %d waiting, want %d", round, r.Waiting, entered-total)
		}
	}
	t.Logf("%d held ticks issued %d tokens, each once (%d held replies)", heldRounds, total, p.Held())
}

// checkIssuedOnce: every token that exists is one the counters know of, no
// token id or secret is held by two users, and nobody is both waiting and
// admitted.
func checkIssuedOnce(t *testing.T, rdb redis.UniversalClient, q string, total, entered int) {
	t.Helper()
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	var keys []string
	iter := rdb.Scan(ctx, 0, k.Status("*"), 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	markers := make([]*redis.StringCmd, len(keys))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			markers[i] = p.Get(ctx, key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids, secrets := map[string]string{}, map[string]string{}
	held := 0
	for i, key := range keys {
		tok, _, ok := redisstore.ParseTokenMarker(markers[i].Val())
		if !ok {
			t.Fatalf("%s: %q, want a token marker", key, markers[i].Val())
		}
		held++
		user := strings.TrimPrefix(key, k.Status(""))
		if other, dup := ids[tok.ID]; dup {
			t.Fatalf("token id %s held by %s and %s", tok.ID, other, user)
		}
		if other, dup := secrets[tok.Secret]; dup {
			t.Fatalf("a secret held by %s and %s", other, user)
		}
		ids[tok.ID], secrets[tok.Secret] = user, user
	}
	d := rdb.HGetAll(ctx, k.Dispatch()).Val()
	waiting := rdb.ZCard(ctx, k.Waiting()).Val()
	active := rdb.ZCard(ctx, k.Active()).Val()
	if held != total || d[redisstore.DispatchFieldIssuedTotal] != fmt.Sprint(total) || active != int64(total) || waiting+int64(total) != int64(entered) {
		t.Fatalf("%d tokens, issuedTotal %s, %d slots, %d waiting; want %d, %d, %d and %d waiting of %d entered",
			held, d[redisstore.DispatchFieldIssuedTotal], active, waiting, total, total, total, entered-total, entered)
	}
}

// The retry of a consume that took the token answers OK with the token, not
// "invalid token" to the buyer who just used it.
func TestHeldConsumeReplyRetriedAnswersOK(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	us := userIDs(heldRounds)
	tokens := admitAll(t, s, rdb, q, us)
	hash := scriptHash(t, "consume")
	for round, u := range us {
		tok := tokens[u]
		tid, oid := tok[redisstore.TokenFieldID], fmt.Sprintf("order-%02d", round)
		var c queue.Consumed
		withHeldReply(t, p, requestWith(hash, k.Status(u)), func() (err error) {
			c, err = ps.Consume(ctx, q, u, tok[redisstore.TokenFieldSecret], oid, 30*time.Second, 5*time.Second)
			return err
		})
		if c.TokenID != tid || fmt.Sprint(c.ExpiresAt.UnixMilli()) != tok[redisstore.TokenFieldExpiresAt] {
			t.Fatalf("round %d: consumed %+v, want token %s expiring at %s", round, c, tid, tok[redisstore.TokenFieldExpiresAt])
		}
		inflight := rdb.ZRange(ctx, k.Inflight(), 0, -1).Val()
		mine := 0
		for _, m := range inflight {
			if strings.HasPrefix(m, tid+":") {
				mine++
			}
		}
		if mine != 1 || len(inflight) != round+1 {
			t.Fatalf("round %d: %d in-flight entries of %s, %d in all; want 1 and %d", round, mine, tid, len(inflight), round+1)
		}
		if m := rdb.Get(ctx, k.Status(u)).Val(); m != redisstore.StatusOrdering+":"+tid+":"+oid {
			t.Fatalf("round %d: marker %q, want ORDERING:%s:%s", round, m, tid, oid)
		}
		if _, held, _ := heldToken(t, rdb, q, u); held {
			t.Fatalf("round %d: the token is still there after it was consumed", round)
		}
	}
	t.Logf("%d held consumes each answered OK once (%d held replies)", heldRounds, p.Held())
}

// The retry of a restore that put the token back writes no second
// TokenRestored and leaves the token as the first execution put it.
func TestHeldRestoreReplyRetriedRestoresOnce(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	us := userIDs(heldRounds)
	tokens := admitAll(t, s, rdb, q, us)
	for i, u := range us {
		if _, err := s.Consume(ctx, q, u, tokens[u][redisstore.TokenFieldSecret], fmt.Sprintf("order-%02d", i), 30*time.Second, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	hash := scriptHash(t, "restore")
	outcomes := map[queue.RestoreOutcome]int{}
	for round, u := range us {
		tok := tokens[u]
		tid, oid := tok[redisstore.TokenFieldID], fmt.Sprintf("order-%02d", round)
		var out queue.RestoreOutcome
		withHeldReply(t, p, requestWith(hash, k.Consumed(u)), func() (err error) {
			out, err = ps.Restore(ctx, q, u, tid, oid, true)
			return err
		})
		// The first execution restored; the retry finds the token back and
		// answers DUPLICATE. Either answer is right for the caller, who
		// only acknowledges the OrderFailed.
		if out != queue.Restored && out != queue.Duplicate {
			t.Fatalf("round %d: restore answered %s, want RESTORED or DUPLICATE", round, out)
		}
		outcomes[out]++
		restored := 0
		for _, m := range outbox(t, rdb, q) {
			if m.Values["type"] == queue.EventTokenRestored {
				restored++
				if m.Values["tid"] == tid && (m.Values["oid"] != oid || m.Values["exp"] != tok[redisstore.TokenFieldExpiresAt]) {
					t.Fatalf("round %d: TokenRestored %v, want order %s expiry %s", round, m.Values, oid, tok[redisstore.TokenFieldExpiresAt])
				}
			}
		}
		if restored != round+1 {
			t.Fatalf("round %d: %d TokenRestored in the outbox, want %d (one per restore)", round, restored, round+1)
		}
		back := tokenFields(t, rdb, q, u)
		for _, f := range []string{redisstore.TokenFieldID, redisstore.TokenFieldSecret, redisstore.TokenFieldActivateAt, redisstore.TokenFieldExpiresAt} {
			if back[f] != tok[f] {
				t.Fatalf("round %d: restored token %s = %q, want %q as issued", round, f, back[f], tok[f])
			}
		}
		// The marker holds the token again, and lives two minutes past its
		// original expiry.
		if at := rdb.PExpireTime(ctx, k.Status(u)).Val(); fmt.Sprint(at.Milliseconds()-120000) != tok[redisstore.TokenFieldExpiresAt] {
			t.Fatalf("round %d: restored marker expires at %d, want its token's original %s + 2 min", round, at.Milliseconds(), tok[redisstore.TokenFieldExpiresAt])
		}
		if n := rdb.ZCard(ctx, k.Inflight()).Val(); n != int64(heldRounds-round-1) {
			t.Fatalf("round %d: %d in flight, want %d", round, n, heldRounds-round-1)
		}
	}
	t.Logf("%d held restores: outcomes %v, one TokenRestored each (%d held replies)", heldRounds, outcomes, p.Held())
}

// The retry of the acquire that took the lease answers its epoch, not 0
// ("someone else holds it", which would leave the queue without a leader
// until the lease ran out).
func TestHeldAcquireReplyRetriedAnswersTheEpoch(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	hash := scriptHash(t, "lease")
	var last int64
	for round := range heldRounds {
		owner := fmt.Sprintf("owner-%02d", round)
		var epoch int64
		withHeldReply(t, p, requestWith(hash, k.Lock(), respBulk("acquire"), respBulk(owner)), func() (err error) {
			epoch, err = ps.AcquireLease(ctx, q, owner, 10*time.Second)
			return err
		})
		// One acquisition per round: the epoch went up, and the one
		// answered is the one recorded (a second application would have
		// recorded a higher one).
		if epoch <= last {
			t.Fatalf("round %d: acquire answered epoch %d, want above %d", round, epoch, last)
		}
		if rec, _ := rdb.HGet(ctx, k.Dispatch(), "epoch").Int64(); rec != epoch {
			t.Fatalf("round %d: acquire answered epoch %d, %d recorded", round, epoch, rec)
		}
		if v := rdb.Get(ctx, k.Lock()).Val(); v != fmt.Sprintf("%s:%d", owner, epoch) {
			t.Fatalf("round %d: lock %q, want %s:%d", round, v, owner, epoch)
		}
		if e := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldEpoch).Val(); e != fmt.Sprint(epoch) {
			t.Fatalf("round %d: dispatch epoch %s, want %d", round, e, epoch)
		}
		if err := s.ReleaseLease(ctx, q, owner, epoch); err != nil {
			t.Fatal(err)
		}
		last = epoch
	}
	t.Logf("%d held acquires answered epochs 1..%d (%d held replies)", heldRounds, last, p.Held())
}

// The retry of a renewal answers true, and the lease is still the same
// owner's at the same epoch.
func TestHeldRenewReplyRetriedKeepsTheLease(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	const ttl = 5 * time.Second
	epoch := lead(t, s, q, "leader")
	match := requestWith(scriptHash(t, "lease"), k.Lock(), respBulk("renew"), respBulk("leader"))
	for round := range heldRounds {
		var ok bool
		withHeldReply(t, p, match, func() (err error) {
			ok, err = ps.RenewLease(ctx, q, "leader", epoch, ttl)
			return err
		})
		if !ok {
			t.Fatalf("round %d: the retried renewal answered false", round)
		}
		if v := rdb.Get(ctx, k.Lock()).Val(); v != fmt.Sprintf("leader:%d", epoch) {
			t.Fatalf("round %d: lock %q, want leader:%d", round, v, epoch)
		}
		// Renewed by both executions, the last one a moment ago; without
		// renewals the 5 s lease would have run out by round 5.
		if ttl := rdb.PTTL(ctx, k.Lock()).Val(); ttl < 3*time.Second {
			t.Fatalf("round %d: lease has %v left, want nearly 5 s", round, ttl)
		}
	}
	if e := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldEpoch).Val(); e != fmt.Sprint(epoch) {
		t.Fatalf("dispatch epoch %s after %d renewals, want %d", e, heldRounds, epoch)
	}
	t.Logf("%d held renewals answered true at epoch %d (%d held replies)", heldRounds, epoch, p.Held())
}

// A pre-queue draw whose every step answers late: the enter that closes the
// pre-queue, QueueStarted, each place call and the finish all have their
// reply held and are sent again. The retries change nothing: one
// QueueStarted, one QueueDrawn, every pre-queued person placed once, in
// the drawn order, on the sequence numbers reserved for them, and the late
// entrant right behind.
func TestHeldDrawRepliesRetriedPlaceEveryoneOnce(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	ctx := context.Background()
	starts := time.Now().Add(300 * time.Millisecond)
	q := scheduled(t, s, starts, nil)
	k := redisstore.KeysFor(q)
	early := names("e", 12)
	enterAll(t, s, q, queue.PreQueue, early...)
	epoch := lead(t, s, q, "d1")
	time.Sleep(time.Until(starts) + 20*time.Millisecond)

	var late queue.Standing
	withHeldReply(t, p, requestWith(k.PreQueue(), respBulk("late")), func() (err error) {
		late, err = ps.Enter(ctx, q, "late")
		return err
	})
	if late.State != queue.Waiting || late.Position != 1 || rdb.Get(ctx, k.Seq()).Val() != "13" {
		t.Fatalf("the late entrant whose enter closed the pre-queue: %+v, seq %s; want WAITING 1, seq 13", late, rdb.Get(ctx, k.Seq()).Val())
	}
	hash := scriptHash(t, "draw")
	var w queue.DrawWork
	withHeldReply(t, p, requestWith(hash, respBulk("announce")), func() (err error) {
		w, err = ps.StartDraw(ctx, q, epoch, queue.DrawTotals{})
		return err
	})
	order, err := queue.DrawOrder(w.Seed, w.Remaining)
	if err != nil || len(order) != 12 {
		t.Fatalf("draw order of %d: %v", len(order), err)
	}
	for i := 0; i < len(order); i += 4 {
		chunk := order[i : i+4]
		withHeldReply(t, p, requestWith(hash, respBulk("place"), respBulk(chunk[0])), func() (err error) {
			w, err = ps.PlaceDrawn(ctx, q, epoch, chunk)
			return err
		})
		if w.Placed != int64(i+4) {
			t.Fatalf("after chunk %d: %d placed, want %d", i/4, w.Placed, i+4)
		}
	}
	withHeldReply(t, p, requestWith(hash, respBulk("finish")), func() (err error) {
		w, err = ps.FinishDraw(ctx, q, epoch, queue.DrawTotals{})
		return err
	})
	if w.State != queue.DrawDrawn || w.Placed != 12 {
		t.Fatalf("finish: %+v", w)
	}
	line := rdb.ZRangeWithScores(ctx, k.Waiting(), 0, -1).Val()
	if len(line) != 13 {
		t.Fatalf("%d in line, want 13", len(line))
	}
	for i, z := range line {
		want, score := "late", 13.0
		if i < 12 {
			want, score = order[i], float64(i+1)
		}
		if z.Member != want || z.Score != score {
			t.Fatalf("place %d: %v at %v, want %s at %v", i+1, z.Member, z.Score, want, score)
		}
	}
	if a, b := len(outboxOf(t, rdb, q, queue.EventQueueStarted)), len(outboxOf(t, rdb, q, queue.EventQueueDrawn)); a != 1 || b != 1 {
		t.Errorf("%d QueueStarted and %d QueueDrawn after retried steps, want 1 and 1", a, b)
	}
}
