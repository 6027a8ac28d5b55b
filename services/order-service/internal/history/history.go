// Package history keeps each queue's figures per minute (arrivals,
// admissions, orders, expired tokens, leaves, the abandoned, waits) and
// makes the sale report of any time range from them (docs/DESIGN.md,
// "History"). The lines' figures come as QueueMinute events from the
// admission-dispatcher; the orders are counted from the order-service's
// own outbox by a roll-up that any replica may run at any time.
package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Part is one QueueMinute: what one line counted in one minute, or a part
// of it (a closed queue sends what it has counted so far).
type Part struct {
	EventID, QueueID, LineID string
	Minute                   time.Time
	Counts                   queue.MinuteCounts
}

// Minute is one minute of a queue: its lines' parts added up and its
// orders.
type Minute struct {
	Start                       time.Time
	Counts                      queue.MinuteCounts
	OrdersCreated, OrdersFailed int64
}

// Store keeps the history. pg.DB implements it.
type Store interface {
	// SaveMinute stores a part once, by its event id.
	SaveMinute(ctx context.Context, p Part) (bool, error)
	// RollUpOrders counts the orders created and failed per queue and
	// minute from the outbox for the minutes in [from, to), replacing
	// what was counted for them before; it returns how many minutes it
	// wrote.
	RollUpOrders(ctx context.Context, from, to time.Time) (int64, error)
	// Minutes returns the minutes of queue q in [from, to) that have
	// anything, in order.
	Minutes(ctx context.Context, q string, from, to time.Time) ([]Minute, error)
	// PruneHistory deletes the minutes before before, at most batch rows
	// per statement.
	PruneHistory(ctx context.Context, before time.Time, batch int) (int64, error)
}

// Bounds of a report and of the history.
const (
	// MaxRange is the longest report (one row a minute).
	MaxRange = 31 * 24 * time.Hour
	// DefaultRange is a report's range when none is asked for: the last
	// hour.
	DefaultRange = time.Hour
	// RollUpWindow is how far back each roll-up pass counts the orders
	// again: an order's time is taken before its commit, which may come a
	// few seconds later, after a pass.
	RollUpWindow = 5 * time.Minute
	// DefaultRollUpInterval is HISTORY_ROLLUP_INTERVAL's default.
	DefaultRollUpInterval = 30 * time.Second
)

var (
	// ErrInvalidEvent: a QueueMinute that cannot be stored (no id, a bad
	// queue id, no minute); it never will be.
	ErrInvalidEvent = errors.New("history: not a recordable QueueMinute")
	// ErrInvalidRange: a report's range is not from < to within MaxRange,
	// or its queue id is not one.
	ErrInvalidRange = errors.New("history: invalid report")
)

// Service records the history and makes reports.
type Service struct {
	store Store
	now   func() time.Time
}

// New returns a Service on store.
func New(store Store) *Service { return &Service{store: store, now: time.Now} }

// Record stores a QueueMinute (once, by its event id).
func (s *Service) Record(ctx context.Context, e *waitingroomv1.QueueMinute) (bool, error) {
	if e.GetEventId() == "" || !queue.ValidID(e.GetQueueId()) || e.GetMinute() == nil || e.GetLineId() == "" ||
		len(e.GetWaitHistogram()) > queue.WaitBuckets {
		return false, fmt.Errorf("%w: event %q of queue %q", ErrInvalidEvent, e.GetEventId(), e.GetQueueId())
	}
	c := queue.MinuteCounts{
		Arrivals: signed(e.GetArrivals()), Admitted: signed(e.GetAdmitted()), ExpiredUnused: signed(e.GetExpiredUnused()),
		Left: signed(e.GetLeft()), Abandoned: signed(e.GetAbandoned()),
		WaitMax: time.Duration(max(e.GetWaitMaxMs(), 0)) * time.Millisecond,
	}
	for _, n := range e.GetWaitHistogram() {
		c.WaitHistogram = append(c.WaitHistogram, signed(n))
	}
	return s.store.SaveMinute(ctx, Part{
		EventID: e.GetEventId(), QueueID: e.GetQueueId(), LineID: e.GetLineId(),
		Minute: e.GetMinute().AsTime().UTC().Truncate(time.Minute), Counts: c,
	})
}

// signed is a count of the contract as an int64, saturated.
func signed(n uint64) int64 {
	if n > 1<<62 {
		return 1 << 62
	}
	return int64(n)
}

// Loop rolls the orders up every `every` (DefaultRollUpInterval for 0),
// counting the last RollUpWindow again each time, and deletes the minutes
// older than keep (0: kept forever) until ctx ends.
func (s *Service) Loop(ctx context.Context, every, keep time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = DefaultRollUpInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		now := s.now().UTC()
		to := now.Truncate(time.Minute).Add(time.Minute)
		if _, err := s.store.RollUpOrders(ctx, to.Add(-RollUpWindow-time.Minute), to); err != nil && ctx.Err() == nil {
			log.Warn("history: orders not rolled up; tried again", "err", err)
		}
		if keep > 0 {
			n, err := s.store.PruneHistory(ctx, now.Add(-keep), 1000)
			if err != nil && ctx.Err() == nil {
				log.Warn("history: retention pass", "err", err)
			} else if n > 0 {
				log.Info("history: deleted old minutes", "rows", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Report is a queue's sale report over [From, To): every minute of it
// (those with nothing too), the totals and the peaks.
type Report struct {
	QueueID  string
	From, To time.Time
	Minutes  []Minute
	Totals   Minute
	// Peaks: the minute with the most of each (the first such).
	PeakArrivals, PeakAdmitted, PeakOrders, PeakWait Minute
}

// ReportOf makes q's report over [from, to), both cut to the minute (to
// rounded up); a zero to is now, a zero from an hour before to.
func (s *Service) ReportOf(ctx context.Context, q string, from, to time.Time) (Report, error) {
	if !queue.ValidID(q) {
		return Report{}, fmt.Errorf("%w: queueId", ErrInvalidRange)
	}
	if to.IsZero() {
		to = s.now()
	}
	to = ceilMinute(to.UTC())
	if from.IsZero() {
		from = to.Add(-DefaultRange)
	}
	from = from.UTC().Truncate(time.Minute)
	if !from.Before(to) {
		return Report{}, fmt.Errorf("%w: from must be before to", ErrInvalidRange)
	}
	if to.Sub(from) > MaxRange {
		return Report{}, fmt.Errorf("%w: at most %d days a report", ErrInvalidRange, int(MaxRange/(24*time.Hour)))
	}
	got, err := s.store.Minutes(ctx, q, from, to)
	if err != nil {
		return Report{}, err
	}
	r := Report{QueueID: q, From: from, To: to, Minutes: make([]Minute, 0, int(to.Sub(from)/time.Minute))}
	r.Totals.Start = from
	i := 0
	for m := from; m.Before(to); m = m.Add(time.Minute) {
		row := Minute{Start: m}
		for i < len(got) && got[i].Start.Before(m) {
			i++
		}
		if i < len(got) && got[i].Start.Equal(m) {
			row = got[i]
		}
		r.Minutes = append(r.Minutes, row)
		r.Totals.add(row)
		peak(&r.PeakArrivals, row, func(m Minute) int64 { return m.Counts.Arrivals })
		peak(&r.PeakAdmitted, row, func(m Minute) int64 { return m.Counts.Admitted })
		peak(&r.PeakOrders, row, func(m Minute) int64 { return m.OrdersCreated })
		peak(&r.PeakWait, row, func(m Minute) int64 { return int64(m.Counts.WaitMax) })
	}
	return r, nil
}

// peak keeps in p the minute with the most of by (the first of equals);
// a minute of none is no peak.
func peak(p *Minute, m Minute, by func(Minute) int64) {
	if v := by(m); v > 0 && (p.Start.IsZero() || v > by(*p)) {
		*p = m
	}
}

// add adds o's figures to m (histograms bucket by bucket, the longer of
// the longest waits).
func (m *Minute) add(o Minute) {
	m.Counts = AddCounts(m.Counts, o.Counts)
	m.OrdersCreated += o.OrdersCreated
	m.OrdersFailed += o.OrdersFailed
}

// AddCounts is a + b: counts added, histograms bucket by bucket, the
// longer of the longest waits.
func AddCounts(a, b queue.MinuteCounts) queue.MinuteCounts {
	out := queue.MinuteCounts{
		Arrivals: a.Arrivals + b.Arrivals, Admitted: a.Admitted + b.Admitted, ExpiredUnused: a.ExpiredUnused + b.ExpiredUnused,
		Left: a.Left + b.Left, Abandoned: a.Abandoned + b.Abandoned, WaitMax: max(a.WaitMax, b.WaitMax),
	}
	n := max(len(a.WaitHistogram), len(b.WaitHistogram))
	if n > 0 {
		out.WaitHistogram = make([]int64, n)
		for i := range n {
			if i < len(a.WaitHistogram) {
				out.WaitHistogram[i] += a.WaitHistogram[i]
			}
			if i < len(b.WaitHistogram) {
				out.WaitHistogram[i] += b.WaitHistogram[i]
			}
		}
	}
	return out
}

// Conversion is the share of the admitted who ordered (0 with nobody
// admitted).
func (m Minute) Conversion() float64 {
	if m.Counts.Admitted == 0 {
		return 0
	}
	return float64(m.OrdersCreated) / float64(m.Counts.Admitted)
}

// Wait is the q-quantile of the minute's waits (queue.WaitQuantile).
func (m Minute) Wait(q float64) time.Duration {
	return queue.WaitQuantile(m.Counts.WaitHistogram, q, m.Counts.WaitMax)
}

func ceilMinute(t time.Time) time.Time {
	if c := t.Truncate(time.Minute); !c.Equal(t) {
		return c.Add(time.Minute)
	}
	return t
}
