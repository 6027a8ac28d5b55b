package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// sampling records, every 200 ms, how many tokens were issued (Redis) and
// how many distinct TokenIssued the listener has.
type sampling struct {
	t        *testing.T
	want     int // tokens the drill issues in all
	mu       sync.Mutex
	samples  []sample
	quit     chan struct{}
	finished chan struct{}
}

type sample struct {
	at                time.Time
	issued, delivered int
}

func startSampling(t *testing.T, rdb redis.UniversalClient, l *listener, q string, want int) *sampling {
	s := &sampling{t: t, want: want, quit: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(s.finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			ids := map[string]bool{}
			for _, d := range l.Keyed(events.RoutingKeyTokenIssued) {
				ids[d.MessageID] = true
			}
			v, _ := rdb.HGet(context.Background(), redisstore.KeysFor(q).Dispatch(), redisstore.DispatchFieldIssuedTotal).Int()
			s.mu.Lock()
			s.samples = append(s.samples, sample{at: time.Now(), issued: v, delivered: len(ids)})
			s.mu.Unlock()
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *sampling) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.finished
}

// killReport is what one kill did, over the flowWindow after it.
type killReport struct {
	node int
	// flow is TokenIssued delivered over tokens issued in the window.
	flow float64
	// admissionPause and eventPause are the longest stretches in the
	// window without a token issued, without a TokenIssued delivered.
	admissionPause, eventPause time.Duration
	issued, delivered          int
	// reconnected names the services whose broker connection the kill
	// broke (it was on that node).
	reconnected string
}

func (k killReport) String() string {
	return fmt.Sprintf("node %d SIGKILLed: in the next 15 s %d tokens issued and %d TokenIssued delivered (%.0f %%); longest wait for the next token %s, for the next TokenIssued %s (sampled every 200 ms); reconnected: %s",
		k.node+1, k.issued, k.delivered, 100*k.flow, k.admissionPause.Round(time.Millisecond), k.eventPause.Round(time.Millisecond), k.reconnected)
}

func (s *sampling) report(node int, killed time.Time) killReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := killReport{node: node}
	var first, last *sample
	var lastIssue, lastDelivery time.Time
	for i := range s.samples {
		sm := &s.samples[i]
		if sm.at.Before(killed) {
			first = sm // the last sample before the kill
			continue
		}
		if sm.at.After(killed.Add(flowWindow)) {
			break
		}
		if first == nil || i == 0 {
			first = sm
			continue
		}
		if lastIssue.IsZero() {
			lastIssue, lastDelivery = killed, killed
		}
		// A pause is the time from the kill or the last sample that saw
		// progress to the next one that does: 200 ms with no pause at all.
		prev := s.samples[i-1]
		if sm.issued > prev.issued {
			rep.admissionPause = max(rep.admissionPause, sm.at.Sub(lastIssue))
			lastIssue = sm.at
		}
		if sm.delivered > prev.delivered {
			rep.eventPause = max(rep.eventPause, sm.at.Sub(lastDelivery))
			lastDelivery = sm.at
		}
		last = sm
	}
	if first == nil || last == nil {
		s.t.Errorf("no samples around the kill of node %d", node+1)
		return rep
	}
	// The stretch since the last progress counts while there is more to come.
	if last.issued < s.want {
		rep.admissionPause = max(rep.admissionPause, last.at.Sub(lastIssue))
	}
	if last.delivered < s.want {
		rep.eventPause = max(rep.eventPause, last.at.Sub(lastDelivery))
	}
	rep.issued, rep.delivered = last.issued-first.issued, last.delivered-first.delivered
	if rep.issued > 0 {
		rep.flow = float64(rep.delivered) / float64(rep.issued)
	}
	return rep
}
