package wire

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream/streamtest"
)

// redisstore passes the contract of stream.Positions that streamtest's
// fake passes. The state is made through redisstore itself: the admin's
// UpdateConfig, the gateway's Enter, and the dispatcher's lease and Issue.
func TestPositionsContract(t *testing.T) {
	streamtest.RunPositionsContract(t, func(t *testing.T) (streamtest.Positions, streamtest.Seeder) {
		store, err := redisstore.NewStore(testenv.Redis(t))
		if err != nil {
			t.Fatal(err)
		}
		return store, &redisSeeder{store: store, lines: map[string][]string{}}
	})
}

type redisSeeder struct {
	store *redisstore.Store
	mu    sync.Mutex
	lines map[string][]string // who entered each queue, in order
}

func (s *redisSeeder) Open(t *testing.T, q string, rate float64) {
	t.Helper()
	_, created, err := s.store.UpdateConfig(context.Background(), q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.AdmissionRatePerSec = rate
		return c, nil
	})
	if err != nil || !created {
		t.Fatalf("open %s: created %v %v", q, created, err)
	}
	t.Cleanup(func() { _ = s.store.Purge(context.Background(), q) })
}

func (s *redisSeeder) Enter(t *testing.T, q, user string) {
	t.Helper()
	if _, err := s.store.Enter(context.Background(), q, user); err != nil {
		t.Fatalf("enter %s in %s: %v", user, q, err)
	}
	s.mu.Lock()
	s.lines[q] = append(s.lines[q], user)
	s.mu.Unlock()
}

// Admit issues one token as the dispatcher does: under the queue's lease,
// once credit for one admission has accrued at the queue's rate.
func (s *redisSeeder) Admit(t *testing.T, q string) (string, queue.Token) {
	t.Helper()
	ctx := context.Background()
	s.mu.Lock()
	line := s.lines[q]
	if len(line) == 0 {
		s.mu.Unlock()
		t.Fatalf("admit: nobody entered %s", q)
	}
	head := line[0]
	s.lines[q] = line[1:]
	s.mu.Unlock()
	epoch, err := s.store.AcquireLease(ctx, q, "contract", time.Minute)
	if err != nil || epoch == 0 {
		t.Fatalf("lease of %s: %d %v", q, epoch, err)
	}
	defer func() { _ = s.store.ReleaseLease(context.Background(), q, "contract", epoch) }()
	g, err := queue.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		r, err := s.store.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: []queue.Grant{g}})
		if err != nil {
			t.Fatalf("issue in %s: %v", q, err)
		}
		if r.Issued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("issue in %s: nothing issued within 5s (%+v)", q, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := s.store.Position(ctx, q, head)
	if err != nil || st.State != queue.Admitted || st.Token == nil || st.Token.ID != g.TokenID {
		t.Fatalf("after the issue %s stands %+v %v, want admitted with token %s", head, st, err, g.TokenID)
	}
	return head, *st.Token
}
