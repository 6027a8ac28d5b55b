package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// drawRetry is how long a draw that failed waits before the next attempt
// (the tick keeps reporting DRAW and starts it again).
const drawRetry = 200 * time.Millisecond

// startDraw runs ls's draw in its own goroutine unless one runs already.
// The tick reported HeldDraw: the queue's start came and its pre-queue is
// closed; nobody is admitted until the draw is done. A draw that fails is
// started again by a later tick, and goes on from where it stopped.
func (l *leader) startDraw(ctx context.Context, ls *leadership) {
	if !ls.drawing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		err := l.draw(ctx, ls)
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, queue.ErrStaleEpoch) {
				l.stepDown(ls, "fenced off during the draw: another replica leads now")
			} else {
				ls.log.Warn("draw failed; trying again", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(drawRetry):
			}
		}
		ls.drawing.Store(false)
	}()
}

// draw places ls's closed pre-queue: QueueStarted (the seed's hash) goes
// out first, then everyone still pre-queued is placed in drawn order, in
// chunks, then QueueDrawn (the seed). Each step is fenced by the epoch and
// safe to repeat, so a leader that dies half way leaves a draw the next
// one finishes in the same order.
func (l *leader) draw(ctx context.Context, ls *leadership) error {
	start := time.Now()
	var placed int64
	for {
		w, err := l.d.store.StartDraw(ctx, ls.q, ls.epoch)
		if err != nil {
			return err
		}
		if w.State != queue.DrawDrawing {
			return nil
		}
		l.d.relay.kick()
		order, err := queue.DrawOrder(w.Seed, w.Remaining)
		if err != nil {
			return err
		}
		// Chunks of a few milliseconds of Redis time each, so a draw of
		// 100,000 never blocks the server for long.
		chunk := l.d.o.DrawChunk
		for i := 0; i < len(order); i += chunk {
			if _, err := l.d.store.PlaceDrawn(ctx, ls.q, ls.epoch, order[i:min(i+chunk, len(order))]); err != nil {
				return err
			}
		}
		w, err = l.d.store.FinishDraw(ctx, ls.q, ls.epoch)
		if err != nil {
			return err
		}
		placed = w.Placed
		if w.State == queue.DrawDrawn {
			break
		}
		// Nobody enters the closed pre-queue, so a second round only
		// finds someone if a place call was lost in transit; go again.
	}
	took := time.Since(start)
	ls.log.Info("pre-queue drawn", "placed", placed, "took", took)
	l.d.m.Drew(ls.q, placed, took)
	l.d.relay.kick()
	return nil
}
