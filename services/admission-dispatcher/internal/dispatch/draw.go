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

// startDraw runs ls's draw in a goroutine of the ticks' own (run waits for
// it) unless one runs already.
// The tick reported HeldDraw: the queue's start came and its pre-queue is
// closed; nobody is admitted until the draw is done. A draw that fails is
// started again by a later tick, and goes on from where it stopped.
func (t *ticks) startDraw(ctx context.Context, ls *leadership) {
	if !ls.tick.drawing.CompareAndSwap(false, true) {
		return
	}
	t.draws.Go(func() {
		err := t.draw(ctx, ls)
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, queue.ErrStaleEpoch) {
				t.leases.stepDown(ls, "fenced off during the draw: another replica leads now")
			} else {
				ls.log.Warn("draw failed; trying again", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(drawRetry):
			}
		}
		ls.tick.drawing.Store(false)
	})
}

// draw places ls's closed pre-queue: QueueStarted (the seed's hash) goes
// out first, then everyone still pre-queued is placed in drawn order, in
// chunks, then QueueDrawn (the seed). Each step is fenced by the epoch and
// safe to repeat, so a leader that dies half way leaves a draw the next
// one finishes in the same order.
func (t *ticks) draw(ctx context.Context, ls *leadership) error {
	if len(ls.lines) > 1 {
		return t.drawLines(ctx, ls)
	}
	start := time.Now()
	var placed int64
	for {
		w, err := t.store.StartDraw(ctx, ls.q, ls.epoch, queue.DrawTotals{})
		if err != nil {
			return err
		}
		if w.State != queue.DrawDrawing {
			return nil
		}
		t.relay.kick()
		order, err := queue.DrawOrder(w.Seed, w.Remaining)
		if err != nil {
			return err
		}
		// Chunks of a few milliseconds of Redis time each, so a draw of
		// 100,000 never blocks the server for long.
		if err := t.place(ctx, ls, ls.q, order); err != nil {
			return err
		}
		w, err = t.store.FinishDraw(ctx, ls.q, ls.epoch, queue.DrawTotals{})
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
	t.m.Drew(ls.q, placed, took)
	t.relay.kick()
	return nil
}

// place gives the people of order, in that order, their places in line id
// (a queue or one of its lines), in chunks of a few milliseconds of Redis
// time each, so a draw of 100,000 never blocks the server for long.
func (t *ticks) place(ctx context.Context, ls *leadership, id string, order []string) error {
	chunk := t.drawChunk
	for i := 0; i < len(order); i += chunk {
		if _, err := t.store.PlaceDrawn(ctx, id, ls.epoch, order[i:min(i+chunk, len(order))]); err != nil {
			return err
		}
	}
	return nil
}

// drawLines draws the pre-queue of a queue split into lines: each line's
// own, in the order of the one seed they share. The queue's events come
// from line 0 with the queue's totals: QueueStarted once every line has
// closed its pre-queue (lines 1 and up are announced first, quietly, for
// their counts), QueueDrawn once every other line is drawn (line 0 is
// finished last). A line whose start has not come on its master yet (its
// clock behind line 0's) stops the draw until a later tick starts it
// again; every step is safe to repeat.
func (t *ticks) drawLines(ctx context.Context, ls *leadership) error {
	start := time.Now()
	n := len(ls.lines)
	works := make([]queue.DrawWork, n)
	var count int64
	for line := n - 1; line >= 0; line-- {
		totals := queue.DrawTotals{Quiet: line > 0, OthersPreQueued: count}
		w, err := t.store.StartDraw(ctx, queue.LineID(ls.q, line), ls.epoch, totals)
		if err != nil {
			return err
		}
		if w.State == queue.DrawScheduled {
			return nil // this line's start has not come yet: a later tick goes on
		}
		works[line] = w
		count += w.Count
	}
	t.relay.kick()
	for line, w := range works {
		if w.State != queue.DrawDrawing {
			continue
		}
		order, err := queue.DrawOrder(w.Seed, w.Remaining)
		if err != nil {
			return err
		}
		if err := t.place(ctx, ls, queue.LineID(ls.q, line), order); err != nil {
			return err
		}
	}
	var placed int64
	for line := n - 1; line >= 0; line-- {
		totals := queue.DrawTotals{Quiet: line > 0, OthersPreQueued: count - works[0].Count, OthersPlaced: placed}
		w, err := t.store.FinishDraw(ctx, queue.LineID(ls.q, line), ls.epoch, totals)
		if err != nil {
			return err
		}
		if w.State == queue.DrawDrawing {
			return nil // someone is still pre-queued here: the next tick goes on
		}
		placed += w.Placed
	}
	took := time.Since(start)
	ls.log.Info("pre-queue drawn", "lines", n, "placed", placed, "took", took)
	t.m.Drew(ls.q, placed, took)
	t.relay.kick()
	return nil
}
