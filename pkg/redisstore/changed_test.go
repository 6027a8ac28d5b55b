package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestAnOperatorsChangeIsWrittenWithItsEvent: a change made on an
// operator's behalf puts exactly one QueueChanged in the queue's outbox,
// in the same transaction: the create (no knobs before), each change
// (before and after, the ETag a read answers), none for a change the
// update refused nor for one made without an operator. The event ids
// differ per change, and the relay's decoding gives the contract's
// message.
func TestAnOperatorsChangeIsWrittenWithItsEvent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	q := testenv.ID(t)
	t.Cleanup(func() { _ = s.Purge(ctx, q) })
	ann := queue.Change{Actor: "ann@ops", Address: "203.0.113.7"}
	set := func(by queue.Change, rate float64, refuse error) error {
		_, _, err := s.UpdateConfigBy(ctx, q, by, func(c queue.Config, _ bool) (queue.Config, error) {
			if refuse != nil {
				return c, refuse
			}
			c.AdmissionRatePerSec = rate
			return c, nil
		})
		return err
	}
	if err := set(ann, 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := set(ann, 25, nil); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	if err := set(ann, 99, refused); !errors.Is(err, refused) {
		t.Fatalf("a refused update: %v", err)
	}
	if err := set(queue.Change{}, 30, nil); err != nil {
		t.Fatal(err)
	}

	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadOutboxes(ctx, "test-relay", 100, []queue.OutboxRead{{QueueID: q}})
	if err != nil || len(b) != 1 || b[0].Err != nil {
		t.Fatalf("read outbox: %v %+v", err, b)
	}
	evs := b[0].Events
	if len(evs) != 2 {
		t.Fatalf("%d events in the outbox, want 2 (the create and the change by ann; none refused, none without an operator)", len(evs))
	}
	cur, _, err := s.Config(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*waitingroomv1.QueueChanged
	for _, e := range evs {
		m, key, err := events.FromOutbox(e)
		if err != nil || key != events.RoutingKeyQueueChanged {
			t.Fatalf("decode %+v: %v, routing key %q", e, err, key)
		}
		msgs = append(msgs, m.(*waitingroomv1.QueueChanged))
	}
	rateOf := func(js string) float64 {
		var v struct {
			Rate float64 `json:"admissionRatePerSec"`
		}
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("knobs %q: %v", js, err)
		}
		return v.Rate
	}
	created, changed := msgs[0], msgs[1]
	if created.GetAction() != waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CREATED || created.GetBeforeJson() != "" ||
		rateOf(created.GetAfterJson()) != 10 || created.GetUserId() != "ann@ops" || created.GetClientAddress() != "203.0.113.7" || created.GetQueueId() != q {
		t.Errorf("the create's event: %v", created)
	}
	if changed.GetAction() != waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CONFIGURED ||
		rateOf(changed.GetBeforeJson()) != 10 || rateOf(changed.GetAfterJson()) != 25 || changed.GetOccurredAt() == nil {
		t.Errorf("the change's event: %v", changed)
	}
	if created.GetEventId() == changed.GetEventId() || created.GetEventId() == "" {
		t.Errorf("event ids %q and %q: want two different ones", created.GetEventId(), changed.GetEventId())
	}
	// The last change was made without an operator: the second event's
	// ETag is the version ann made, not the current one.
	var annVersion queue.Config
	if err := json.Unmarshal([]byte(changed.GetAfterJson()), &annVersion); err != nil {
		t.Fatal(err)
	}
	if changed.GetEtag() != annVersion.ETag() || changed.GetEtag() == cur.ETag() {
		t.Errorf("the change's ETag %q: want its own version's %q, not the current %q", changed.GetEtag(), annVersion.ETag(), cur.ETag())
	}
}
