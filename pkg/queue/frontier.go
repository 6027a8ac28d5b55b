package queue

import (
	"math"
	"time"
)

// Leaver bins: the line's leavers not yet passed by admission are counted
// per bin of sequence numbers, at two grains (the leave script adds to both,
// the issue script takes the passed ones out). The fine bins cover the
// front, where a place is close and must be told to within a person or two;
// the coarse ones the rest, where 1 % is many people.
const (
	FineBin   = 16
	CoarseBin = 1024
)

// Frontier is what a replica keeps of one queue to tell people far from the
// front where they stand without asking Redis: the admission frontier (the
// sequence number of the last person admitted), the line's length and tail,
// and where the people who left sit, as bin counts. Everyone waiting has a
// sequence number above Last, so a place s is
//
//	1 + (s - Last - 1) - (leavers with a number between Last and s)
//
// exact up to the one bin s falls in, whose leavers are spread evenly.
// A Frontier is never changed once built; a newer one replaces it.
type Frontier struct {
	QueueID    string
	QueueState State
	// Generation is the queue configuration's creation time (ms), which a
	// ticket must carry to be answered from this frontier.
	Generation int64
	// Figures for the estimate, as a standing read from Redis has them.
	ConfiguredRate float64
	MeasuredRate   float64
	LeaveShare     float64
	StartsAt       time.Time

	// Last is the sequence number of the last person admitted (0 before
	// the first), Tail the last one given, Waiting the line's length.
	Last, Tail, Waiting int64
	// FirstLeft is the exact number of leavers in Last's fine bin above
	// Last (the bin admission is in the middle of).
	FirstLeft int64
	// Fine[i] counts the leavers of fine bin FineFrom+i; Coarse[i] those
	// of coarse bin CoarseFrom+i. The fine bins run from Last's up to a
	// coarse bin's start (or the tail's, for a short line), where the
	// coarse ones take over; Beyond counts
	// the leavers after the last coarse bin read (a line longer than the
	// read covers), spread evenly up to Tail.
	FineFrom   int64
	Fine       []int64
	CoarseFrom int64
	Coarse     []int64
	Beyond     int64
	// Usable is false when the bins cannot be trusted (a draw is placing
	// people, or the bins disagree with the leavers' set): every poll then
	// asks Redis.
	Usable bool
	// Shards is the queue's line count; a Frontier is one line's (its
	// QueueID the line id, see LineID).
	Shards int
	// LineKey is the queue's line key, on line 0's frontier (the others'
	// config copies have none): a ticket's holder is found in their line
	// with it (LineOf).
	LineKey LineKey

	// fineSums and coarseSums are the bins' running totals (Index), so a
	// place far back costs two subtractions, not a walk over its bins.
	fineSums, coarseSums []int64
}

// Index records the bins' running totals, so that Place no longer walks
// over the bins between the frontier and a place. Call it once a Frontier
// is built, before it is shared; a copy keeps them (they depend on the bins
// only, not on Last). Without it Place walks the bins.
func (f *Frontier) Index() *Frontier {
	f.fineSums, f.coarseSums = runningTotals(f.Fine), runningTotals(f.Coarse)
	return f
}

// runningTotals is bins' prefix sums: sums[i] is the total of bins[:i].
func runningTotals(bins []int64) []int64 {
	sums := make([]int64, len(bins)+1)
	for i, n := range bins {
		sums[i+1] = sums[i] + n
	}
	return sums
}

// binsBetween is the total of the bins numbered lo..hi-1 of bins, which
// start at bin number from (sums: their running totals, or nil).
func binsBetween(bins, sums []int64, from, lo, hi int64) int64 {
	lo, hi = max(lo, from), min(hi, from+int64(len(bins)))
	if lo >= hi {
		return 0
	}
	if len(sums) == len(bins)+1 {
		return sums[hi-from] - sums[lo-from]
	}
	var n int64
	for _, v := range bins[lo-from : hi-from] {
		n += v
	}
	return n
}

// ExactWindow is how close to the front a place is answered from Redis
// rather than estimated: two admission batches (rate x 100 ms each), and at
// least two people.
func (f *Frontier) ExactWindow() int64 {
	return max(2, 2*int64(math.Ceil(f.rate()*0.1)))
}

func (f *Frontier) rate() float64 {
	if f.MeasuredRate > 0 {
		return f.MeasuredRate
	}
	return f.ConfiguredRate
}

// Standing is the standing of the holder of a ticket for place seq of the
// queue's generation gen, and true; or false when it must be read from
// Redis: the place is at or behind the frontier (the holder was admitted,
// left, or is next), near the front, of another generation, past the tail,
// or the queue is not one whose line moves (closed, or its bins are not
// usable).
func (f *Frontier) Standing(gen, seq int64) (Standing, bool) {
	if f == nil || !f.Usable || gen != f.Generation || seq <= f.Last || seq > f.Tail {
		return Standing{}, false
	}
	if f.QueueState != Open && f.QueueState != Paused {
		return Standing{}, false
	}
	if first := (f.Last + 1) / FineBin; first < f.FineFrom || first >= f.FineFrom+int64(len(f.Fine)) {
		// The frontier ran past the bins read (announced moves, no read
		// for a while): they no longer start at it.
		return Standing{}, false
	}
	pos := f.Place(seq)
	if pos <= f.ExactWindow() || pos > f.Waiting {
		// Near the front, or a ticket of someone who left: Redis knows.
		return Standing{}, false
	}
	return Standing{
		QueueID:        f.QueueID,
		State:          Waiting,
		QueueState:     f.QueueState,
		Position:       pos,
		Total:          f.Waiting,
		ConfiguredRate: f.ConfiguredRate,
		MeasuredRate:   f.MeasuredRate,
		LeaveShare:     f.LeaveShare,
		StartsAt:       f.StartsAt,
	}, true
}

// Place estimates the 1-based place of sequence number seq (> Last).
func (f *Frontier) Place(seq int64) int64 {
	left := f.leftBefore(seq)
	return max(1, int64(math.Round(float64(seq-f.Last)-left)))
}

// leftBefore estimates the leavers numbered between Last and seq, seq
// itself excluded (its holder is waiting). Whole bins count exactly; the
// bin seq falls in counts in proportion to the part of it before seq, of
// the numbers in it other than seq.
func (f *Frontier) leftBefore(seq int64) float64 {
	first := (f.Last + 1) / FineBin
	b := seq / FineBin
	if b == first {
		// Within the bin admission is in: its leavers above Last, spread
		// over the numbers from Last+1 to the bin's end.
		span := (first+1)*FineBin - 1 - f.Last // numbers in (Last, binEnd], seq among them
		return share(f.FirstLeft, seq-f.Last-1, span)
	}
	fineEnd := f.FineFrom + int64(len(f.Fine)) // first fine bin not read
	left := float64(f.FirstLeft + binsBetween(f.Fine, f.fineSums, f.FineFrom, first+1, b))
	if b < fineEnd {
		return left + share(f.bin(f.Fine, f.FineFrom, b), seq-b*FineBin, FineBin)
	}
	// Past the fine bins: coarse ones, from the coarse bin the fine ones
	// end at.
	c := seq / CoarseBin
	coarseEnd := f.CoarseFrom + int64(len(f.Coarse))
	left += float64(binsBetween(f.Coarse, f.coarseSums, f.CoarseFrom, f.CoarseFrom, c))
	if c < coarseEnd {
		return left + share(f.bin(f.Coarse, f.CoarseFrom, c), seq-c*CoarseBin, CoarseBin)
	}
	// Past what was read: the rest spread evenly to the tail.
	from := coarseEnd * CoarseBin
	return left + share(f.Beyond, seq-from, f.Tail-from+1)
}

func (f *Frontier) bin(bins []int64, from, i int64) int64 {
	if i < from || i-from >= int64(len(bins)) {
		return 0
	}
	return bins[i-from]
}

// share is the expected number of a bin's n leavers among the `before`
// numbers ahead of a waiting number, the bin having `size` numbers, the
// waiting one among them: n x before / (size - 1).
func share(n, before, size int64) float64 {
	if n <= 0 || before <= 0 || size <= 1 {
		return 0
	}
	return float64(n) * float64(min(before, size-1)) / float64(size-1)
}

// Frontiers looks up the frontier a replica keeps of a queue or one of its
// lines (by line id), nil when it has none yet.
type Frontiers interface {
	Lookup(id string) *Frontier
}

// StandingOf is the standing of user, holder of a ticket for place seq of
// generation gen in queue q, from the frontiers, and true; false when it
// must be read from Redis (see Frontier.Standing). In a queue split into
// lines the place is in the user's line and is turned into the queue's
// with every line's length (ScaleToQueue), so every line's frontier must
// be at hand: a line not looked up before is tracked from now on.
func StandingOf(fs Frontiers, q, user string, gen, seq int64) (Standing, bool) {
	f := fs.Lookup(q)
	if f == nil || f.Shards <= 1 {
		return f.Standing(gen, seq)
	}
	line := LineOf(f.LineKey, user, f.Shards)
	lines := make([]*Frontier, f.Shards)
	lines[0] = f
	complete := true
	for i := 1; i < f.Shards; i++ {
		if lines[i] = fs.Lookup(LineID(q, i)); lines[i] == nil {
			complete = false
		}
	}
	if !complete {
		return Standing{}, false
	}
	st, ok := lines[line].Standing(gen, seq)
	if !ok {
		return Standing{}, false
	}
	var waiting int64
	for _, l := range lines {
		waiting += l.Waiting
	}
	st.QueueID, st.Line, st.Lines = q, line, f.Shards
	return st.InQueue(lines[line].Waiting, waiting), true
}
