package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// tokenEvents are the TokenIssued of a queue the listener has: the token
// ids of each user, the message ids of each token.
type tokenEvents struct{ of, ids map[string]map[string]bool }

func tokenEventsOf(l *listener, q string) tokenEvents {
	te := tokenEvents{of: map[string]map[string]bool{}, ids: map[string]map[string]bool{}}
	add := func(m map[string]map[string]bool, k, v string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	for _, e := range l.byKey(events.RoutingKeyTokenIssued) {
		if m, ok := e.msg.(*v1.TokenIssued); ok && m.GetQueueId() == q {
			add(te.of, m.GetUserId(), m.GetTokenId())
			add(te.ids, m.GetTokenId(), e.messageID)
		}
	}
	return te
}

// outboxIDs are the event ids of the order-service's outbox rows with key.
func outboxIDs(t *testing.T, db *pgx.Conn, key string) map[string]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT event_id FROM outbox WHERE routing_key = $1", key)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgxStrings(rows)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// missing counts the ids of want the listener never got.
func missing(want map[string]bool, got map[string]event) int {
	n := 0
	for id := range want {
		if _, ok := got[id]; !ok {
			n++
		}
	}
	return n
}

// Admission resumed at the first admission more than 250 ms after the
// fault: those within it were on their way when it struck.
func TestResumedAfterSkipsWhatWasOnItsWay(t *testing.T) {
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	ms := func(d int) time.Time { return at.Add(time.Duration(d) * time.Millisecond) }
	for _, tc := range []struct {
		name  string
		times []time.Time
		want  time.Duration
	}{
		{"stopped at once", []time.Time{ms(-20), ms(-10), ms(2500), ms(2510), ms(2520)}, 2500 * time.Millisecond},
		{"one on the way", []time.Time{ms(-10), ms(50), ms(3000), ms(3010)}, 3000 * time.Millisecond},
		{"none after", []time.Time{ms(-10), ms(100)}, -1},
	} {
		if got := resumedAfter(tc.times, at); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
