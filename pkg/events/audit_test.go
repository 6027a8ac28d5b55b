package events_test

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// auditDraw is the check docs/EVENTS.md tells an auditor to run, written
// from the events alone with nothing but the standard library: the seed
// matches the commitment of QueueStarted, and the admitted people whose
// sequence came from the draw were placed in ascending HMAC-SHA256 order.
// It returns how many admissions it checked.
func auditDraw(started *v1.QueueStarted, drawn *v1.QueueDrawn, issued []*v1.TokenIssued) (int, error) {
	seed, err := hex.DecodeString(drawn.GetSeed())
	if err != nil || len(seed) != 32 {
		return 0, fmt.Errorf("seed %q is not 32 hex-encoded bytes", drawn.GetSeed())
	}
	sum := sha256.Sum256(seed)
	if got := hex.EncodeToString(sum[:]); got != started.GetSeedSha256() || got != drawn.GetSeedSha256() {
		return 0, fmt.Errorf("sha256(seed) = %s, committed %s", got, started.GetSeedSha256())
	}
	var drawnTokens []*v1.TokenIssued
	for _, t := range issued {
		if t.GetQueueId() == drawn.GetQueueId() &&
			t.GetSequence() >= drawn.GetFirstSequence() && t.GetSequence() <= drawn.GetLastSequence() {
			drawnTokens = append(drawnTokens, t)
		}
	}
	slices.SortFunc(drawnTokens, func(a, b *v1.TokenIssued) int { return cmp.Compare(a.GetSequence(), b.GetSequence()) })
	var prev []byte
	for _, t := range drawnTokens {
		m := hmac.New(sha256.New, seed)
		m.Write([]byte(t.GetUserId()))
		key := m.Sum(nil)
		if prev != nil && bytes.Compare(prev, key) > 0 {
			return 0, fmt.Errorf("%s (sequence %d) was placed after someone with a higher draw key", t.GetUserId(), t.GetSequence())
		}
		prev = key
	}
	return len(drawnTokens), nil
}

// drawnQueue is a queue's events around a draw as a consumer receives them:
// published from the outbox (FromOutbox), marshalled, decoded by type.
type drawnQueue struct {
	started *v1.QueueStarted
	drawn   *v1.QueueDrawn
	issued  []*v1.TokenIssued
}

// newDrawnQueue draws 200 pre-queued people with a fresh seed the way the
// dispatcher does (queue.DrawOrder) and gives them sequence numbers from
// 5001 in drawn order. Every 7th in drawn order left before being placed (a
// gap), the last 20 placed are still waiting (no token), and 10 who entered
// after the start were admitted behind them: 151 drawn admissions.
func newDrawnQueue(t *testing.T) drawnQueue {
	t.Helper()
	seed, sha, err := queue.NewDrawSeed()
	if err != nil {
		t.Fatal(err)
	}
	users := make([]string, 200)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
	}
	order, err := queue.DrawOrder(seed, users)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	const first = 5001
	var placed []queue.Event
	for i, u := range order {
		if i%7 == 3 {
			continue
		}
		placed = append(placed, queue.Event{Type: queue.EventTokenIssued, ID: u + ".issued", QueueID: "drop", UserID: u,
			TokenID: "t-" + u, Seq: first + int64(i), OccurredAt: at.Add(time.Minute)})
	}
	last := placed[len(placed)-1].Seq
	out := []queue.Event{
		{Type: queue.EventQueueStarted, ID: "drop.started", QueueID: "drop", StartsAt: at, SeedSHA256: sha,
			PreQueued: 200, OccurredAt: at},
		{Type: queue.EventQueueDrawn, ID: "drop.drawn", QueueID: "drop", Seed: seed, SeedSHA256: sha, PreQueued: 200,
			Placed: int64(len(placed)), FirstSeq: first, LastSeq: last, OccurredAt: at.Add(time.Second)},
	}
	out = append(out, placed[:len(placed)-20]...)
	for i := range 10 {
		u := fmt.Sprintf("late-%d", i)
		out = append(out, queue.Event{Type: queue.EventTokenIssued, ID: u + ".issued", QueueID: "drop", UserID: u,
			TokenID: "t-" + u, Seq: last + 1 + int64(i), OccurredAt: at.Add(2 * time.Minute)})
	}

	var q drawnQueue
	for _, e := range out {
		m, _, err := events.FromOutbox(e)
		if err != nil {
			t.Fatal(err)
		}
		body, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.Decode(events.TypeName(m), body)
		if err != nil {
			t.Fatal(err)
		}
		switch m := got.(type) {
		case *v1.QueueStarted:
			q.started = m
		case *v1.QueueDrawn:
			q.drawn = m
		case *v1.TokenIssued:
			q.issued = append(q.issued, m)
		}
	}
	if q.started == nil || q.drawn == nil || len(q.issued) != 161 {
		t.Fatalf("decoded started %v, drawn %v, %d TokenIssued; want both and 161", q.started != nil, q.drawn != nil, len(q.issued))
	}
	return q
}

func TestAuditDrawPasses(t *testing.T) {
	q := newDrawnQueue(t)
	if q.drawn.GetPlaced() != 171 || q.drawn.GetPreQueued() != 200 || q.drawn.GetFirstSequence() != 5001 {
		t.Errorf("QueueDrawn placed %d of %d from %d, want 171 of 200 from 5001",
			q.drawn.GetPlaced(), q.drawn.GetPreQueued(), q.drawn.GetFirstSequence())
	}
	if q.drawn.GetUserId() != "" || q.started.GetUserId() != "" {
		t.Errorf("user_id = %q, %q; want empty", q.started.GetUserId(), q.drawn.GetUserId())
	}
	n, err := auditDraw(q.started, q.drawn, q.issued)
	if err != nil || n != 151 {
		t.Errorf("audit = %d, %v; want 151 drawn admissions checked, nil", n, err)
	}
}

// The audit must be able to fail: a seed other than the committed one, and
// two drawn people whose places were swapped.
func TestAuditDrawCatches(t *testing.T) {
	t.Run("another seed", func(t *testing.T) {
		q := newDrawnQueue(t)
		other, _, err := queue.NewDrawSeed()
		if err != nil {
			t.Fatal(err)
		}
		q.drawn.Seed = other
		if n, err := auditDraw(q.started, q.drawn, q.issued); err == nil {
			t.Errorf("audit with an uncommitted seed = %d, nil; want an error", n)
		}
	})
	t.Run("swapped places", func(t *testing.T) {
		q := newDrawnQueue(t)
		q.issued[10].Sequence, q.issued[11].Sequence = q.issued[11].Sequence, q.issued[10].Sequence
		if n, err := auditDraw(q.started, q.drawn, q.issued); err == nil {
			t.Errorf("audit of a swapped order = %d, nil; want an error", n)
		}
	})
}
