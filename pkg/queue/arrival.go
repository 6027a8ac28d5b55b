package queue

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// A queue split into lines is admitted in arrival order across its lines.
// Each line's enter records when the person came (Redis TIME of the line's
// master, in µs), and each line's tick reports the enter times of the first
// ArrivalWindow people still waiting in it. The leader merges those heads
// and gives each line, for the next tick, the part of the rate that the
// line holds of the queue's earliest ArrivalWindow people (ArrivalShares).
// People who come later join the tails, so junk ids added behind someone
// never change the earliest heads, and speed up nobody ahead of them.

// MaxArrivalWindow bounds the enter times a line's tick reports.
const MaxArrivalWindow = 1000

// ArrivalWindow is how many of the people next in line are merged across
// the lines: one tick's admissions at the queue's rate plus one (its batch
// cap), at most MaxArrivalWindow.
func ArrivalWindow(rate float64, tick time.Duration) int {
	return min(MaxArrivalWindow, int(math.Ceil(rate*tick.Seconds()))+1)
}

// LineHeads is what the leader knows of the front of one line.
type LineHeads struct {
	// Known: a tick of this line reported its heads (a line whose tick
	// failed keeps the last ones: it admitted nobody since).
	Known bool
	// Times are the enter times (µs) of the first people waiting, in the
	// line's order; 0 for someone without one (placed by a pre-queue draw,
	// or in line since before times were kept: both came before anyone
	// with a time).
	Times []int64
	// Waiting is the line's length.
	Waiting int64
}

// ArrivalShares is each line's part of the queue's rate: the share of the
// earliest window people waiting (by enter time, across the lines) that is
// in the line. People with the same time (the pre-queue's, all 0) are taken
// from the lines in proportion to the lines' lengths: the j-th of a line of
// w before the k-th of a line of v when (j+1)/(w+1) < (k+1)/(v+1). Before
// every line has reported its heads (a new leader's first tick), or with
// nobody waiting, the shares are equal.
func ArrivalShares(lines []LineHeads, window int) []float64 {
	shares := make([]float64, len(lines))
	type head struct {
		at   int64
		frac float64
		line int
	}
	var heads []head
	for i, l := range lines {
		if !l.Known {
			heads = nil
			break
		}
		for j, at := range l.Times {
			heads = append(heads, head{at, float64(j+1) / float64(max(l.Waiting, int64(len(l.Times)))+1), i})
		}
	}
	if len(heads) == 0 || window <= 0 {
		for i := range shares {
			shares[i] = 1 / float64(len(lines))
		}
		return shares
	}
	slices.SortFunc(heads, func(a, b head) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.frac, b.frac), cmp.Compare(a.line, b.line))
	})
	heads = heads[:min(window, len(heads))]
	for _, h := range heads {
		shares[h.line] += 1 / float64(len(heads))
	}
	return shares
}

// LineOrderBound is how far from their arrival rank a person may be
// admitted in a queue of shards lines admitted batch people a tick at rate,
// whose masters' clocks are at most skew apart. A tick admits from each
// line about its part of the earliest people as the previous tick left
// them (people only join at the tails meanwhile), so:
//   - a tick's lines are admitted together, in the order of the round: one
//     batch;
//   - a tick longer than the configured one admits beyond the merged
//     window, in proportion to it, and a new leader's first tick at equal
//     shares: one batch more;
//   - each line's credit carries less than one admission, and rounds its
//     part down or up: two a line;
//   - the enter times come from each line's master: people who came within
//     the skew of each other may be taken in either order (rate x skew).
func LineOrderBound(shards int, batch int64, rate float64, skew time.Duration) int64 {
	if shards <= 1 {
		return batch
	}
	return 2*batch + 2*int64(shards) + int64(math.Ceil(rate*skew.Seconds()))
}
