package app_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// sightings records what the Service notes.
type sightings struct{ sent map[string][]string }

func (s *sightings) Saw(q, user string) { s.sent[q] = append(s.sent[q], user) }

// Enters and polls of people in line note them as seen, and bound their
// poll interval, in queues with presence on only; nobody else is noted.
func TestEntersAndPollsAreSightingsWhereThePresenceIsOn(t *testing.T) {
	m := newMemStore()
	on, off := queue.DefaultConfig(), queue.DefaultConfig()
	on.AwayAfterSeconds = 10
	m.configs["on"], m.configs["off"] = on, off
	signer, err := challenge.NewSigner(challenge.DeriveKey("presence-test-secret-0123456789abcdef"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := app.New(m, signer, app.Limits{}, configs{cfgs: map[string]queue.Config{"on": on, "off": off}, up: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &sightings{sent: map[string][]string{}}
	svc.WithPresence(rec)
	ctx := context.Background()

	for _, q := range []string{"on", "off"} {
		st, err := svc.Enter(ctx, q, "ann", "")
		if err != nil || st.State != queue.Waiting {
			t.Fatalf("%s: enter: %+v %v", q, st, err)
		}
		if want := map[string]int64{"on": int64(queue.MaxPollFor(10)), "off": 0}[q]; int64(st.MaxPoll) != want {
			t.Errorf("%s: enter's MaxPoll %v, want %v", q, st.MaxPoll, want)
		}
	}
	// A poll the store answers NOT_IN_QUEUE is nobody's sighting.
	if st, err := svc.Position(ctx, "on", "bob", ""); err != nil || st.State != queue.NotInQueue || st.MaxPoll != 0 {
		t.Fatalf("bob's poll: %+v %v, want NOT_IN_QUEUE without a bound", st, err)
	}
	if !slices.Equal(rec.sent["on"], []string{"ann"}) || len(rec.sent["off"]) != 0 || len(rec.sent) != 1 {
		t.Fatalf("sightings sent: %v, want only ann in the queue with presence on", rec.sent)
	}
}
