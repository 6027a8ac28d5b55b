package events

import (
	"math"
	"strconv"
	"time"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// HealthMessage is the OrderHealth message of an order-service replica's
// report, published with RoutingKeyOrderHealth. Its event id names the
// report: queue, source and the interval's end in Unix milliseconds (a
// queue id has no dot, so no two reports share one). P95 is rounded up to a
// whole millisecond, so a report with orders never says 0.
func HealthMessage(h queue.OrderHealth) *waitingroomv1.OrderHealth {
	return &waitingroomv1.OrderHealth{
		EventId:       h.QueueID + ".health." + h.Source + "." + strconv.FormatInt(h.At.UnixMilli(), 10),
		OccurredAt:    ts(h.At),
		QueueId:       h.QueueID,
		Source:        h.Source,
		IntervalMs:    h.Interval.Milliseconds(),
		Orders:        unsigned(h.Orders),
		Created:       unsigned(h.Created),
		P95Ms:         ceilMillis(h.P95),
		Unavailable:   unsigned(h.Unavailable),
		OutboxBacklog: unsigned(h.OutboxBacklog),
	}
}

// HealthFrom is the report an OrderHealth message carries, for its
// consumer. A message without occurred_at gives a zero At.
func HealthFrom(m *waitingroomv1.OrderHealth) queue.OrderHealth {
	var at time.Time
	if m.GetOccurredAt() != nil {
		at = m.GetOccurredAt().AsTime()
	}
	return queue.OrderHealth{
		QueueID:       m.GetQueueId(),
		Source:        m.GetSource(),
		At:            at,
		Interval:      time.Duration(m.GetIntervalMs()) * time.Millisecond,
		Orders:        signed(m.GetOrders()),
		Created:       signed(m.GetCreated()),
		P95:           time.Duration(m.GetP95Ms()) * time.Millisecond,
		Unavailable:   signed(m.GetUnavailable()),
		OutboxBacklog: signed(m.GetOutboxBacklog()),
	}
}

// ceilMillis is d in whole milliseconds, rounded up; 0 for d <= 0.
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// signed is a count of the contract as an int64; one beyond its range,
// which no report carries, saturates rather than turning negative.
func signed(n uint64) int64 {
	return int64(min(n, math.MaxInt64))
}
