package events_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

func TestConstants(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{events.ExchangeName, "waitingroom.events"},
		{events.RoutingKeyTokenIssued, "token.issued"},
		{events.RoutingKeyTokensIssued, "tokens.issued"},
		{events.RoutingKeyTokenRestored, "token.restored"},
		{events.RoutingKeyTokenExpired, "token.expired"},
		{events.RoutingKeyOrderCreated, "order.created"},
		{events.RoutingKeyOrderFailed, "order.failed"},
		{events.RoutingKeyQueueStarted, "queue.started"},
		{events.RoutingKeyQueueDrawn, "queue.drawn"},
		{events.RoutingKeyOrderHealth, "order.health"},
		{events.RoutingKeyUserAbandoned, "user.abandoned"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestTypeNameAndRoutingKey(t *testing.T) {
	for _, tc := range []struct {
		msg      proto.Message
		typeName string
		key      string
	}{
		{&v1.TokenIssued{}, "waitingroom.v1.TokenIssued", "token.issued"},
		{&v1.TokensIssued{}, "waitingroom.v1.TokensIssued", "tokens.issued"},
		{&v1.TokenRestored{}, "waitingroom.v1.TokenRestored", "token.restored"},
		{&v1.TokenExpired{}, "waitingroom.v1.TokenExpired", "token.expired"},
		{&v1.OrderCreated{}, "waitingroom.v1.OrderCreated", "order.created"},
		{&v1.OrderFailed{}, "waitingroom.v1.OrderFailed", "order.failed"},
		{&v1.QueueStarted{}, "waitingroom.v1.QueueStarted", "queue.started"},
		{&v1.QueueDrawn{}, "waitingroom.v1.QueueDrawn", "queue.drawn"},
		{&v1.OrderHealth{}, "waitingroom.v1.OrderHealth", "order.health"},
		{&v1.UserAbandoned{}, "waitingroom.v1.UserAbandoned", "user.abandoned"},
		// A typed nil still has a type: publishers may pass one to look up a key.
		{(*v1.OrderFailed)(nil), "waitingroom.v1.OrderFailed", "order.failed"},
	} {
		t.Run(tc.typeName, func(t *testing.T) {
			if got := events.TypeName(tc.msg); got != tc.typeName {
				t.Errorf("TypeName = %q, want %q", got, tc.typeName)
			}
			key, err := events.RoutingKey(tc.msg)
			if err != nil || key != tc.key {
				t.Errorf("RoutingKey = %q, %v; want %q, nil", key, err, tc.key)
			}
		})
	}
}

func TestRoutingKeyUnknown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		msg      proto.Message
		typeName string
		err      string
	}{
		{"nil", nil, "", `events: unknown event type: ""`},
		{"not an event", timestamppb.Now(), "google.protobuf.Timestamp", `events: unknown event type: "google.protobuf.Timestamp"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := events.TypeName(tc.msg); got != tc.typeName {
				t.Errorf("TypeName = %q, want %q", got, tc.typeName)
			}
			key, err := events.RoutingKey(tc.msg)
			if key != "" || !errors.Is(err, events.ErrUnknownType) || err.Error() != tc.err {
				t.Errorf("RoutingKey = %q, %v; want \"\", %s", key, err, tc.err)
			}
		})
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 11, 27, 9, 0, 0, 123e6, time.UTC))
	later := timestamppb.New(time.Date(2026, 11, 27, 9, 5, 0, 0, time.UTC))
	for _, msg := range []proto.Message{
		&v1.TokenIssued{
			EventId: "t1.issued", OccurredAt: at, QueueId: "sale", UserId: "u1",
			TokenId: "t1", ActivateAt: at, ExpiresAt: later, Sequence: 42,
		},
		&v1.TokensIssued{
			EventId: "t1.issued.batch", OccurredAt: at, QueueId: "sale",
			Tokens: []*v1.TokenIssued{
				{EventId: "t1.issued", OccurredAt: at, QueueId: "sale", UserId: "u1", TokenId: "t1", ActivateAt: at, ExpiresAt: later, Sequence: 42},
				{EventId: "t2.issued", OccurredAt: at, QueueId: "sale", UserId: "u2", TokenId: "t2", ActivateAt: at, ExpiresAt: later, Sequence: 45},
			},
		},
		&v1.TokenRestored{
			EventId: "t1.restored.o1", OccurredAt: at, QueueId: "sale", UserId: "u1",
			TokenId: "t1", ExpiresAt: later, OrderId: "o1", RemainingTtlMs: 299877,
		},
		&v1.TokenExpired{
			EventId: "t1.expired", OccurredAt: later, QueueId: "sale", UserId: "u1",
			TokenId: "t1", Reason: v1.TokenExpiredReason_TOKEN_EXPIRED_REASON_RESTORE_TOO_LATE,
		},
		&v1.OrderCreated{
			EventId: "o1.created", OccurredAt: at, QueueId: "sale", UserId: "u1",
			OrderId: "o1", TokenId: "t1", ProductId: "sku-1", Quantity: 2,
		},
		&v1.OrderFailed{
			EventId: "o1.failed", OccurredAt: at, QueueId: "sale", UserId: "u1",
			TokenId: "t1", OrderId: "o1", Reason: v1.OrderFailureReason_ORDER_FAILURE_REASON_ABANDONED,
			Restorable: true, RemainingTtlMs: 299877,
		},
		&v1.QueueStarted{
			EventId: "sale.started", OccurredAt: at, QueueId: "sale",
			StartsAt: at, SeedSha256: strings.Repeat("5e", 32), PreQueued: 2000,
		},
		&v1.QueueDrawn{
			EventId: "sale.drawn", OccurredAt: later, QueueId: "sale",
			Seed: strings.Repeat("ab", 32), SeedSha256: strings.Repeat("5e", 32),
			PreQueued: 2000, Placed: 1987, FirstSequence: 5001, LastSequence: 7000,
		},
		&v1.OrderHealth{
			EventId: "sale.health.order-service-7f9c.1795770000123", OccurredAt: at, QueueId: "sale",
			Source: "order-service-7f9c", IntervalMs: 1000, Orders: 180, Created: 171, P95Ms: 212,
			Unavailable: 3, OutboxBacklog: 40,
		},
		&v1.UserAbandoned{
			EventId: "sale:42.abandoned", OccurredAt: later, QueueId: "sale", UserId: "u1",
			Sequence: 42, Reason: v1.UserAbandonedReason_USER_ABANDONED_REASON_AWAY,
		},
	} {
		name := events.TypeName(msg)
		t.Run(name, func(t *testing.T) {
			body, err := proto.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := events.Decode(name, body)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !proto.Equal(got, msg) {
				t.Errorf("Decode = %v, want %v", got, msg)
			}
		})
	}
}

func TestDecodeConcreteType(t *testing.T) {
	got, err := events.Decode("waitingroom.v1.TokenIssued", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.(*v1.TokenIssued); !ok {
		t.Errorf("Decode returned %T, want *waitingroomv1.TokenIssued", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		typeName string
		body     []byte
		unknown  bool // wraps ErrUnknownType, else proto.Error
		err      string
	}{
		{"empty type", "", nil, true, `events: unknown event type: ""`},
		{"short name", "TokenIssued", nil, true, `events: unknown event type: "TokenIssued"`},
		{"other version", "waitingroom.v2.TokenIssued", nil, true, `events: unknown event type: "waitingroom.v2.TokenIssued"`},
		// Registered with protobuf, but not an event.
		{"well-known type", "google.protobuf.Timestamp", nil, true, `events: unknown event type: "google.protobuf.Timestamp"`},
		// A varint whose continuation bit promises a byte that never comes.
		// The protobuf runtime varies the spacing of its messages on purpose
		// (so nobody matches them), hence only our prefix is compared.
		{"truncated body", "waitingroom.v1.OrderFailed", []byte{0x40, 0xff}, false, "events: decode waitingroom.v1.OrderFailed: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := events.Decode(tc.typeName, tc.body)
			if m != nil || err == nil {
				t.Fatalf("Decode = %v, %v; want an error", m, err)
			}
			if errors.Is(err, events.ErrUnknownType) != tc.unknown {
				t.Errorf("errors.Is(%v, ErrUnknownType) = %v, want %v", err, !tc.unknown, tc.unknown)
			}
			if tc.unknown {
				if err.Error() != tc.err {
					t.Errorf("error = %q, want %q", err, tc.err)
				}
				return
			}
			if !errors.Is(err, proto.Error) || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("error = %q, want a proto.Error prefixed %q", err, tc.err)
			}
		})
	}
}

// TestEveryMessageIsRegistered catches a message added to events.proto
// without a routing key in events.go.
func TestEveryMessageIsRegistered(t *testing.T) {
	msgs := v1.File_waitingroom_v1_events_proto.Messages()
	if msgs.Len() != 12 {
		t.Errorf("events.proto has %d messages, want 12: update this test and docs/EVENTS.md", msgs.Len())
	}
	keys := make(map[string]string)
	for i := range msgs.Len() {
		name := string(msgs.Get(i).FullName())
		m, err := events.Decode(name, nil)
		if err != nil {
			t.Errorf("Decode(%q): %v", name, err)
			continue
		}
		key, err := events.RoutingKey(m)
		if err != nil {
			t.Errorf("RoutingKey(%s): %v", name, err)
			continue
		}
		if other, dup := keys[key]; dup {
			t.Errorf("%s and %s share routing key %q", other, name, key)
		}
		keys[key] = name
	}
	if len(keys) != 12 {
		t.Errorf("%d distinct routing keys, want 12", len(keys))
	}
}
