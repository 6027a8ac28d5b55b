package app_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// configs is an app.Configs over a fixed map.
type configs map[string]queue.Config

func (c configs) Get(q string) (queue.Config, bool) {
	cfg, ok := c[q]
	return cfg, ok
}

// openConfig is an OPEN queue that fails OPEN, admitting 40 a second.
func openConfig() queue.Config {
	cfg := queue.DefaultConfig()
	cfg.FailMode = queue.FailOpen
	cfg.AdmissionRatePerSec = 40
	return cfg
}

// TestBypassOnlyWhereTheQueueFailsOpen: with the store down, enter and
// position answer BYPASS (the queue's cached state and rate, no place) for
// a queue known to fail OPEN, and keep the store's error otherwise: a queue
// that fails CLOSED, one not known, one whose start is still ahead, a
// PAUSED one (nobody through), any error that is not an outage; enter on a
// CLOSED queue is queue.ErrClosed, position on it the outage.
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
	cfgs := configs{"open": openConfig(), "closed-state": closedState, "fails-closed": failsClosed,
		"scheduled": scheduled, "started": started, "paused": paused}
	bypass := queue.Standing{State: queue.Bypass, QueueState: queue.Open, ConfiguredRate: 40}
	cases := []struct {
		name    string
		storeEr error
		call    string // enter or position
		q       string
		want    queue.Standing // QueueID filled in below
		wantErr error
	}{
		{"enter open", down, "enter", "open", bypass, nil},
		{"position open", down, "position", "open", bypass, nil},
		{"enter started", down, "enter", "started", bypass, nil},
		{"enter fails closed", down, "enter", "fails-closed", queue.Standing{}, queue.ErrUnavailable},
		{"position fails closed", down, "position", "fails-closed", queue.Standing{}, queue.ErrUnavailable},
		{"enter unknown", down, "enter", "unknown", queue.Standing{}, queue.ErrUnavailable},
		{"enter scheduled", down, "enter", "scheduled", queue.Standing{}, queue.ErrUnavailable},
		{"position scheduled", down, "position", "scheduled", queue.Standing{}, queue.ErrUnavailable},
		{"enter closed state", down, "enter", "closed-state", queue.Standing{}, queue.ErrClosed},
		{"position closed state", down, "position", "closed-state", queue.Standing{}, queue.ErrUnavailable},
		{"enter paused", down, "enter", "paused", queue.Standing{}, queue.ErrUnavailable},
		{"position paused", down, "position", "paused", queue.Standing{}, queue.ErrUnavailable},
		{"enter open, not an outage", queue.ErrFull, "enter", "open", queue.Standing{}, queue.ErrFull},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, m := newServiceWith(t, store{err: tc.storeEr}, app.Limits{}, cfgs)
			var st queue.Standing
			var err error
			if tc.call == "enter" {
				st, err = svc.Enter(context.Background(), tc.q, "ann", "")
			} else {
				st, err = svc.Position(context.Background(), tc.q, "ann", "")
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			want := tc.want
			if want.State != "" {
				want.QueueID = tc.q
			}
			if st != want {
				t.Fatalf("standing %+v, want %+v", st, want)
			}
			if n := m.n[tc.call+"/bypass"]; (n == 1) != (want.State == queue.Bypass) {
				t.Fatalf("counted %v", m.n)
			}
		})
	}
}

// Without configurations (nil), an outage is always the store's error.
func TestNoConfigsNoBypass(t *testing.T) {
	down := fmt.Errorf("enter: %w", queue.ErrUnavailable)
	svc, _ := newServiceWith(t, store{err: down}, app.Limits{}, nil)
	if _, err := svc.Enter(context.Background(), "open", "ann", ""); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("enter: %v, want unavailable", err)
	}
}
