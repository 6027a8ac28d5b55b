package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
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

// TestARefusedChangeIsRecordedOnlyForAQueueThatExists: a refused change of
// an existing queue puts one QueueChanged of outcome REFUSED (who, the
// change asked for, why) in its outbox and changes nothing else; for a
// queue that does not exist nothing is written, not even an outbox key.
func TestARefusedChangeIsRecordedOnlyForAQueueThatExists(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q, missing := testenv.ID(t), testenv.ID(t)+"-none"
	t.Cleanup(func() { _ = s.Purge(ctx, q) })
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	before, _, _ := s.Config(ctx, q)
	bob := queue.Change{Actor: "bob@ops", Address: "198.51.100.9", Asked: `{"admissionRatePerSec": -1}`}
	if ok, err := s.RefuseChange(ctx, q, bob, "validation-failed"); err != nil || !ok {
		t.Fatalf("refusal of an existing queue's change: %v, %v", ok, err)
	}
	if ok, err := s.RefuseChange(ctx, missing, bob, "validation-failed"); err != nil || ok {
		t.Fatalf("refusal for a missing queue: %v, %v; want nothing recorded", ok, err)
	}
	if n := rdb.Exists(ctx, redisstore.KeysFor(missing).Outbox(), redisstore.KeysFor(missing).Config()).Val(); n != 0 {
		t.Fatalf("%d keys of the missing queue exist after its refusal", n)
	}
	after, _, _ := s.Config(ctx, q)
	if after.ETag() != before.ETag() {
		t.Fatal("a refusal changed the queue's knobs")
	}
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadOutboxes(ctx, "test-relay", 100, []queue.OutboxRead{{QueueID: q}})
	if err != nil || len(b) != 1 || len(b[0].Events) != 1 {
		t.Fatalf("outbox: %v %+v; want the one refusal", err, b)
	}
	m, _, err := events.FromOutbox(b[0].Events[0])
	if err != nil {
		t.Fatal(err)
	}
	got := m.(*waitingroomv1.QueueChanged)
	if got.GetOutcome() != waitingroomv1.QueueChangeOutcome_QUEUE_CHANGE_OUTCOME_REFUSED || got.GetRefusal() != "validation-failed" ||
		got.GetUserId() != "bob@ops" || got.GetAfterJson() != bob.Asked || got.GetBeforeJson() != "" || got.GetQueueId() != q {
		t.Errorf("the refusal's event: %v", got)
	}
}

// TestAnOperatorsCloseIsWrittenWithItsEvent: closing a queue with three
// people waiting on an operator's behalf writes one QueueChanged of action
// CLOSED (the state before, three dropped) with the close; a close by the
// system writes none.
func TestAnOperatorsCloseIsWrittenWithItsEvent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	q, other := testenv.ID(t), testenv.ID(t)+"-sys"
	t.Cleanup(func() { _ = s.Purge(ctx, q); _ = s.Purge(ctx, other) })
	for _, id := range []string{q, other} {
		if _, _, err := s.UpdateConfig(ctx, id, func(c queue.Config, _ bool) (queue.Config, error) {
			c.State = queue.Paused
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := s.Enter(ctx, id, fmt.Sprintf("u%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := s.CloseBy(ctx, q, queue.Change{Actor: "ann@ops", Address: "203.0.113.7"}); err != nil || n != 3 {
		t.Fatalf("close: %d dropped, %v; want 3", n, err)
	}
	if n, err := s.Close(ctx, other); err != nil || n != 3 {
		t.Fatalf("the system's close: %d, %v", n, err)
	}
	read := func(id string) []queue.Event {
		if err := s.EnsureOutboxGroup(ctx, id); err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadOutboxes(ctx, "test-relay", 100, []queue.OutboxRead{{QueueID: id}})
		if err != nil || len(b) != 1 {
			t.Fatalf("outbox of %s: %v", id, err)
		}
		return b[0].Events
	}
	if evs := read(other); len(evs) != 0 {
		t.Fatalf("the system's close wrote %d events, want 0", len(evs))
	}
	evs := read(q)
	if len(evs) != 1 {
		t.Fatalf("%d events, want the close's 1", len(evs))
	}
	m, _, err := events.FromOutbox(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	got := m.(*waitingroomv1.QueueChanged)
	if got.GetAction() != waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CLOSED || got.GetUserId() != "ann@ops" ||
		got.GetBeforeJson() != `{"state":"PAUSED"}` || got.GetOutcome() != waitingroomv1.QueueChangeOutcome_QUEUE_CHANGE_OUTCOME_APPLIED {
		t.Errorf("the close's event: %v", got)
	}
	var after struct {
		State   string `json:"state"`
		Dropped int    `json:"dropped"`
	}
	if err := json.Unmarshal([]byte(got.GetAfterJson()), &after); err != nil || after.State != "CLOSED" || after.Dropped != 3 {
		t.Errorf("after %q: %+v, %v; want CLOSED with 3 dropped", got.GetAfterJson(), after, err)
	}
}

// TestAnOperatorsWordingIsWrittenWithItsEvent: setting and removing a
// queue's wording on an operator's behalf writes one QueueChanged (action
// WORDED) each, with the language's wording before and after; without an
// operator, none.
func TestAnOperatorsWordingIsWrittenWithItsEvent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	q := testenv.ID(t)
	t.Cleanup(func() { _ = s.Purge(ctx, q) })
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	ann := queue.Change{Actor: "ann@ops", Address: "203.0.113.7"}
	de := []byte(`{"page.heading":"Frühjahrsaktion"}`)
	if _, err := s.PutTexts(ctx, q, "de", de, ann); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutTexts(ctx, q, "fr", []byte(`{"page.heading":"Soldes"}`), queue.Change{}); err != nil {
		t.Fatal(err)
	}
	if had, err := s.DeleteTexts(ctx, q, "de", ann); err != nil || !had {
		t.Fatalf("delete: %v %v", had, err)
	}
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadOutboxes(ctx, "test-relay", 100, []queue.OutboxRead{{QueueID: q}})
	if err != nil || len(b) != 1 || len(b[0].Events) != 2 {
		t.Fatalf("outbox: %v, %+v; want the 2 changes by ann", err, b)
	}
	want := [][2]string{
		{`{"lang":"de","texts":null}`, `{"lang":"de","texts":{"page.heading":"Frühjahrsaktion"}}`},
		{`{"lang":"de","texts":{"page.heading":"Frühjahrsaktion"}}`, `{"lang":"de","texts":null}`},
	}
	ids := map[string]bool{}
	for i, e := range b[0].Events {
		m, _, err := events.FromOutbox(e)
		if err != nil {
			t.Fatal(err)
		}
		got := m.(*waitingroomv1.QueueChanged)
		if got.GetAction() != waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_WORDED || got.GetUserId() != "ann@ops" ||
			got.GetBeforeJson() != want[i][0] || got.GetAfterJson() != want[i][1] || !json.Valid([]byte(got.GetAfterJson())) {
			t.Errorf("wording change %d: %v; want %s -> %s", i, got, want[i][0], want[i][1])
		}
		ids[got.GetEventId()] = true
	}
	if len(ids) != 2 {
		t.Errorf("event ids %v: want two different", ids)
	}
}
