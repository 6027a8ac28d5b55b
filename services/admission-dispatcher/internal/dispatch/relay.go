package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Relay timing. The block bounds how long a new event waits for the relay;
// claimIdle is how long another consumer's unacknowledged events must sit
// before this leader takes them over (its predecessor died mid-publish).
const (
	relayBlock    = 100 * time.Millisecond
	claimIdle     = 2 * time.Second
	claimEvery    = 5 * time.Second
	relayMaxPause = 5 * time.Second
)

// relay moves the queue's outbox to the broker while this replica leads:
// read, publish with confirms, then acknowledge and delete. An event is
// deleted only after the broker confirmed it, so a crash or a broker outage
// delays events and loses none (it may publish one twice).
func (w *worker) relay(ctx context.Context, log *slog.Logger) {
	if err := w.d.store.EnsureOutboxGroup(ctx, w.q); err != nil && ctx.Err() == nil {
		log.Warn("outbox group", "err", err)
	}
	pause := time.Duration(0)
	lastClaim := time.Time{}
	for ctx.Err() == nil {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
		}
		var events []queue.Event
		var err error
		if time.Since(lastClaim) >= claimEvery {
			lastClaim = time.Now()
			events, err = w.d.store.ClaimOutbox(ctx, w.q, w.d.o.Owner, claimIdle, w.d.o.RelayBatch)
		}
		if err == nil && len(events) == 0 {
			events, err = w.d.store.ReadOutbox(ctx, w.q, w.d.o.Owner, w.d.o.RelayBatch, relayBlock)
		}
		if err == nil && len(events) > 0 {
			if err = w.d.pub.Publish(ctx, events); err == nil {
				err = w.d.store.AckOutbox(ctx, w.q, streamIDs(events))
				w.d.m.countPublished(events)
			}
		}
		if n, lerr := w.d.store.OutboxLen(ctx, w.q); lerr == nil {
			w.d.m.backlog.WithLabelValues(w.q).Set(float64(n))
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("outbox relay", "err", err, "retry_in", backoff(pause).String())
			}
			pause = backoff(pause)
			continue
		}
		pause = 0
	}
}

func backoff(d time.Duration) time.Duration {
	if d == 0 {
		return 100 * time.Millisecond
	}
	return min(2*d, relayMaxPause)
}

func streamIDs(events []queue.Event) []string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.StreamID
	}
	return ids
}
