package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func newStoreB(b *testing.B) (*redisstore.Store, redis.UniversalClient) { return newStore(b) }

func randHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newStore(t testing.TB) (*redisstore.Store, redis.UniversalClient) {
	t.Helper()
	rdb := testenv.Redis(t)
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb
}

// newQueue creates a queue with a unique id and the knobs mut sets.
func newQueue(t testing.TB, s *redisstore.Store, mut func(*queue.Config)) string {
	t.Helper()
	q := testenv.ID(t)
	_, created, err := s.UpdateConfig(context.Background(), q, func(c queue.Config, _ bool) (queue.Config, error) {
		if mut != nil {
			mut(&c)
		}
		return c, nil
	})
	if err != nil || !created {
		t.Fatalf("create queue %s: created=%v err=%v", q, created, err)
	}
	t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
	return q
}

// grantToken writes a token the way the dispatcher's issue script does:
// into the user's status marker (redisstore.TokenMarker).
func grantToken(t testing.TB, rdb redis.UniversalClient, q, user, secret, id string, ttl time.Duration) {
	t.Helper()
	now := time.Now()
	tok := queue.Token{Secret: secret, ID: id, ActivateAt: now, ExpiresAt: now.Add(ttl)}
	err := rdb.Set(context.Background(), redisstore.KeysFor(q).Status(user), redisstore.TokenMarker(tok, 1), ttl+2*time.Minute).Err()
	if err != nil {
		t.Fatalf("grant token: %v", err)
	}
}

// grantLegacyToken writes a token the way an earlier version's issue
// script did: a hash of it, expiring with it, and a marker naming its id.
func grantLegacyToken(t testing.TB, rdb redis.UniversalClient, q, user, secret, id string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	now := time.Now()
	err := rdb.HSet(ctx, k.Token(user),
		redisstore.TokenFieldSecret, secret,
		redisstore.TokenFieldID, id,
		redisstore.TokenFieldActivateAt, now.UnixMilli(),
		redisstore.TokenFieldExpiresAt, now.Add(ttl).UnixMilli(), "seq", 7).Err()
	if err == nil {
		err = rdb.PExpire(ctx, k.Token(user), ttl).Err()
	}
	if err == nil {
		err = rdb.Set(ctx, k.Status(user), redisstore.StatusTokenIssued+":"+id, ttl+2*time.Minute).Err()
	}
	if err != nil {
		t.Fatalf("grant token: %v", err)
	}
}

// heldToken is the token the user's status marker holds (false: none),
// and the marker's TTL.
func heldToken(t testing.TB, rdb redis.UniversalClient, q, user string) (queue.Token, bool, time.Duration) {
	t.Helper()
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	m, err := rdb.Get(ctx, k.Status(user)).Result()
	if errors.Is(err, redis.Nil) {
		return queue.Token{}, false, 0
	}
	if err != nil {
		t.Fatalf("read the marker of %s: %v", user, err)
	}
	tok, _, ok := redisstore.ParseTokenMarker(m)
	return tok, ok, rdb.PTTL(ctx, k.Status(user)).Val()
}

func TestEnterNeverExceedsCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.MaxQueueSize = 100 })
	ctx := context.Background()

	const n = 1000
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.Enter(ctx, q, fmt.Sprintf("u%d", i)) })
	}
	wg.Wait()
	waiting, full := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			waiting++
		case errors.Is(err, queue.ErrFull):
			full++
		default:
			t.Errorf("enter u%d: unexpected error %v", i, err)
		}
	}
	if waiting != 100 || full != 900 {
		t.Fatalf("waiting %d, full %d; want 100 and 900", waiting, full)
	}
	if z := rdb.ZCard(ctx, redisstore.KeysFor(q).Waiting()).Val(); z != 100 {
		t.Fatalf("ZCARD = %d, want 100", z)
	}
}

func TestEnterCapFollowsMaxWaitTimesRate(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	// 10 s x 2.5/s = 25 places, well below maxQueueSize.
	q := newQueue(t, s, func(c *queue.Config) { c.MaxWaitSeconds, c.AdmissionRatePerSec = 10, 2.5 })
	ctx := context.Background()
	for i := range 25 {
		if _, err := s.Enter(ctx, q, fmt.Sprintf("u%d", i)); err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
	}
	st, err := s.Enter(ctx, q, "late")
	if !errors.Is(err, queue.ErrFull) {
		t.Fatalf("26th enter: err %v, want ErrFull", err)
	}
	if st.Total != 25 {
		t.Fatalf("full reply total = %d, want 25", st.Total)
	}
}

func TestEnterSameUserKeepsOnePlace(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Enter(ctx, q, fmt.Sprintf("before%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	const n = 50
	pos := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var st queue.Standing
			st, errs[i] = s.Enter(ctx, q, "same")
			pos[i] = st.Position
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || pos[i] != 4 {
			t.Errorf("enter #%d: position %d err %v; want 4, nil", i, pos[i], errs[i])
		}
	}
	if z := rdb.ZCard(ctx, redisstore.KeysFor(q).Waiting()).Val(); z != 4 {
		t.Fatalf("ZCARD = %d, want 4", z)
	}
	if seq := rdb.Get(ctx, redisstore.KeysFor(q).Seq()).Val(); seq != "4" {
		t.Fatalf("seq = %s, want 4: a repeated enter must not take a number", seq)
	}
}

func TestEnterWithTokenReturnsItAndTakesNoPlace(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	grantToken(t, rdb, q, "holder", "secret-1", "tok-1", time.Minute)

	st, err := s.Enter(ctx, q, "holder")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != queue.Admitted || st.Token == nil || st.Token.Secret != "secret-1" || st.Token.ID != "tok-1" {
		t.Fatalf("standing = %+v token %+v; want ADMITTED with secret-1/tok-1", st, st.Token)
	}
	if d := time.Until(st.Token.ExpiresAt); d < 50*time.Second || d > time.Minute {
		t.Fatalf("expiresAt in %v, want about a minute", d)
	}
	if z := rdb.ZCard(ctx, redisstore.KeysFor(q).Waiting()).Val(); z != 0 {
		t.Fatalf("ZCARD = %d, want 0", z)
	}
}

func TestPositionStates(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	k := redisstore.KeysFor(q)

	for _, u := range []string{"w1", "w2"} {
		if _, err := s.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
	}
	grantToken(t, rdb, q, "admitted", "sec", "tid", time.Minute)
	// expired: a marker says a token was issued, the token is gone.
	rdb.Set(ctx, k.Status("expired"), redisstore.StatusTokenIssued, time.Minute)
	rdb.Set(ctx, k.Status("ordered"), redisstore.StatusOrdered, time.Minute)
	rdb.Set(ctx, k.Status("ordering"), redisstore.StatusOrdering, time.Minute)

	tests := []struct {
		user     string
		state    queue.UserState
		position int64
		token    bool
		ordering bool
	}{
		{"w2", queue.Waiting, 2, false, false},
		{"admitted", queue.Admitted, 0, true, false},
		{"expired", queue.Expired, 0, false, false},
		{"ordered", queue.Ordered, 0, false, false},
		{"ordering", queue.Admitted, 0, false, true},
		{"stranger", queue.NotInQueue, 0, false, false},
	}
	for _, tt := range tests {
		st, err := s.Position(ctx, q, tt.user)
		if err != nil {
			t.Fatalf("%s: %v", tt.user, err)
		}
		if st.State != tt.state || st.Position != tt.position || (st.Token != nil) != tt.token || st.Ordering != tt.ordering || st.Total != 2 {
			t.Errorf("%s: state %s position %d token %v ordering %v total %d; want %s %d %v %v 2",
				tt.user, st.State, st.Position, st.Token != nil, st.Ordering, st.Total, tt.state, tt.position, tt.token, tt.ordering)
		}
	}
	if _, err := s.Position(ctx, "no-such-queue-"+q, "w1"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("unknown queue: err %v, want ErrNotFound", err)
	}
}

func TestLeaveMovesEveryoneBehindUp(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		if _, err := s.Enter(ctx, q, fmt.Sprintf("u%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	left, err := s.Leave(ctx, q, "u4")
	if err != nil || !left {
		t.Fatalf("leave: left=%v err=%v", left, err)
	}
	if again, err := s.Leave(ctx, q, "u4"); err != nil || again {
		t.Fatalf("second leave: left=%v err=%v; want false, nil", again, err)
	}
	for i := 1; i <= 10; i++ {
		st, err := s.Position(ctx, q, fmt.Sprintf("u%d", i))
		if err != nil {
			t.Fatal(err)
		}
		want := int64(i)
		if i > 4 {
			want = int64(i - 1)
		}
		if i == 4 {
			if st.State != queue.NotInQueue {
				t.Errorf("u4 after leaving: %s, want NOT_IN_QUEUE", st.State)
			}
			continue
		}
		if st.Position != want || st.Total != 9 {
			t.Errorf("u%d: position %d total %d, want %d and 9", i, st.Position, st.Total, want)
		}
	}
}

func TestClosedQueueRefusesEntriesButReturnsTokens(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	for _, u := range []string{"a", "b", "c"} {
		if _, err := s.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
	}
	grantToken(t, rdb, q, "holder", "sec", "tid", time.Minute)
	n, err := s.Close(ctx, q)
	if err != nil || n != 3 {
		t.Fatalf("close: dropped %d err %v; want 3, nil", n, err)
	}
	if _, err := s.Enter(ctx, q, "d"); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("enter after close: %v, want ErrClosed", err)
	}
	if st, err := s.Enter(ctx, q, "holder"); err != nil || st.State != queue.Admitted {
		t.Fatalf("token holder after close: %s %v, want ADMITTED", st.State, err)
	}
	cfg, stats, err := s.Config(ctx, q)
	if err != nil || cfg.State != queue.Closed || stats.Waiting != 0 {
		t.Fatalf("after close: state %s waiting %d err %v", cfg.State, stats.Waiting, err)
	}
	if _, err := s.Close(ctx, "missing-"+q); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("close unknown: %v, want ErrNotFound", err)
	}
}

func TestPausedQueueStillTakesEntries(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.State = queue.Paused })
	st, err := s.Enter(context.Background(), q, "u")
	if err != nil || st.State != queue.Waiting || st.QueueState != queue.Paused {
		t.Fatalf("enter paused: %+v %v", st, err)
	}
}

func TestConcurrentConfigUpdatesAllLand(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	// Each writer bumps maxQueueSize by one; a lost update would show as a
	// total below the number of writers.
	const writers = 20
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			_, _, errs[i] = s.UpdateConfig(ctx, q, func(c queue.Config, exists bool) (queue.Config, error) {
				if !exists {
					return c, errors.New("queue vanished")
				}
				c.MaxQueueSize++
				return c, nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	cfg, _, err := s.Config(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := queue.DefaultConfig().MaxQueueSize + writers; cfg.MaxQueueSize != want {
		t.Fatalf("maxQueueSize = %d, want %d", cfg.MaxQueueSize, want)
	}
}

func TestUpdateConfigErrorWritesNothing(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	boom := errors.New("refused")
	_, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.AdmissionRatePerSec = 1
		return c, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the update's error", err)
	}
	cfg, _, _ := s.Config(ctx, q)
	if cfg.AdmissionRatePerSec != 175 {
		t.Fatalf("rate = %v after a refused update, want 175", cfg.AdmissionRatePerSec)
	}
}

func TestMeasuredRateOnlyWhenFresh(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	if _, err := s.Enter(ctx, q, "u"); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, k.Dispatch(), redisstore.DispatchFieldMeasuredRate, "120.5", redisstore.DispatchFieldLastTickMs, time.Now().UnixMilli())
	st, err := s.Position(ctx, q, "u")
	if err != nil || st.MeasuredRate != 120.5 || st.ConfiguredRate != 175 {
		t.Fatalf("fresh: measured %v configured %v err %v", st.MeasuredRate, st.ConfiguredRate, err)
	}
	// A dispatcher silent for a minute no longer speaks for the rate.
	rdb.HSet(ctx, k.Dispatch(), redisstore.DispatchFieldLastTickMs, time.Now().Add(-time.Minute).UnixMilli())
	st, err = s.Position(ctx, q, "u")
	if err != nil || st.MeasuredRate != 0 || st.Rate() != 175 {
		t.Fatalf("stale: measured %v rate %v err %v", st.MeasuredRate, st.Rate(), err)
	}
}

// privateClient is a client of a test's own server, closed after the
// test's other cleanups (a queue's purge among them).
func privateClient(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisstore.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestScriptsRunAfterScriptCacheIsLost(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	rdb := privateClient(t, srv.URL())
	s, _ := redisstore.NewStore(rdb)
	ctx := context.Background()
	if err := s.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, s, nil)
	// As after a restart or failover: the server forgot every script.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Enter(ctx, q, "u")
	if err != nil || st.Position != 1 {
		t.Fatalf("enter after SCRIPT FLUSH: position %d err %v", st.Position, err)
	}
}

// TestPipelinedScriptsRunWhenTheNodeStillLacksThem: a pipelined call whose
// EVALSHA got NOSCRIPT is sent again as EVAL, so it runs even when the node
// has still not got the script when the call comes again (a Cluster just
// failed over, whose promoted master the client's script load did not
// reach): here every pipeline finds the server's script cache flushed.
func TestPipelinedScriptsRunWhenTheNodeStillLacksThem(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	rdb, flusher := privateClient(t, srv.URL()), privateClient(t, srv.URL())
	s, _ := redisstore.NewStore(rdb)
	ctx := context.Background()
	q := newQueue(t, s, nil)
	users := []string{"u0", "u1", "u2"}
	for _, u := range users {
		if _, err := s.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
	}
	var flushes atomic.Int64
	rdb.AddHook(flushEveryPipeline{func() {
		flushes.Add(1)
		if err := flusher.ScriptFlush(ctx).Err(); err != nil {
			t.Error(err)
		}
	}})
	many, err := s.PositionMany(ctx, q, append(users, "nobody"))
	if err != nil || len(many) != 4 {
		t.Fatalf("position many with the script cache flushed before every pipeline: %v %v", many, err)
	}
	for i, u := range users {
		if st := many[u]; st.State != queue.Waiting || st.Position != int64(i+1) {
			t.Fatalf("%s: %+v, want waiting at %d", u, st, i+1)
		}
	}
	if n := flushes.Load(); n < 2 {
		t.Fatalf("%d pipelines, want 2 or more (EVALSHA, then EVAL)", n)
	}
}

// flushEveryPipeline is a go-redis hook that runs flush before each pipeline.
type flushEveryPipeline struct{ flush func() }

func (h flushEveryPipeline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h flushEveryPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h flushEveryPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.flush()
		return next(ctx, cmds)
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	rdb, err := redisstore.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	s, _ := redisstore.NewStore(rdb)
	q := newQueue(t, s, nil)
	srv.Stop()
	ctx := context.Background()
	if _, err := s.Enter(ctx, q, "u"); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("enter with Redis down: %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("ping with Redis down: %v, want ErrUnavailable", err)
	}
}
