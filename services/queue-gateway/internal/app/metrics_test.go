package app_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// counts is an app.Metrics that counts by "kind/outcome".
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
}

func (c *counts) Entered(outcome string)     { c.add("enter/" + outcome) }
func (c *counts) Positioned(outcome string)  { c.add("position/" + outcome) }
func (c *counts) ChallengeIssued()           { c.add("challenge") }
func (c *counts) PositionRead(source string) { c.add("read/" + source) }

// store answers every enter and position with st and err, and every
// challenge read with kind. The other methods are not called here.
type store struct {
	app.Store
	st   queue.Standing
	err  error
	kind queue.EnterChallenge
}

func (s store) EnterWithProof(context.Context, string, string, queue.Proof) (queue.Standing, error) {
	return s.st, s.err
}

func (s store) Position(context.Context, string, string) (queue.Standing, error) {
	return s.st, s.err
}

func (s store) Challenge(context.Context, string) (queue.EnterChallenge, int64, error) {
	return s.kind, 1, s.err
}

// limiter allows or refuses every key, or fails.
type limiter struct {
	ok  bool
	err error
}

func (l limiter) Allow(context.Context, string) (bool, time.Duration, error) {
	return l.ok, time.Second, l.err
}

func newService(t *testing.T, s store, limits app.Limits) (*app.Service, *counts) {
	t.Helper()
	svc, m := newServiceWith(t, s, limits, configs{cfgs: map[string]queue.Config{"open-q": openConfig()}})
	signer, err := grant.NewSigner(passKey)
	if err != nil {
		t.Fatal(err)
	}
	return svc.WithPasses(signer), m
}

func newServiceWith(t *testing.T, s store, limits app.Limits, c app.Configs) (*app.Service, *counts) {
	t.Helper()
	signer, err := challenge.NewSigner(challenge.DeriveKey("metrics-test-secret-0123456789abcdef"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := &counts{n: map[string]int{}}
	svc, err := app.New(s, signer, limits, c, m)
	if err != nil {
		t.Fatal(err)
	}
	return svc, m
}

// Every request the service answers is counted once, under the outcome the
// dashboards chart; what the limiters refuse counts as an enter too.
func TestEveryOutcomeIsCountedOnce(t *testing.T) {
	down := fmt.Errorf("enter: %w", queue.ErrUnavailable)
	cases := []struct {
		name  string
		store store
		call  func(context.Context, *app.Service) error
		want  string // what is counted, space-separated; "" when nothing
	}{
		{"enter waiting", store{st: queue.Standing{State: queue.Waiting}}, enter("q1", "ann", ""), "enter/waiting"},
		{"enter admitted", store{st: queue.Standing{State: queue.Admitted}}, enter("q1", "ann", ""), "enter/admitted"},
		{"enter full", store{err: queue.ErrFull}, enter("q1", "ann", ""), "enter/full"},
		{"enter closed", store{err: queue.ErrClosed}, enter("q1", "ann", ""), "enter/closed"},
		{"enter not found", store{err: queue.ErrNotFound}, enter("q1", "ann", ""), "enter/not_found"},
		{"enter unavailable", store{err: down}, enter("q1", "ann", ""), "enter/unavailable"},
		{"enter challenge required", store{err: queue.ErrChallengeRequired}, enter("q1", "ann", ""), "enter/challenge_required"},
		{"enter forged challenge", store{}, enter("q1", "ann", "forged:1"), "enter/challenge_failed"},
		{"enter invalid queue id", store{}, enter("Q1", "ann", ""), "enter/invalid"},
		{"enter invalid user id", store{}, enter("q1", "", ""), "enter/invalid"},
		{"enter other error", store{err: errors.New("boom")}, enter("q1", "ann", ""), "enter/error"},
		{"position waiting", store{st: queue.Standing{State: queue.Waiting}}, position("q1", "ann"), "position/waiting read/store"},
		{"position not in queue", store{st: queue.Standing{State: queue.NotInQueue}}, position("q1", "ann"), "position/not_in_queue read/store"},
		{"position not found", store{err: queue.ErrNotFound}, position("q1", "ann"), "position/not_found read/store"},
		{"position unavailable", store{err: down}, position("q1", "ann"), "position/unavailable read/store"},
		{"position invalid", store{}, position("q1", "bad user"), "position/invalid"},
		{"enter bypass", store{err: down}, enter("open-q", "ann", ""), "enter/bypass"},
		{"position bypass", store{err: down}, position("open-q", "ann"), "position/bypass read/store"},
		{"challenge issued", store{kind: queue.ChallengeProofOfWork}, issue("q1", "ann"), "challenge"},
		{"challenge not asked", store{kind: queue.ChallengeNone}, issue("q1", "ann"), ""},
		{"challenge unavailable", store{err: down}, issue("q1", "ann"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, m := newService(t, tc.store, app.Limits{})
			_ = tc.call(context.Background(), svc)
			want := map[string]int{}
			for _, w := range strings.Fields(tc.want) {
				want[w] = 1
			}
			if !maps.Equal(m.n, want) {
				t.Fatalf("counted %v, want %v", m.n, want)
			}
		})
	}
}

func TestLimitersCountTheirRefusalsAsEnters(t *testing.T) {
	down := fmt.Errorf("rate limit: %w", queue.ErrUnavailable)
	cases := []struct {
		name   string
		limits app.Limits
		allow  func(*app.Service) func(context.Context, string) (bool, time.Duration, error)
		wantOK bool
		want   map[string]int
	}{
		{"enter allowed", app.Limits{Enter: limiter{ok: true}}, allowEnter, true, map[string]int{}},
		{"enter not limited", app.Limits{}, allowEnter, true, map[string]int{}},
		{"enter refused", app.Limits{Enter: limiter{ok: false}}, allowEnter, false, map[string]int{"enter/rate_limited": 1}},
		{"enter limiter down", app.Limits{Enter: limiter{err: down}}, allowEnter, false, map[string]int{"enter/unavailable": 1}},
		// The enter goes on, to answer (and be counted) BYPASS.
		{"enter limiter down, queue fails open", app.Limits{Enter: limiter{err: down}}, allowEnterOpen, true, map[string]int{}},
		{"challenge refused", app.Limits{Challenge: limiter{ok: false}}, allowChallenge, false, map[string]int{}},
		{"challenge not limited", app.Limits{Enter: limiter{ok: false}}, allowChallenge, true, map[string]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, m := newService(t, store{}, tc.limits)
			ok, _, _ := tc.allow(svc)(context.Background(), "192.0.2.1")
			if ok != tc.wantOK {
				t.Fatalf("allowed %v, want %v", ok, tc.wantOK)
			}
			if !maps.Equal(m.n, tc.want) {
				t.Fatalf("counted %v, want %v", m.n, tc.want)
			}
		})
	}
}

func enter(q, user, solution string) func(context.Context, *app.Service) error {
	return func(ctx context.Context, s *app.Service) error {
		_, err := s.Enter(ctx, q, user, solution)
		return err
	}
}

func position(q, user string) func(context.Context, *app.Service) error {
	return func(ctx context.Context, s *app.Service) error {
		_, err := s.Position(ctx, q, user, "")
		return err
	}
}

func issue(q, user string) func(context.Context, *app.Service) error {
	return func(ctx context.Context, s *app.Service) error {
		_, err := s.Challenge(ctx, q, user)
		return err
	}
}

func allowEnter(s *app.Service) func(context.Context, string) (bool, time.Duration, error) {
	return func(ctx context.Context, client string) (bool, time.Duration, error) {
		return s.AllowEnter(ctx, "q1", client)
	}
}

func allowEnterOpen(s *app.Service) func(context.Context, string) (bool, time.Duration, error) {
	return func(ctx context.Context, client string) (bool, time.Duration, error) {
		return s.AllowEnter(ctx, "open-q", client)
	}
}

func allowChallenge(s *app.Service) func(context.Context, string) (bool, time.Duration, error) {
	return s.AllowChallenge
}
