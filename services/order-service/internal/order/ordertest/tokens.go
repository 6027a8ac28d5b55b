// Package ordertest is test support for package order: in-memory fakes of
// its ports (Tokens, Repo) and the contract suites that every
// implementation of those ports passes. The fakes run the suites in this
// package's own tests; redisstore and pg run them against real Redis and
// PostgreSQL in theirs, so a fake cannot drift from the adapter it stands
// in for. Import it from _test.go files only.
package ordertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Token is an entry token as the admission-dispatcher issues it: it
// activates ActivateIn from now and expires TTL after it activates.
type Token struct {
	Secret, ID      string
	ActivateIn, TTL time.Duration
	// QueueOrderLimit, when not 0, sets the queue's maxOrdersPerUser
	// knob with the token, as an operator's PUT would.
	QueueOrderLimit int64
}

// Issuer gives user an entry token for queue q, as the dispatcher's issue
// does. The contract suites seed tokens through it.
type Issuer func(t *testing.T, q, user string, tok Token)

// keep is how long a consumed token's data and status stay known past its
// expiry or lease, as redisstore's consume script keeps them.
const keep = 2 * time.Minute

// Tokens is order.Tokens in memory, with the rules of redisstore's check,
// consume, settle and overdue scripts (see RunTokensContract); a queue's
// tokens exist only once issued with Issue. Tokens also counts the calls
// of each method (Calls) and remembers the handed-off token ids
// (HandedOff), for unit tests that assert on them.
type Tokens struct {
	mu       sync.Mutex
	users    map[userKey]*holder
	inflight map[string]map[string]time.Time // queue -> "<token id>:<user>" -> lease deadline
	calls    map[string]int
	handed   []string
	limits   map[string]int64 // queue -> maxOrdersPerUser
}

type userKey struct{ q, user string }

// holder is one user's token state in one queue: the redisstore keys
// token:<user>, status:<user>, consumed:<user> and spent:<user>.
type holder struct {
	token *issued
	// marker is the status marker "<STATE>:<token id>[:<order id>]".
	marker string
	// consumed is what a restore would need: the consumed token and the
	// attempt's order id. It, marker and spent are kept until keepUntil.
	consumed  *issued
	orderID   string
	spent     string
	keepUntil time.Time
}

type issued struct {
	secret, id          string
	activateMs, expires int64 // Unix milliseconds, as Redis keeps them
}

// NewTokens returns an empty Tokens.
func NewTokens() *Tokens {
	return &Tokens{users: map[userKey]*holder{}, inflight: map[string]map[string]time.Time{}, calls: map[string]int{},
		limits: map[string]int64{}}
}

// Issue gives user a token for q, replacing any it had.
func (m *Tokens) Issue(q, user string, tok Token) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now().UnixMilli()
	h := m.holder(q, user)
	activate := now + tok.ActivateIn.Milliseconds()
	h.token = &issued{secret: tok.Secret, id: tok.ID, activateMs: activate, expires: activate + tok.TTL.Milliseconds()}
	h.marker = "TOKEN_ISSUED:" + tok.ID
	if tok.QueueOrderLimit != 0 {
		m.limits[q] = tok.QueueOrderLimit
	}
}

// Issuer is Issue as the contract suites take it.
func (m *Tokens) Issuer() Issuer {
	return func(_ *testing.T, q, user string, tok Token) { m.Issue(q, user, tok) }
}

// Calls is how often method (for example "Consume") was called.
func (m *Tokens) Calls(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method]
}

// HandedOff lists the token ids HandOff was called with, in order.
func (m *Tokens) HandedOff() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.handed)
}

// ResetCalls forgets the counted calls and hand-offs, after a test's setup.
func (m *Tokens) ResetCalls() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls, m.handed = map[string]int{}, nil
}

// holder returns user's state in q, creating it; the caller holds mu.
func (m *Tokens) holder(q, user string) *holder {
	k := userKey{q, user}
	h := m.users[k]
	if h == nil {
		h = &holder{}
		m.users[k] = h
	}
	return h
}

// live returns user's state in q with what has expired by now dropped, as
// Redis would have expired those keys; the caller holds mu.
func (m *Tokens) live(q, user string, now int64) *holder {
	h := m.holder(q, user)
	if h.token != nil && now >= h.token.expires {
		h.token = nil
	}
	if !h.keepUntil.IsZero() && now >= h.keepUntil.UnixMilli() {
		h.consumed, h.orderID, h.spent, h.marker, h.keepUntil = nil, "", "", "", time.Time{}
	}
	return h
}

// CheckToken sorts a presented secret: VALID, NOT_ACTIVE (with the wait),
// SPENT (the secret of the token the user last consumed here) or INVALID.
func (m *Tokens) CheckToken(_ context.Context, q, user, secret string) (queue.TokenCheck, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["CheckToken"]++
	now := time.Now().UnixMilli()
	h := m.live(q, user, now)
	switch {
	case secret == "":
	case h.token != nil && h.token.secret == secret:
		if wait := h.token.activateMs - now; wait > 0 {
			return queue.TokenCheck{State: queue.TokenNotActive, Wait: time.Duration(wait) * time.Millisecond}, nil
		}
		return queue.TokenCheck{State: queue.TokenValid}, nil
	case h.spent == secret:
		return queue.TokenCheck{State: queue.TokenSpent}, nil
	}
	return queue.TokenCheck{State: queue.TokenInvalid}, nil
}

// Consume takes user's token if secret is its secret and it is active:
// the token moves to in flight under a lease ending after lease. A repeat
// of the call that took it (same secret and order id) answers as it did.
func (m *Tokens) Consume(_ context.Context, q, user, secret, orderID string, lease, _ time.Duration) (queue.Consumed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["Consume"]++
	now := time.Now().UnixMilli()
	h := m.live(q, user, now)
	if h.token == nil || secret == "" || h.token.secret != secret {
		c := h.consumed
		if c != nil && strings.HasPrefix(h.marker, "ORDERING:") && strings.HasSuffix(h.marker, ":"+orderID) &&
			c.secret == secret && h.orderID == orderID {
			return m.consumed(q, c), nil
		}
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, queue.ErrInvalidToken)
	}
	tok := h.token
	if now < tok.activateMs {
		wait := time.Duration(tok.activateMs-now) * time.Millisecond
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, &queue.NotActiveError{Wait: wait})
	}
	deadline := now + lease.Milliseconds()
	h.token, h.consumed, h.orderID, h.spent = nil, tok, orderID, tok.secret
	h.marker = "ORDERING:" + tok.id + ":" + orderID
	h.keepUntil = time.UnixMilli(max(tok.expires, deadline)).Add(keep)
	if m.inflight[q] == nil {
		m.inflight[q] = map[string]time.Time{}
	}
	m.inflight[q][tok.id+":"+user] = time.UnixMilli(deadline).UTC()
	return m.consumed(q, tok), nil
}

// consumed is consume's answer: the token and the queue's order limit as
// it is now.
func (m *Tokens) consumed(q string, t *issued) queue.Consumed {
	return queue.Consumed{TokenID: t.id, ActivateAt: time.UnixMilli(t.activateMs).UTC(), ExpiresAt: time.UnixMilli(t.expires).UTC(),
		MaxOrders: m.limits[q]}
}

// Settle marks the attempt (tokenID, orderID) ordered; false when it is
// not the one in flight (settled already, or never consumed).
func (m *Tokens) Settle(_ context.Context, q, user, tokenID, orderID string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["Settle"]++
	h := m.live(q, user, time.Now().UnixMilli())
	if h.consumed == nil || (h.consumed.id == tokenID && h.orderID == orderID) {
		delete(m.inflight[q], tokenID+":"+user)
		h.consumed, h.orderID = nil, ""
	}
	if h.marker != "ORDERING:"+tokenID+":"+orderID {
		return false, nil
	}
	h.marker = "ORDERED:" + tokenID + ":" + orderID
	return true, nil
}

// HandOff takes the token off the in-flight leases.
func (m *Tokens) HandOff(_ context.Context, q, user, tokenID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["HandOff"]++
	m.handed = append(m.handed, tokenID)
	delete(m.inflight[q], tokenID+":"+user)
	return nil
}

// Overdue lists up to limit in-flight tokens of q whose lease has ended,
// the earliest deadline first.
func (m *Tokens) Overdue(_ context.Context, q string, limit int64) ([]queue.InflightToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["Overdue"]++
	now := time.Now()
	out := []queue.InflightToken{}
	for member, deadline := range m.inflight[q] {
		if deadline.After(now) {
			continue
		}
		tid, user, _ := strings.Cut(member, ":")
		t := queue.InflightToken{TokenID: tid, UserID: user, Deadline: deadline}
		if h := m.live(q, user, now.UnixMilli()); h.consumed != nil && h.consumed.id == tid {
			t.OrderID, t.ExpiresAt = h.orderID, time.UnixMilli(h.consumed.expires).UTC()
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b queue.InflightToken) int {
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return strings.Compare(a.TokenID+":"+a.UserID, b.TokenID+":"+b.UserID)
	})
	return out[:min(int64(len(out)), max(limit, 0))], nil
}
