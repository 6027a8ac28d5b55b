package events

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// FromOutbox turns an entry of a queue's Redis outbox into its protobuf
// event and routing key.
func FromOutbox(e queue.Event) (proto.Message, string, error) {
	switch e.Type {
	case queue.EventTokenIssued:
		return tokenIssued(e), RoutingKeyTokenIssued, nil
	case queue.EventTokenRestored:
		return &waitingroomv1.TokenRestored{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
			TokenId: e.TokenID, ExpiresAt: ts(e.ExpiresAt), OrderId: e.OrderID, RemainingTtlMs: e.RemainingTTL.Milliseconds(),
		}, RoutingKeyTokenRestored, nil
	case queue.EventTokenExpired:
		return &waitingroomv1.TokenExpired{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
			TokenId: e.TokenID, Reason: reason[waitingroomv1.TokenExpiredReason](waitingroomv1.TokenExpiredReason_value, "TOKEN_EXPIRED_REASON_", e.Reason),
		}, RoutingKeyTokenExpired, nil
	case queue.EventQueueStarted:
		return &waitingroomv1.QueueStarted{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID,
			StartsAt: ts(e.StartsAt), SeedSha256: e.SeedSHA256, PreQueued: unsigned(e.PreQueued),
		}, RoutingKeyQueueStarted, nil
	case queue.EventQueueDrawn:
		return &waitingroomv1.QueueDrawn{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID,
			Seed: e.Seed, SeedSha256: e.SeedSHA256, PreQueued: unsigned(e.PreQueued), Placed: unsigned(e.Placed),
			FirstSequence: unsigned(e.FirstSeq), LastSequence: unsigned(e.LastSeq),
		}, RoutingKeyQueueDrawn, nil
	case queue.EventUserAbandoned:
		return &waitingroomv1.UserAbandoned{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
			Sequence: unsigned(e.Seq), Reason: reason[waitingroomv1.UserAbandonedReason](waitingroomv1.UserAbandonedReason_value, "USER_ABANDONED_REASON_", e.Reason),
		}, RoutingKeyUserAbandoned, nil
	case queue.EventQueueChanged:
		action := waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CONFIGURED
		switch {
		case e.Created:
			action = waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CREATED
		case e.Closed:
			action = waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CLOSED
		case e.Worded:
			action = waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_WORDED
		}
		return &waitingroomv1.QueueChanged{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.Actor, Action: action,
			BeforeJson: e.Before, AfterJson: e.After, ClientAddress: e.Address, Etag: e.ETag,
			Outcome: reason[waitingroomv1.QueueChangeOutcome](waitingroomv1.QueueChangeOutcome_value, "QUEUE_CHANGE_OUTCOME_", e.Outcome),
			Refusal: e.Refusal,
		}, RoutingKeyQueueChanged, nil
	case queue.EventQueueMinute:
		hist := make([]uint64, len(e.Counts.WaitHistogram))
		for i, n := range e.Counts.WaitHistogram {
			hist[i] = unsigned(n)
		}
		return &waitingroomv1.QueueMinute{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, LineId: e.LineID, Minute: ts(e.Minute),
			Arrivals: unsigned(e.Counts.Arrivals), Admitted: unsigned(e.Counts.Admitted),
			ExpiredUnused: unsigned(e.Counts.ExpiredUnused), Left: unsigned(e.Counts.Left), Abandoned: unsigned(e.Counts.Abandoned),
			WaitHistogram: hist, WaitMaxMs: e.Counts.WaitMax.Milliseconds(),
		}, RoutingKeyQueueMinute, nil
	}
	return nil, "", fmt.Errorf("%w: outbox entry of type %q", ErrUnknownType, e.Type)
}

func tokenIssued(e queue.Event) *waitingroomv1.TokenIssued {
	return &waitingroomv1.TokenIssued{
		EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
		TokenId: e.TokenID, ActivateAt: ts(e.ActivateAt), ExpiresAt: ts(e.ExpiresAt), Sequence: unsigned(e.Seq),
	}
}

// TokensIssuedFromOutbox packs the TokenIssued entries evs, all of one
// queue and in the order they were admitted, into one TokensIssued and its
// routing key. Its event id is the first token's with ".batch" appended.
func TokensIssuedFromOutbox(evs []queue.Event) (*waitingroomv1.TokensIssued, string, error) {
	if len(evs) == 0 {
		return nil, "", errors.New("events: a TokensIssued of no token")
	}
	m := &waitingroomv1.TokensIssued{EventId: evs[0].ID + ".batch", OccurredAt: ts(evs[0].OccurredAt), QueueId: evs[0].QueueID,
		Tokens: make([]*waitingroomv1.TokenIssued, len(evs))}
	for i, e := range evs {
		if e.Type != queue.EventTokenIssued || e.QueueID != evs[0].QueueID {
			return nil, "", fmt.Errorf("%w: a %s of queue %q in a TokensIssued of queue %q", ErrUnknownType, e.Type, e.QueueID, evs[0].QueueID)
		}
		m.Tokens[i] = tokenIssued(e)
	}
	return m, RoutingKeyTokensIssued, nil
}

// reason is the outbox's reason name as the contract's enum E (values is
// its generated name map, prefix its values' prefix): UNSPECIFIED (0) for
// a name the enum does not know.
func reason[E ~int32](values map[string]int32, prefix, name string) E {
	return E(values[prefix+name])
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// unsigned is a non-negative figure of the outbox (a sequence number, a number
// of people) as the contract's uint64; a negative one, which the store never
// writes, becomes 0 rather than wrapping around.
func unsigned(n int64) uint64 {
	return uint64(max(n, 0))
}
