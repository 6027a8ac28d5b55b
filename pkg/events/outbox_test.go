package events

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

func TestFromOutbox(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	seed := strings.Repeat("ab", queue.DrawSeedBytes)
	sha, err := queue.SeedSHA256(seed)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   queue.Event
		key  string
		want proto.Message
	}{
		{
			queue.Event{Type: "TokenIssued", ID: "t1.issued", QueueID: "q", UserID: "u", TokenID: "t1", Seq: 7,
				ActivateAt: at.Add(time.Second), ExpiresAt: at.Add(time.Minute), OccurredAt: at},
			RoutingKeyTokenIssued,
			&waitingroomv1.TokenIssued{EventId: "t1.issued", OccurredAt: ts(at), QueueId: "q", UserId: "u", TokenId: "t1",
				ActivateAt: ts(at.Add(time.Second)), ExpiresAt: ts(at.Add(time.Minute)), Sequence: 7},
		},
		{
			queue.Event{Type: "TokenRestored", ID: "t1.restored.o1", QueueID: "q", UserID: "u", TokenID: "t1", OrderID: "o1",
				ExpiresAt: at.Add(time.Minute), RemainingTTL: 42 * time.Second, OccurredAt: at},
			RoutingKeyTokenRestored,
			&waitingroomv1.TokenRestored{EventId: "t1.restored.o1", OccurredAt: ts(at), QueueId: "q", UserId: "u", TokenId: "t1",
				ExpiresAt: ts(at.Add(time.Minute)), OrderId: "o1", RemainingTtlMs: 42_000},
		},
		{
			queue.Event{Type: "TokenExpired", ID: "t1.expired", QueueID: "q", UserID: "u", TokenID: "t1", Reason: "NO_SHOW", OccurredAt: at},
			RoutingKeyTokenExpired,
			&waitingroomv1.TokenExpired{EventId: "t1.expired", OccurredAt: ts(at), QueueId: "q", UserId: "u", TokenId: "t1",
				Reason: waitingroomv1.TokenExpiredReason_TOKEN_EXPIRED_REASON_NO_SHOW},
		},
		{
			queue.Event{Type: "TokenExpired", ID: "t2.expired", Reason: "RESTORE_TOO_LATE", OccurredAt: at},
			RoutingKeyTokenExpired,
			&waitingroomv1.TokenExpired{EventId: "t2.expired", OccurredAt: ts(at),
				Reason: waitingroomv1.TokenExpiredReason_TOKEN_EXPIRED_REASON_RESTORE_TOO_LATE},
		},
		// The queue-level events leave user_id empty even if an entry had
		// one: they are nobody's.
		{
			queue.Event{Type: "QueueStarted", ID: "q.started.1", QueueID: "q", UserID: "u", StartsAt: at.Add(-time.Second),
				SeedSHA256: sha, PreQueued: 2000, OccurredAt: at},
			RoutingKeyQueueStarted,
			&waitingroomv1.QueueStarted{EventId: "q.started.1", OccurredAt: ts(at), QueueId: "q",
				StartsAt: ts(at.Add(-time.Second)), SeedSha256: sha, PreQueued: 2000},
		},
		{
			queue.Event{Type: "QueueDrawn", ID: "q.drawn.1", QueueID: "q", UserID: "u", Seed: seed, SeedSHA256: sha,
				PreQueued: 2000, Placed: 1987, FirstSeq: 5001, LastSeq: 7000, OccurredAt: at.Add(3 * time.Second)},
			RoutingKeyQueueDrawn,
			&waitingroomv1.QueueDrawn{EventId: "q.drawn.1", OccurredAt: ts(at.Add(3 * time.Second)), QueueId: "q",
				Seed: seed, SeedSha256: sha, PreQueued: 2000, Placed: 1987, FirstSequence: 5001, LastSequence: 7000},
		},
		// A draw that placed nobody, and a negative figure the store never
		// writes: 0, not a wrapped uint64.
		{
			queue.Event{Type: "QueueDrawn", ID: "q.drawn.2", QueueID: "q", Seed: seed, SeedSHA256: sha,
				PreQueued: 0, Placed: 0, FirstSeq: -1, LastSeq: 0, OccurredAt: at},
			RoutingKeyQueueDrawn,
			&waitingroomv1.QueueDrawn{EventId: "q.drawn.2", OccurredAt: ts(at), QueueId: "q", Seed: seed, SeedSha256: sha},
		},
		// A person away past the grace, removed from the line (issue.lua:
		// eid <line>:<seq>.abandoned, reason AWAY).
		{
			queue.Event{Type: "UserAbandoned", ID: "q:42.abandoned", QueueID: "q", UserID: "u", Seq: 42, Reason: "AWAY", OccurredAt: at},
			RoutingKeyUserAbandoned,
			&waitingroomv1.UserAbandoned{EventId: "q:42.abandoned", OccurredAt: ts(at), QueueId: "q", UserId: "u", Sequence: 42,
				Reason: waitingroomv1.UserAbandonedReason_USER_ABANDONED_REASON_AWAY},
		},
		// A reason this build does not know (a newer store), or none:
		// UNSPECIFIED, the person removed all the same.
		{
			queue.Event{Type: "UserAbandoned", ID: "q:43.abandoned", QueueID: "q", UserID: "v", Seq: 43, Reason: "BANNED", OccurredAt: at},
			RoutingKeyUserAbandoned,
			&waitingroomv1.UserAbandoned{EventId: "q:43.abandoned", OccurredAt: ts(at), QueueId: "q", UserId: "v", Sequence: 43,
				Reason: waitingroomv1.UserAbandonedReason_USER_ABANDONED_REASON_UNSPECIFIED},
		},
		{
			queue.Event{Type: "UserAbandoned", ID: "q:44.abandoned", QueueID: "q", UserID: "w", Seq: 44, OccurredAt: at},
			RoutingKeyUserAbandoned,
			&waitingroomv1.UserAbandoned{EventId: "q:44.abandoned", OccurredAt: ts(at), QueueId: "q", UserId: "w", Sequence: 44},
		},
	}
	if len(tests) != 10 {
		t.Fatalf("%d cases, want 10", len(tests))
	}
	for _, tt := range tests {
		got, key, err := FromOutbox(tt.in)
		if err != nil || key != tt.key || !proto.Equal(got, tt.want) {
			t.Errorf("FromOutbox(%s) = %v %q %v; want %v %q", tt.in.Type, got, key, err, tt.want, tt.key)
		}
	}
	// proto.Equal above compares every field; spell out the draw's figures
	// once more through the getters a consumer uses.
	m, _, err := FromOutbox(tests[5].in)
	d, ok := m.(*waitingroomv1.QueueDrawn)
	if err != nil || !ok {
		t.Fatalf("FromOutbox(QueueDrawn) = %T, %v", m, err)
	}
	if d.GetPreQueued() != 2000 || d.GetPlaced() != 1987 || d.GetFirstSequence() != 5001 || d.GetLastSequence() != 7000 ||
		d.GetUserId() != "" || len(d.GetSeed()) != 64 || len(d.GetSeedSha256()) != 64 {
		t.Errorf("QueueDrawn figures = pre %d placed %d seq %d..%d user %q seed %d hex sha %d hex; want 2000 1987 5001..7000 \"\" 64 64",
			d.GetPreQueued(), d.GetPlaced(), d.GetFirstSequence(), d.GetLastSequence(), d.GetUserId(), len(d.GetSeed()), len(d.GetSeedSha256()))
	}
	if got := d.GetOccurredAt().AsTime().Sub(at); got != 3*time.Second {
		t.Errorf("QueueDrawn occurred_at - at = %v, want 3s", got)
	}
	// The abandoned person through the getters a consumer uses, and its
	// routing key as the registry has it.
	m, key, err := FromOutbox(tests[7].in)
	u, ok := m.(*waitingroomv1.UserAbandoned)
	if err != nil || !ok {
		t.Fatalf("FromOutbox(UserAbandoned) = %T, %v", m, err)
	}
	if u.GetEventId() != "q:42.abandoned" || u.GetQueueId() != "q" || u.GetUserId() != "u" || u.GetSequence() != 42 ||
		u.GetReason() != waitingroomv1.UserAbandonedReason_USER_ABANDONED_REASON_AWAY || !u.GetOccurredAt().AsTime().Equal(at) {
		t.Errorf("UserAbandoned = %v, want q:42.abandoned q u 42 AWAY at %v", u, at)
	}
	if rk, err := RoutingKey(u); key != "user.abandoned" || rk != key || err != nil {
		t.Errorf("UserAbandoned routing key %q, registry %q %v; want user.abandoned", key, rk, err)
	}
	if _, _, err := FromOutbox(queue.Event{Type: "Bogus"}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
}
