// Package restoretest is test support for package restore: an in-memory
// restore.Store and the contract every implementation of that port
// passes. The fake runs the contract in this package's own tests;
// redisstore runs it against real Redis in
// services/admission-dispatcher/internal/wire, so the fake cannot drift
// from it. Import it from _test.go files only.
package restoretest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Token is an entry token as the admission-dispatcher issues it: active at
// once, expiring after TTL.
type Token struct {
	Secret, ID string
	TTL        time.Duration
}

// Seeder puts tokens where a restore finds them: issued by the dispatcher,
// then consumed by an order attempt.
type Seeder interface {
	// Issue gives user a token for queue q.
	Issue(t *testing.T, q, user string, tok Token)
	// Consume takes user's token with secret for the attempt orderID, as
	// the order path does, and returns the token id; an error wrapping
	// queue.ErrInvalidToken when user holds no such token.
	Consume(t *testing.T, q, user, secret, orderID string) (string, error)
}

// Call is one call of Restore.
type Call struct {
	Q, User, TokenID, OrderID string
	Restorable                bool
}

// Store is restore.Store in memory, with the rules of redisstore's
// restore script (see RunStoreContract). A restore acts only on a token
// consumed with Consume; Issue issues one. Store records every Restore
// call (Calls) and fails calls on demand (FailWith), for unit tests.
type Store struct {
	mu    sync.Mutex
	users map[userKey]*holder
	calls []Call
	fail  func(call int) error
}

type userKey struct{ q, user string }

// holder is one user's token state in one queue: redisstore's
// token:<user>, status:<user> and consumed:<user>.
type holder struct {
	token    *issued
	marker   string // "<STATE>:<token id>[:<order id>]"
	consumed *issued
	orderID  string
}

type issued struct {
	secret, id          string
	activateMs, expires int64 // Unix milliseconds, as Redis keeps them
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{users: map[userKey]*holder{}} }

// FailWith makes Restore ask fail before each call, with the call's number
// from 1; a non-nil error fails that call without changing anything.
func (s *Store) FailWith(fail func(call int) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

// Calls lists every Restore call, in order.
func (s *Store) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *Store) holder(q, user string) *holder {
	k := userKey{q, user}
	if s.users[k] == nil {
		s.users[k] = &holder{}
	}
	return s.users[k]
}

// Issue gives user a token for q, replacing any it had.
func (s *Store) Issue(q, user string, tok Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	h := s.holder(q, user)
	h.token = &issued{secret: tok.Secret, id: tok.ID, activateMs: now, expires: now + tok.TTL.Milliseconds()}
	h.marker = "TOKEN_ISSUED:" + tok.ID
}

// Consume takes user's unexpired token with secret for the attempt
// orderID and returns its id; queue.ErrInvalidToken when there is none.
func (s *Store) Consume(q, user, secret, orderID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holder(q, user)
	if h.token == nil || h.token.secret != secret || time.Now().UnixMilli() >= h.token.expires {
		return "", fmt.Errorf("consume %s: %w", q, queue.ErrInvalidToken)
	}
	h.consumed, h.orderID, h.token = h.token, orderID, nil
	h.marker = "ORDERING:" + h.consumed.id + ":" + orderID
	return h.consumed.id, nil
}

// Seeder is Issue and Consume as the contract takes them.
func (s *Store) Seeder() Seeder { return seeder{s} }

type seeder struct{ s *Store }

func (f seeder) Issue(_ *testing.T, q, user string, tok Token) { f.s.Issue(q, user, tok) }

func (f seeder) Consume(_ *testing.T, q, user, secret, orderID string) (string, error) {
	return f.s.Consume(q, user, secret, orderID)
}

// Restore acts on the attempt (tokenID, orderID) if it is the one in
// flight: the token goes back (Restored) unless it has expired
// (RestoreExpired) or the failure is not restorable (Freed). Anything
// else is a Duplicate.
func (s *Store) Restore(_ context.Context, q, user, tokenID, orderID string, restorable bool) (queue.RestoreOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{q, user, tokenID, orderID, restorable})
	if s.fail != nil {
		if err := s.fail(len(s.calls)); err != nil {
			return "", err
		}
	}
	h := s.holder(q, user)
	if h.marker != "ORDERING:"+tokenID+":"+orderID {
		return queue.Duplicate, nil
	}
	c := h.consumed
	ours := c != nil && c.id == tokenID && h.orderID == orderID
	if ours {
		h.consumed, h.orderID = nil, ""
	}
	switch {
	case !restorable || !ours:
		h.marker = "FAILED:" + tokenID + ":" + orderID
		return queue.Freed, nil
	case c.expires <= time.Now().UnixMilli():
		h.marker = "EXPIRED:" + tokenID
		return queue.RestoreExpired, nil
	}
	h.token = c
	h.marker = "TOKEN_ISSUED:" + tokenID
	return queue.Restored, nil
}
