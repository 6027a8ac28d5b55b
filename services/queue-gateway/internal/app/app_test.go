package app_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// memStore is the gateway's store in memory, as far as the rules of app
// need: queue configurations, a line per queue, what enter was handed, and
// how often each method ran. Lua's own rules (capacity, ordering, tokens)
// are tested against Redis in pkg/redisstore.
type memStore struct {
	app.Store
	configs  map[string]queue.Config
	waiting  map[string]int64
	listed   []string // wr:queues, configured or not
	proofs   []queue.Proof
	calls    map[string]int
	closeErr error
}

func newMemStore() *memStore {
	return &memStore{configs: map[string]queue.Config{}, waiting: map[string]int64{}, calls: map[string]int{}}
}

func (m *memStore) EnterWithProof(_ context.Context, q, _ string, p queue.Proof) (queue.Standing, error) {
	m.calls["EnterWithProof"]++
	m.proofs = append(m.proofs, p)
	if _, ok := m.configs[q]; !ok {
		return queue.Standing{}, queue.ErrNotFound
	}
	m.waiting[q]++
	return queue.Standing{QueueID: q, State: queue.Waiting, Position: m.waiting[q]}, nil
}

func (m *memStore) Position(_ context.Context, q, _ string) (queue.Standing, error) {
	m.calls["Position"]++
	return queue.Standing{QueueID: q, State: queue.NotInQueue}, nil
}

func (m *memStore) Leave(context.Context, string, string) (bool, error) {
	m.calls["Leave"]++
	return true, nil
}

func (m *memStore) RefuseChange(context.Context, string, queue.Change, string) (bool, error) {
	return false, nil
}

func (m *memStore) UpdateConfigBy(_ context.Context, q string, _ queue.Change, update func(queue.Config, bool) (queue.Config, error)) (queue.Config, bool, error) {
	m.calls["UpdateConfig"]++
	cur, exists := m.configs[q]
	if !exists {
		cur = queue.DefaultConfig()
	}
	next, err := update(cur, exists)
	if err != nil {
		return cur, false, err
	}
	m.configs[q] = next
	if !slices.Contains(m.listed, q) {
		m.listed = append(m.listed, q)
	}
	return next, !exists, nil
}

func (m *memStore) Challenge(_ context.Context, q string) (queue.EnterChallenge, int64, error) {
	m.calls["Challenge"]++
	c, ok := m.configs[q]
	if !ok {
		return "", 0, queue.ErrNotFound
	}
	return c.EnterChallenge, c.PowDifficultyBits, nil
}

func (m *memStore) CloseBy(_ context.Context, q string, _ queue.Change) (int64, error) {
	m.calls["Close"]++
	if m.closeErr != nil {
		return 0, m.closeErr
	}
	if _, ok := m.configs[q]; !ok {
		return 0, queue.ErrNotFound
	}
	return m.waiting[q], nil
}

func (m *memStore) Unregister(_ context.Context, q string) (bool, error) {
	m.calls["Unregister"]++
	i := slices.Index(m.listed, q)
	if i < 0 {
		return false, nil
	}
	m.listed = slices.Delete(m.listed, i, i+1)
	return true, nil
}

func (m *memStore) Queues(context.Context) ([]string, error) { return slices.Clone(m.listed), nil }

func (m *memStore) Waiting(_ context.Context, ids []string) (map[string]int64, error) {
	m.calls["Waiting"]++
	out := map[string]int64{}
	for _, id := range ids {
		out[id] = m.waiting[id]
	}
	return out, nil
}

func rulesService(t *testing.T, m *memStore) (*app.Service, *challenge.Signer) {
	t.Helper()
	signer, err := challenge.NewSigner(challenge.DeriveKey("app-test-secret-0123456789abcdef"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := app.New(m, signer, app.Limits{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc, signer
}

// TestEnterChecksBeforeTheStore: bad ids and bad solutions are refused
// before the store is asked; a good solution reaches it as a proof of the
// difficulty solved; no solution reaches it as no proof.
func TestEnterChecksBeforeTheStore(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	svc, signer := rulesService(t, m)
	if _, _, err := svc.Configure(ctx, "sale", queue.Patch{}); err != nil {
		t.Fatal(err)
	}
	ch, err := signer.Issue("sale", "alice", 4)
	if err != nil {
		t.Fatal(err)
	}
	solved := ch.Value + ":" + challenge.Solve(ch.Value, 4)
	for _, tc := range []struct {
		name, q, user, solution string
		want                    error
		storeCalls              int
		proofBits               int
	}{
		{name: "queue id with a slash", q: "sa/le", user: "alice", want: app.ErrInvalidQueueID},
		{name: "empty user id", q: "sale", user: "", want: app.ErrInvalidUserID},
		{name: "malformed solution", q: "sale", user: "alice", solution: "junk", want: queue.ErrChallengeFailed},
		{name: "another user's solution", q: "sale", user: "bob", solution: solved, want: queue.ErrChallengeFailed},
		{name: "another queue's solution", q: "other", user: "alice", solution: solved, want: queue.ErrChallengeFailed},
		{name: "no solution", q: "sale", user: "alice", storeCalls: 1},
		{name: "a solution", q: "sale", user: "alice", solution: solved, storeCalls: 1, proofBits: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, proofs := m.calls["EnterWithProof"], len(m.proofs)
			st, err := svc.Enter(ctx, tc.q, tc.user, tc.solution)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Enter = %+v, %v; want %v", st, err, tc.want)
			}
			if got := m.calls["EnterWithProof"] - before; got != tc.storeCalls {
				t.Fatalf("the store was asked %d times, want %d", got, tc.storeCalls)
			}
			if tc.storeCalls == 1 {
				p := m.proofs[proofs]
				if p.Bits != tc.proofBits || (tc.proofBits > 0) != (p.ID != "") {
					t.Fatalf("proof %+v, want %d bits", p, tc.proofBits)
				}
			}
		})
	}
}

// TestChallengeFollowsTheQueue: a challenge is issued only for a queue that
// asks for one, at the queue's current difficulty.
func TestChallengeFollowsTheQueue(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	svc, _ := rulesService(t, m)
	pow, bits := queue.ChallengeProofOfWork, int64(6)
	if _, _, err := svc.Configure(ctx, "guarded", queue.Patch{EnterChallenge: &pow, PowDifficultyBits: &bits}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Configure(ctx, "open", queue.Patch{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, q, user string
		want          error
		bits          int
	}{
		{name: "a queue that asks for one", q: "guarded", user: "alice", bits: 6},
		{name: "a queue that asks for none", q: "open", user: "alice", want: app.ErrChallengeNotRequired},
		{name: "no such queue", q: "missing", user: "alice", want: queue.ErrNotFound},
		{name: "a bad user id", q: "guarded", user: "", want: app.ErrInvalidUserID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := svc.Challenge(ctx, tc.q, tc.user)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Challenge = %+v, %v; want %v", ch, err, tc.want)
			}
			if ch.Bits != tc.bits {
				t.Fatalf("difficulty %d, want %d", ch.Bits, tc.bits)
			}
		})
	}
}

// TestConfigureValidatesTheMergedConfiguration: knobs are checked together
// after the patch is laid over what is stored; a refused patch writes
// nothing and names every bad field.
func TestConfigureValidatesTheMergedConfiguration(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	svc, _ := rulesService(t, m)
	ttl, spread, rate, orders := int64(20), int64(10_000), 50.0, int64(2)
	cfg, created, err := svc.Configure(ctx, "sale", queue.Patch{TokenTTLSeconds: &ttl, AdmissionRatePerSec: &rate, MaxOrdersPerUser: &orders})
	if err != nil || !created || cfg.TokenTTLSeconds != 20 || cfg.AdmissionRatePerSec != 50 || cfg.MaxOrdersPerUser != 2 ||
		cfg.MaxQueueSize != queue.DefaultConfig().MaxQueueSize {
		t.Fatalf("create: %+v created=%v %v", cfg, created, err)
	}
	for _, tc := range []struct {
		name   string
		patch  queue.Patch
		fields []string
	}{
		// Fine alone, but not with the stored 20 s token.
		{name: "spread against the stored TTL", patch: queue.Patch{ActivationSpreadMs: &spread}, fields: []string{"activationSpreadMs"}},
		{name: "two bad knobs", patch: queue.Patch{AdmissionRatePerSec: ptr(0.0), MaxOrdersPerUser: ptr(int64(-1))},
			fields: []string{"admissionRatePerSec", "maxOrdersPerUser"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := svc.Configure(ctx, "sale", tc.patch)
			var bad *app.InvalidConfigError
			if !errors.As(err, &bad) {
				t.Fatalf("Configure: %v, want InvalidConfigError", err)
			}
			var fields []string
			for _, f := range bad.Fields {
				fields = append(fields, f.Field)
			}
			if !slices.Equal(fields, tc.fields) {
				t.Fatalf("bad fields %v, want %v", fields, tc.fields)
			}
			if m.configs["sale"] != cfg {
				t.Fatalf("stored %+v after a refused patch, want it unchanged %+v", m.configs["sale"], cfg)
			}
		})
	}
	if _, _, err := svc.Configure(ctx, "no/slash", queue.Patch{}); !errors.Is(err, app.ErrInvalidQueueID) || m.calls["UpdateConfig"] != 3 {
		t.Fatalf("bad id: %v after %d updates, want ErrInvalidQueueID and no update", err, m.calls["UpdateConfig"])
	}
}

// TestCloseRemovesALeftoverID: closing a queue answers how many waited; an
// id listed without configuration is removed instead of reported missing.
func TestCloseRemovesALeftoverID(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	svc, _ := rulesService(t, m)
	if _, _, err := svc.Configure(ctx, "sale", queue.Patch{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := svc.Enter(ctx, "sale", "someone", ""); err != nil {
			t.Fatal(err)
		}
	}
	m.listed = append(m.listed, "leftover")
	for _, tc := range []struct {
		q        string
		closeErr error
		waited   int64
		want     error
		listed   []string
	}{
		{q: "sale", waited: 3, listed: []string{"sale", "leftover"}},
		{q: "leftover", listed: []string{"sale"}},
		{q: "never-known", want: queue.ErrNotFound, listed: []string{"sale"}},
		{q: "sale", closeErr: queue.ErrUnavailable, want: queue.ErrUnavailable, listed: []string{"sale"}},
		{q: "bad/id", want: app.ErrInvalidQueueID, listed: []string{"sale"}},
	} {
		m.closeErr = tc.closeErr
		n, err := svc.Close(ctx, tc.q, queue.Change{})
		if n != tc.waited || !errors.Is(err, tc.want) || (tc.want == nil && err != nil) || !slices.Equal(m.listed, tc.listed) {
			t.Fatalf("Close(%s) = %d, %v, listed %v; want %d, %v, listed %v", tc.q, n, err, m.listed, tc.waited, tc.want, tc.listed)
		}
	}
}

// TestQueuesAndLengths: ids come sorted; the gauge reads at most limit
// queues, the first by id.
func TestQueuesAndLengths(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	svc, _ := rulesService(t, m)
	for _, q := range []string{"c", "a", "b"} {
		if _, _, err := svc.Configure(ctx, q, queue.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	m.waiting["a"], m.waiting["b"], m.waiting["c"] = 5, 7, 9
	ids, err := svc.Queues(ctx)
	if err != nil || !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("Queues = %v, %v; want [a b c]", ids, err)
	}
	lengths, err := svc.Lengths(ctx, 2)
	if err != nil || len(lengths) != 2 || lengths["a"] != 5 || lengths["b"] != 7 {
		t.Fatalf("Lengths(2) = %v, %v; want a=5 b=7", lengths, err)
	}
}

func ptr[T any](v T) *T { return &v }
