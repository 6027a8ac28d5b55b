package chaos

import (
	"context"
	"testing"

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
