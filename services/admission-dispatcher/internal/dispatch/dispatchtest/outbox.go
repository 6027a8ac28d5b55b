package dispatchtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// The outbox: a Redis stream per line with the relay's consumer group, as
// redisstore reads it (XREADGROUP, XAUTOCLAIM, XACK with XDEL). An entry
// read with ">" is pending for its reader until acknowledged; a re-read
// of one's pending entries, or a claim, delivers them again (their idle
// time starts over). A consumer comes to be at its first read that
// delivers something. A tick's admitted are one entry (TokensIssued),
// read as an event each with the entry's id; a count of a read counts
// entries, a length counts events.

// errNoGroup is Redis's answer to a read of an outbox without the group.
var errNoGroup = errors.New("NOGROUP No such key or consumer group")

type streamID struct{ ms, seq int64 }

func (id streamID) String() string {
	return strconv.FormatInt(id.ms, 10) + "-" + strconv.FormatInt(id.seq, 10)
}

func (id streamID) compare(o streamID) int {
	return cmp.Or(cmp.Compare(id.ms, o.ms), cmp.Compare(id.seq, o.seq))
}

func parseStreamID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	ms, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	return streamID{ms, seq}, ok && err1 == nil && err2 == nil
}

type stream struct {
	entries []entry // by id
	last    streamID
	group   *group
}

type entry struct {
	id  streamID
	evs []queue.Event
}

type group struct {
	delivered streamID               // the group's last delivered id
	pending   map[streamID]*delivery // its pending entries list
	consumers map[string]int64       // name -> last seen (ms)
}

type delivery struct {
	consumer string
	at       int64 // ms
}

// emit appends ev to l's outbox under a fresh entry id (XADD *).
func (l *line) emit(s *Store, ev queue.Event) { l.emitAll(s, []queue.Event{ev}) }

// emitAll appends evs to l's outbox as one entry under a fresh id.
func (l *line) emitAll(s *Store, evs []queue.Event) {
	if len(evs) == 0 {
		return
	}
	if l.outbox == nil {
		l.outbox = &stream{}
	}
	st := l.outbox
	id := streamID{ms: s.nowMs()}
	if id.ms <= st.last.ms {
		id = streamID{st.last.ms, st.last.seq + 1}
	}
	st.last = id
	evs = slices.Clone(evs)
	for i := range evs {
		evs[i].StreamID = id.String()
	}
	st.entries = append(st.entries, entry{id, evs})
}

// outboxLen is the events l's outbox holds.
func (l *line) outboxLen() int64 {
	if l.outbox == nil {
		return 0
	}
	n := 0
	for _, e := range l.outbox.entries {
		n += len(e.evs)
	}
	return int64(n)
}

func (st *stream) find(id streamID) (int, bool) {
	return slices.BinarySearchFunc(st.entries, id, func(e entry, id streamID) int { return e.id.compare(id) })
}

// group is id's outbox group, or the error a read of it gets.
func (s *Store) group(id string) (*stream, *group, error) {
	l := s.lines[id]
	if l == nil || l.outbox == nil || l.outbox.group == nil {
		return nil, nil, errNoGroup
	}
	return l.outbox, l.outbox.group, nil
}

// EnsureOutboxGroup creates the relay group of q's outbox (and the outbox)
// from its first entry on; nothing for a queue (or line) without config.
func (s *Store) EnsureOutboxGroup(_ context.Context, q string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines[q]
	if l == nil || l.cfg == nil {
		return nil
	}
	if l.outbox == nil {
		l.outbox = &stream{}
	}
	if l.outbox.group == nil {
		l.outbox.group = &group{pending: map[streamID]*delivery{}, consumers: map[string]int64{}}
	}
	return nil
}

// ReadOutboxes reads up to count entries (0: all) of each outbox in reads
// for consumer: new ones, or its own pending ones again. A read of an
// outbox without the group fails in its batch; when every read failed,
// the call does too.
func (s *Store) ReadOutboxes(_ context.Context, consumer string, count int64, reads []queue.OutboxRead) ([]queue.OutboxBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(reads) == 0 {
		return nil, nil
	}
	out := make([]queue.OutboxBatch, len(reads))
	failed := 0
	for i, r := range reads {
		out[i].QueueID = r.QueueID
		st, g, err := s.group(r.QueueID)
		if err != nil {
			out[i].Err = fmt.Errorf("read outbox %s: %w", r.QueueID, err)
			failed++
			continue
		}
		if r.Pending {
			out[i].Events = s.readPending(r.QueueID, st, g, consumer, count)
			continue
		}
		read := int64(0)
		for _, e := range st.entries {
			if count > 0 && read >= count {
				break
			}
			if e.id.compare(g.delivered) > 0 {
				g.pending[e.id] = &delivery{consumer, s.nowMs()}
				g.delivered = e.id
				g.consumers[consumer] = s.nowMs()
				out[i].Events = append(out[i].Events, e.evs...)
				read++
			}
		}
	}
	if failed == len(reads) {
		return out, fmt.Errorf("read outboxes: %w", out[0].Err)
	}
	return out, nil
}

// readPending delivers consumer's pending entries of st again.
func (s *Store) readPending(q string, st *stream, g *group, consumer string, count int64) []queue.Event {
	g.consumers[consumer] = s.nowMs()
	evs := []queue.Event{}
	for n, id := range g.ids(func(d *delivery) bool { return d.consumer == consumer }) {
		if count > 0 && int64(n) >= count {
			break
		}
		g.pending[id].at = s.nowMs()
		if i, ok := st.find(id); ok {
			evs = append(evs, st.entries[i].evs...)
		} else {
			evs = append(evs, queue.Event{StreamID: id.String(), QueueID: q}) // deleted, not acknowledged
		}
	}
	return evs
}

// ids are the pending entries whose delivery keep says so, in order.
func (g *group) ids(keep func(*delivery) bool) []streamID {
	var ids []streamID
	for id, d := range g.pending {
		if keep(d) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, streamID.compare)
	return ids
}

// OutboxReplicated answers at once: the fake has no replicas to wait for
// (redisstore without RequireReplicas).
func (s *Store) OutboxReplicated(context.Context, []queue.OutboxBatch) error { return nil }

// ClaimOutbox gives consumer up to count (0: 100) of the entries of q's
// outbox pending for at least minIdle, anyone's, in order.
func (s *Store) ClaimOutbox(_ context.Context, q, consumer string, minIdle time.Duration, count int64) ([]queue.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, g, err := s.group(q)
	if err != nil {
		return nil, fmt.Errorf("claim outbox %s: %w", q, err)
	}
	if count <= 0 {
		count = 100
	}
	now := s.nowMs()
	evs := []queue.Event{}
	claimed := int64(0)
	for _, id := range g.ids(func(d *delivery) bool { return now-d.at >= minIdle.Milliseconds() }) {
		if claimed >= count {
			break
		}
		i, ok := st.find(id)
		if !ok {
			delete(g.pending, id) // deleted meanwhile: nothing to claim
			continue
		}
		g.pending[id] = &delivery{consumer, now}
		g.consumers[consumer] = now
		evs = append(evs, st.entries[i].evs...)
		claimed++
	}
	return evs, nil
}

// AckOutboxes acknowledges the batches' events and deletes them from
// their outboxes: the entries they were read from.
func (s *Store) AckOutboxes(_ context.Context, batches []queue.OutboxBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range batches {
		l := s.lines[b.QueueID]
		if l == nil || l.outbox == nil {
			continue
		}
		st := l.outbox
		for _, ev := range b.Events {
			id, ok := parseStreamID(ev.StreamID)
			if !ok {
				return fmt.Errorf("ack outbox: invalid stream id %q", ev.StreamID)
			}
			if st.group != nil {
				delete(st.group.pending, id)
			}
			if i, ok := st.find(id); ok {
				st.entries = slices.Delete(st.entries, i, i+1)
			}
		}
	}
	return nil
}

// OutboxLens is the number of events in each outbox of qs.
func (s *Store) OutboxLens(_ context.Context, qs []string) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(qs))
	for _, q := range qs {
		if l := s.lines[q]; l != nil {
			out[q] = l.outboxLen()
		} else {
			out[q] = 0
		}
	}
	return out, nil
}

// PruneOutboxConsumers deletes the consumers of q's outbox group other than
// self with nothing pending and idle for at least idle.
func (s *Store) PruneOutboxConsumers(_ context.Context, q, self string, idle time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, g, err := s.group(q)
	if err != nil {
		return 0, fmt.Errorf("outbox consumers %s: %w", q, err)
	}
	n := 0
	for name, seen := range g.consumers {
		busy := len(g.ids(func(d *delivery) bool { return d.consumer == name })) > 0
		if name == self || busy || s.nowMs()-seen < idle.Milliseconds() {
			continue
		}
		delete(g.consumers, name)
		n++
	}
	return n, nil
}
