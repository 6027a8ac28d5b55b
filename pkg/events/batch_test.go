package events

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// issuedEntries is three admissions of queue q in the order they were
// admitted, each issued a little after the one before.
func issuedEntries(at time.Time) []queue.Event {
	return []queue.Event{
		{Type: queue.EventTokenIssued, ID: "t1.issued", QueueID: "q", UserID: "u1", TokenID: "t1", Seq: 7,
			ActivateAt: at.Add(time.Second), ExpiresAt: at.Add(time.Minute), OccurredAt: at},
		{Type: queue.EventTokenIssued, ID: "t2.issued", QueueID: "q", UserID: "u2", TokenID: "t2", Seq: 9,
			ActivateAt: at.Add(2 * time.Second), ExpiresAt: at.Add(time.Minute + time.Millisecond), OccurredAt: at.Add(time.Millisecond)},
		{Type: queue.EventTokenIssued, ID: "t3.issued", QueueID: "q", UserID: "u3", TokenID: "t3", Seq: 12,
			ActivateAt: at.Add(3 * time.Second), ExpiresAt: at.Add(time.Minute + 2*time.Millisecond), OccurredAt: at.Add(2 * time.Millisecond)},
	}
}

func TestTokensIssuedFromOutbox(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	evs := issuedEntries(at)
	m, key, err := TokensIssuedFromOutbox(evs)
	if err != nil {
		t.Fatalf("TokensIssuedFromOutbox: %v", err)
	}
	if key != "tokens.issued" {
		t.Errorf("routing key %q, want tokens.issued", key)
	}
	if rk, err := RoutingKey(m); rk != key || err != nil {
		t.Errorf("registry routing key %q, %v; want %q", rk, err, key)
	}
	if got := TypeName(m); got != "waitingroom.v1.TokensIssued" {
		t.Errorf("TypeName = %q, want waitingroom.v1.TokensIssued", got)
	}
	want := &waitingroomv1.TokensIssued{EventId: "t1.issued.batch", OccurredAt: ts(at), QueueId: "q",
		Tokens: []*waitingroomv1.TokenIssued{
			{EventId: "t1.issued", OccurredAt: ts(at), QueueId: "q", UserId: "u1", TokenId: "t1",
				ActivateAt: ts(at.Add(time.Second)), ExpiresAt: ts(at.Add(time.Minute)), Sequence: 7},
			{EventId: "t2.issued", OccurredAt: ts(at.Add(time.Millisecond)), QueueId: "q", UserId: "u2", TokenId: "t2",
				ActivateAt: ts(at.Add(2 * time.Second)), ExpiresAt: ts(at.Add(time.Minute + time.Millisecond)), Sequence: 9},
			{EventId: "t3.issued", OccurredAt: ts(at.Add(2 * time.Millisecond)), QueueId: "q", UserId: "u3", TokenId: "t3",
				ActivateAt: ts(at.Add(3 * time.Second)), ExpiresAt: ts(at.Add(time.Minute + 2*time.Millisecond)), Sequence: 12},
		}}
	if !proto.Equal(m, want) {
		t.Errorf("TokensIssuedFromOutbox = %v, want %v", m, want)
	}
	// The message's own fields through the getters a consumer uses: the
	// first token's id and time, not the last's.
	if m.GetEventId() != "t1.issued.batch" || m.GetQueueId() != "q" || !m.GetOccurredAt().AsTime().Equal(at) || len(m.GetTokens()) != 3 {
		t.Errorf("TokensIssued = %q %q %v %d tokens; want t1.issued.batch q %v 3", m.GetEventId(), m.GetQueueId(),
			m.GetOccurredAt().AsTime(), len(m.GetTokens()), at)
	}
	// Each token is exactly the TokenIssued the person gets without batch,
	// in the order given.
	for i, e := range evs {
		one, oneKey, err := FromOutbox(e)
		if err != nil || oneKey != RoutingKeyTokenIssued {
			t.Fatalf("FromOutbox(%s) = %q, %v", e.ID, oneKey, err)
		}
		if got := m.GetTokens()[i]; !proto.Equal(got, one) {
			t.Errorf("token %d = %v, want FromOutbox's %v", i, got, one)
		}
	}
	for i, id := range []string{"t1.issued", "t2.issued", "t3.issued"} {
		if got := m.GetTokens()[i].GetEventId(); got != id {
			t.Errorf("token %d event id %q, want %q", i, got, id)
		}
	}

	// One token is a batch of one, with the same rules.
	m, key, err = TokensIssuedFromOutbox(evs[1:2])
	if err != nil || key != RoutingKeyTokensIssued || m.GetEventId() != "t2.issued.batch" || len(m.GetTokens()) != 1 ||
		!proto.Equal(m.GetTokens()[0], want.GetTokens()[1]) || !m.GetOccurredAt().AsTime().Equal(at.Add(time.Millisecond)) {
		t.Errorf("TokensIssuedFromOutbox(one) = %v %q %v; want t2.issued.batch with t2 only", m, key, err)
	}

	// The message survives the wire as it is.
	body, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode("waitingroom.v1.TokensIssued", body)
	if err != nil || !proto.Equal(back, want) {
		t.Errorf("Decode = %v, %v; want %v", back, err, want)
	}
}

func TestTokensIssuedFromOutboxRefuses(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	evs := issuedEntries(at)
	expired := queue.Event{Type: queue.EventTokenExpired, ID: "t0.expired", QueueID: "q", UserID: "u0", TokenID: "t0",
		Reason: "NO_SHOW", OccurredAt: at}
	other := evs[2]
	other.QueueID = "r"
	for _, tc := range []struct {
		name    string
		in      []queue.Event
		unknown bool // wraps ErrUnknownType
		err     string
	}{
		{"nil", nil, false, "events: a TokensIssued of no token"},
		{"empty", []queue.Event{}, false, "events: a TokensIssued of no token"},
		{"a TokenExpired among them", []queue.Event{evs[0], expired, evs[1]}, true,
			`events: unknown event type: a TokenExpired of queue "q" in a TokensIssued of queue "q"`},
		{"a TokenExpired first", []queue.Event{expired, evs[0]}, true,
			`events: unknown event type: a TokenExpired of queue "q" in a TokensIssued of queue "q"`},
		{"two queues", []queue.Event{evs[0], evs[1], other}, true,
			`events: unknown event type: a TokenIssued of queue "r" in a TokensIssued of queue "q"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, key, err := TokensIssuedFromOutbox(tc.in)
			if m != nil || key != "" || err == nil {
				t.Fatalf("TokensIssuedFromOutbox = %v %q %v; want nil \"\" and an error", m, key, err)
			}
			if err.Error() != tc.err {
				t.Errorf("error %q, want %q", err, tc.err)
			}
			if errors.Is(err, ErrUnknownType) != tc.unknown {
				t.Errorf("errors.Is(%v, ErrUnknownType) = %v, want %v", err, !tc.unknown, tc.unknown)
			}
		})
	}
	// The entries given are left as they were.
	if evs[2].QueueID != "q" || len(evs) != 3 {
		t.Errorf("entries changed: %v", evs)
	}
}
