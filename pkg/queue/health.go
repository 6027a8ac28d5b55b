package queue

import "time"

// OrderHealth is one order-service replica's report on one queue's orders
// over one interval (a second): how the order path is doing, for the
// dispatcher's adaptive admission. It is published on routing key
// order.health.
type OrderHealth struct {
	QueueID string
	// Source names the reporting replica; reports of several replicas of
	// one queue are combined.
	Source string
	// At is the end of the interval; Interval its length.
	At       time.Time
	Interval time.Duration
	// Orders is how many order attempts with a consumed token finished in
	// the interval, whatever the outcome; Created how many were committed.
	Orders, Created int64
	// P95 is the 95th percentile of the order transaction's duration
	// (consume to answer) over the interval, attempts still in flight at
	// its end counted with their age so far; 0 when there were none.
	P95 time.Duration
	// Unavailable is how many attempts were answered 503 (a dependency
	// down) or ran out of time.
	Unavailable int64
	// OutboxBacklog is how many order events of the replica's database wait
	// to be published (the whole service, not only this queue).
	OutboxBacklog int64
}
