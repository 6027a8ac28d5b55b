package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// configs is an app.Configs over a fixed map, whose probe finds Redis
// down unless up.
type configs struct {
	cfgs map[string]queue.Config
	up   bool
}

func (c configs) Get(q string) (queue.Config, bool) {
	cfg, ok := c.cfgs[q]
	return cfg, ok
}

func (c configs) Reachable() bool { return c.up }

// passKey signs the passes in these tests.
var passKey = []byte("bypass-test-pass-key-0123456789abcdef")

// withPasses is newServiceWith giving passes signed with passKey.
func withPasses(t *testing.T, s store, c app.Configs) (*app.Service, *counts, *grant.Signer) {
	t.Helper()
	svc, m := newServiceWith(t, s, app.Limits{}, c)
	signer, err := grant.NewSigner(passKey)
	if err != nil {
		t.Fatal(err)
	}
	return svc.WithPasses(signer), m, signer
}

// openConfig is an OPEN queue that fails OPEN, admitting 40 a second.
func openConfig() queue.Config {
	cfg := queue.DefaultConfig()
	cfg.FailMode = queue.FailOpen
	cfg.AdmissionRatePerSec = 40
	return cfg
}

// TestBypassOnlyWhereTheQueueFailsOpen: with the store down and the probe
// finding Redis down, enter and position answer BYPASS (the queue's cached
// state and rate, no place) with a pass the order-service accepts for a
// queue known to fail OPEN, and keep the store's error otherwise: a queue
// that fails CLOSED, one not known, one whose start is still ahead, a
// PAUSED one (nobody through), any error that is not an outage, and an
// outage of one request while the probe finds Redis up (a slow reply, a
// pool used up by load: the finding where a flood of the public view made
// the gateway bypass); enter on a CLOSED queue is queue.ErrClosed,
// position on it the outage. A proof-of-work queue gives a pass only to an
// enter with a valid solution.
func TestBypassOnlyWhereTheQueueFailsOpen(t *testing.T) {
	down := fmt.Errorf("enter: %w", queue.ErrUnavailable)
	closedState := openConfig()
	closedState.State = queue.Closed
	failsClosed := openConfig()
	failsClosed.FailMode = queue.FailClosed
	scheduled := openConfig()
	scheduled.StartsAt = time.Now().Add(time.Hour)
	paused := openConfig()
	paused.State = queue.Paused
	started := openConfig()
	started.StartsAt = time.Now().Add(-time.Hour)
	pow := openConfig()
	pow.EnterChallenge, pow.PowDifficultyBits = queue.ChallengeProofOfWork, 4
	cached := map[string]queue.Config{"open": openConfig(), "closed-state": closedState, "fails-closed": failsClosed,
		"scheduled": scheduled, "started": started, "paused": paused, "pow": pow}
	bypass := queue.Standing{State: queue.Bypass, QueueState: queue.Open, ConfiguredRate: 40}
	cases := []struct {
		name    string
		storeEr error
		probeUp bool
		call    string // enter, enter-solved or position
		q       string
		want    queue.Standing // QueueID filled in below
		wantErr error
	}{
		{"enter open", down, false, "enter", "open", bypass, nil},
		{"position open", down, false, "position", "open", bypass, nil},
		{"enter started", down, false, "enter", "started", bypass, nil},
		{"enter open, probe finds Redis up", down, true, "enter", "open", queue.Standing{}, queue.ErrUnavailable},
		{"position open, probe finds Redis up", down, true, "position", "open", queue.Standing{}, queue.ErrUnavailable},
		{"enter fails closed", down, false, "enter", "fails-closed", queue.Standing{}, queue.ErrUnavailable},
		{"position fails closed", down, false, "position", "fails-closed", queue.Standing{}, queue.ErrUnavailable},
		{"enter unknown", down, false, "enter", "unknown", queue.Standing{}, queue.ErrUnavailable},
		{"enter scheduled", down, false, "enter", "scheduled", queue.Standing{}, queue.ErrUnavailable},
		{"position scheduled", down, false, "position", "scheduled", queue.Standing{}, queue.ErrUnavailable},
		{"enter closed state", down, false, "enter", "closed-state", queue.Standing{}, queue.ErrClosed},
		{"position closed state", down, false, "position", "closed-state", queue.Standing{}, queue.ErrUnavailable},
		{"enter paused", down, false, "enter", "paused", queue.Standing{}, queue.ErrUnavailable},
		{"position paused", down, false, "position", "paused", queue.Standing{}, queue.ErrUnavailable},
		{"enter proof of work, no solution", down, false, "enter", "pow", queue.Standing{}, queue.ErrChallengeRequired},
		{"position proof of work", down, false, "position", "pow", queue.Standing{}, queue.ErrUnavailable},
		{"enter proof of work, solved", down, false, "enter-solved", "pow", bypass, nil},
		{"enter open, not an outage", queue.ErrFull, false, "enter", "open", queue.Standing{}, queue.ErrFull},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, m, passes := withPasses(t, store{err: tc.storeEr}, configs{cfgs: cached, up: tc.probeUp})
			var st queue.Standing
			var err error
			switch tc.call {
			case "enter":
				st, err = svc.Enter(context.Background(), tc.q, "ann", "")
			case "enter-solved":
				ch, cerr := svc.Challenge(context.Background(), tc.q, "ann")
				if cerr != nil {
					t.Fatal(cerr)
				}
				st, err = svc.Enter(context.Background(), tc.q, "ann", ch.Value+":"+challenge.Solve(ch.Value, ch.Bits))
			default:
				st, err = svc.Position(context.Background(), tc.q, "ann", "")
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			want := tc.want
			if want.State != "" {
				want.QueueID = tc.q
				if st.Token == nil {
					t.Fatal("a BYPASS standing without a pass")
				}
				if v, err := passes.Check(tc.q, st.Token.Secret); err != nil || v.TokenID != st.Token.ID {
					t.Fatalf("the pass checks as %+v %v, want token id %s", v, err, st.Token.ID)
				}
				st.Token = nil
			}
			if st != want {
				t.Fatalf("standing %+v, want %+v", st, want)
			}
			if n := m.n[strings.TrimSuffix(tc.call, "-solved")+"/bypass"]; (n == 1) != (want.State == queue.Bypass) {
				t.Fatalf("counted %v", m.n)
			}
		})
	}
}

// TestPassesHeldToTheAdmissionRate: at 5/s a replica gives 2 passes at
// once (a tenth of a second, plus one); 20 people at once: 2 BYPASS with a
// pass, 18 unavailable (503, Retry-After); a person asking again gets the
// same pass without using the rate.
func TestPassesHeldToTheAdmissionRate(t *testing.T) {
	cfg := openConfig()
	cfg.AdmissionRatePerSec = 5
	down := fmt.Errorf("enter: %w", queue.ErrUnavailable)
	svc, _, _ := withPasses(t, store{err: down}, configs{cfgs: map[string]queue.Config{"sale": cfg}})
	passes, refused := map[string]string{}, 0
	for i := range 20 {
		user := fmt.Sprintf("u%02d", i)
		st, err := svc.Enter(context.Background(), "sale", user, "")
		switch {
		case errors.Is(err, queue.ErrUnavailable):
			refused++
		case err != nil || st.Token == nil:
			t.Fatalf("%s: %+v %v", user, st, err)
		default:
			passes[user] = st.Token.Secret
		}
	}
	if len(passes) < 2 || len(passes) > 3 || len(passes)+refused != 20 {
		t.Fatalf("%d passes and %d refused of 20, want 2 (3 if a refill came) and the rest refused", len(passes), refused)
	}
	for user, secret := range passes {
		st, err := svc.Position(context.Background(), "sale", user, "")
		if err != nil || st.Token == nil || st.Token.Secret != secret {
			t.Fatalf("%s asking again: %+v %v, want the same pass", user, st, err)
		}
	}
}

// Without configurations (nil) or without passes, an outage is always the
// store's error.
func TestNoConfigsNoBypass(t *testing.T) {
	down := fmt.Errorf("enter: %w", queue.ErrUnavailable)
	svc, _ := newServiceWith(t, store{err: down}, app.Limits{}, nil)
	if _, err := svc.Enter(context.Background(), "open", "ann", ""); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("enter: %v, want unavailable", err)
	}
	svc, _ = newServiceWith(t, store{err: down}, app.Limits{}, configs{cfgs: map[string]queue.Config{"open": openConfig()}})
	if _, err := svc.Enter(context.Background(), "open", "ann", ""); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("enter without passes: %v, want unavailable", err)
	}
}
