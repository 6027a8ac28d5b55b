// Package streamtest is test support for package stream: an in-memory
// stream.Positions and the contract every implementation of that port
// passes. The fake runs the contract in this package's own tests;
// redisstore runs it against real Redis in
// services/notification-service/internal/wire, so the fake cannot drift
// from it. Import it from _test.go files only.
//
// It does not import package stream: stream's own tests are in package
// stream and use this package, and Go does not allow the cycle. Those
// tests hand the fake to stream.New, so the compiler checks that it is a
// stream.Positions.
package streamtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Positions is the port stream.Positions, restated (see the package
// comment).
type Positions interface {
	Position(ctx context.Context, q, user string) (queue.Standing, error)
	PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error)
}

// Seeder makes the state positions are read from: a queue created by an
// operator, users entering its line, the dispatcher admitting its head.
type Seeder interface {
	// Open creates queue q, open, admitting rate a second.
	Open(t *testing.T, q string, rate float64)
	// Enter puts user at the back of q's line.
	Enter(t *testing.T, q, user string)
	// Admit gives the head of q's line a token, as the dispatcher's issue
	// does, and returns that user and the token.
	Admit(t *testing.T, q string) (string, queue.Token)
}

// Store is stream.Positions in memory, with the rules of redisstore's
// position script (see RunPositionsContract). A queue exists once Open
// created it; users stand where Enter and Admit put them. Store counts
// its reads (Reads) and fails them on demand (SetDown), for unit tests.
type Store struct {
	mu     sync.Mutex
	queues map[string]*line
	down   error
	reads  int
}

type line struct {
	rate    float64
	waiting []string               // in order of entry
	tokens  map[string]queue.Token // the admitted, by user
}

// markerKept is how long past its token's expiry redisstore keeps a
// user's status marker, which tells EXPIRED from NOT_IN_QUEUE.
const markerKept = 2 * time.Minute

// NewStore returns a Store without queues.
func NewStore() *Store { return &Store{queues: map[string]*line{}} }

// Open creates queue q, open, admitting rate a second; an existing q keeps
// its line.
func (s *Store) Open(q string, rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.queues[q]; l != nil {
		l.rate = rate
		return
	}
	s.queues[q] = &line{rate: rate, tokens: map[string]queue.Token{}}
}

// Enter puts user at the back of q's line, unless the user is in it or
// holds a token; false when q does not exist.
func (s *Store) Enter(q, user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.queues[q]
	if l == nil {
		return false
	}
	if _, admitted := l.tokens[user]; !admitted && !slices.Contains(l.waiting, user) {
		l.waiting = append(l.waiting, user)
	}
	return true
}

// Admit gives the head of q's line tok and returns that user; false when
// nobody waits.
func (s *Store) Admit(q string, tok queue.Token) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.queues[q]
	if l == nil || len(l.waiting) == 0 {
		return "", false
	}
	user := l.waiting[0]
	l.waiting = l.waiting[1:]
	// Redis keeps the times in milliseconds.
	tok.ActivateAt = time.UnixMilli(tok.ActivateAt.UnixMilli()).UTC()
	tok.ExpiresAt = time.UnixMilli(tok.ExpiresAt.UnixMilli()).UTC()
	l.tokens[user] = tok
	return user, true
}

// SetDown makes every later read fail with err; nil ends that.
func (s *Store) SetDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = err
}

// Reads counts the calls of Position and PositionMany.
func (s *Store) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// ResetReads forgets the counted reads, after a test's setup.
func (s *Store) ResetReads() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = 0
}

// Position is where user stands in q: waiting (1-based), admitted with
// the token, or not in the line; queue.ErrNotFound when q does not exist.
func (s *Store) Position(_ context.Context, q, user string) (queue.Standing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.down != nil {
		return queue.Standing{}, fmt.Errorf("position %s: %w", q, s.down)
	}
	st, ok := s.standing(q, user)
	if !ok {
		return st, fmt.Errorf("position %s: %w", q, queue.ErrNotFound)
	}
	return st, nil
}

// standing reads user's standing in q; false when q does not exist. The
// caller holds mu.
func (s *Store) standing(q, user string) (queue.Standing, bool) {
	st := queue.Standing{QueueID: q}
	l := s.queues[q]
	if l == nil {
		return st, false
	}
	st.QueueState, st.ConfiguredRate, st.Total = queue.Open, l.rate, int64(len(l.waiting))
	if i := slices.Index(l.waiting, user); i >= 0 {
		st.State, st.Position = queue.Waiting, int64(i+1)
		return st, true
	}
	if tok, ok := l.tokens[user]; ok && time.Now().Before(tok.ExpiresAt) {
		st.State, st.Token = queue.Admitted, &tok
		return st, true
	}
	if tok, ok := l.tokens[user]; ok && time.Now().Before(tok.ExpiresAt.Add(markerKept)) {
		st.State = queue.Expired // a token was issued and is gone
		return st, true
	}
	st.State = queue.NotInQueue
	return st, true
}

// PositionMany reads users' standings in q in one round; the map has a
// standing for every user, and none at all when q does not exist.
func (s *Store) PositionMany(_ context.Context, q string, users []string) (map[string]queue.Standing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.down != nil {
		return nil, fmt.Errorf("position many %s: %w", q, s.down)
	}
	out := make(map[string]queue.Standing, len(users))
	for _, u := range users {
		if st, ok := s.standing(q, u); ok {
			out[u] = st
		}
	}
	return out, nil
}

// Seeder is Open, Enter and Admit as the contract takes them; Admit gives
// the head a fresh token, active at once, living as long as a queue's
// tokens do by default.
func (s *Store) Seeder() Seeder { return seeder{s} }

type seeder struct{ s *Store }

func (f seeder) Open(_ *testing.T, q string, rate float64) { f.s.Open(q, rate) }

func (f seeder) Enter(t *testing.T, q, user string) {
	t.Helper()
	if !f.s.Enter(q, user) {
		t.Fatalf("enter %s: %s does not exist", user, q)
	}
}

func (f seeder) Admit(t *testing.T, q string) (string, queue.Token) {
	t.Helper()
	g, err := queue.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := queue.Token{Secret: g.Secret, ID: g.TokenID, ActivateAt: now,
		ExpiresAt: now.Add(time.Duration(queue.DefaultConfig().TokenTTLSeconds) * time.Second)}
	user, ok := f.s.Admit(q, tok)
	if !ok {
		t.Fatalf("admit: nobody waits in %s", q)
	}
	st, _ := f.s.standing(q, user)
	return user, *st.Token
}
