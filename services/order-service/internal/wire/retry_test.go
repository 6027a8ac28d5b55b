package wire

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// A buyer's token consumption whose Redis reply is held past the client's
// 1 s read timeout: Redis took the token, go-redis sends the consume again,
// and the repeat must answer OK (the same order id) rather than "invalid
// token". The buyer gets 201 and exactly one order; twenty buyers in a row.
//
// The harness starts its order-service on the shared Redis; this test
// starts a second replica of the same stack (same database, exchange and
// queue) whose Redis goes through a proxy, and sends the orders to it.
func TestHeldConsumeReplyStillCreatesExactlyOneOrder(t *testing.T) {
	t.Parallel()
	const (
		buyers = 20
		hold   = 1500 * time.Millisecond
		// A call whose reply was held cannot come back before the read
		// timeout (1 s; a little under for the timer's slack).
		heldCall = 950 * time.Millisecond
	)
	s := newStack(t, stackOptions{})
	s.product("p1", 100)
	users := make([]string, buyers)
	for i := range users {
		users[i] = fmt.Sprintf("held-%02d", i)
	}
	secrets := s.admit(users...)

	u, err := url.Parse(s.cfg.Redis.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.StartProxy(t, u.Host)
	u.Host = p.Addr()
	s.cfg.Redis.URL = u.String()
	s.start() // s.url is the proxied replica's from here on

	raw, err := sql.Open("pgx", s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	count := func(q string, args ...any) int {
		var n int
		if err := raw.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	k := redisstore.KeysFor(s.q)
	for i, user := range users {
		st, err := s.store.Position(ctx, s.q, user)
		if err != nil || st.Token == nil {
			t.Fatalf("%s before ordering: %+v %v, want a token", user, st, err)
		}
		tid, secret := st.Token.ID, secrets[user]
		// The consume script is the one call with the token and consumed
		// keys and the secret as an argument.
		parts := [][]byte{[]byte(k.Token(user)), []byte(k.Consumed(user)), []byte(fmt.Sprintf("$%d\r\n%s\r\n", len(secret), secret))}
		p.HoldNextReply(func(req []byte) bool {
			for _, part := range parts {
				if !bytes.Contains(req, part) {
					return false
				}
			}
			return true
		}, hold)
		start := time.Now()
		r := s.order(user, secret, "p1", 1)
		took := time.Since(start)
		if r.status != http.StatusCreated {
			t.Fatalf("order %d with its consume reply held: %d %s", i, r.status, r.body)
		}
		if p.Held() != i+1 || took < heldCall {
			t.Fatalf("order %d: %d replies held in all, answered after %v; want %d held and the answer from the retry", i, p.Held(), took, i+1)
		}
		if n := count(`SELECT count(*) FROM orders WHERE entry_token_id = $1`, tid); n != 1 {
			t.Fatalf("order %d: %d orders with token %s, want 1", i, n, tid)
		}
		if n := count(`SELECT count(*) FROM orders WHERE user_id = $1`, user); n != 1 {
			t.Fatalf("order %d: %d orders of %s, want 1", i, n, user)
		}
		if st, err := s.store.Position(ctx, s.q, user); err != nil || st.State != queue.Ordered {
			t.Fatalf("%s after the order: %s %v, want ORDERED (settled)", user, st.State, err)
		}
	}
	if n := count(`SELECT count(*) FROM orders`); n != buyers {
		t.Fatalf("%d orders, want %d", n, buyers)
	}
	if st := s.stock("p1"); st != 100-buyers {
		t.Fatalf("stock %d, want %d", st, 100-buyers)
	}
	if n := s.store.Client().ZCard(ctx, k.Inflight()).Val(); n != 0 {
		t.Fatalf("%d tokens still in flight after every order settled, want 0", n)
	}
	testenv.WaitFor(t, 15*time.Second, "an OrderCreated per buyer", func() bool {
		return len(uniqueIDs(s.received(&waitingroomv1.OrderCreated{}))) == buyers
	})
	if n := len(s.received(&waitingroomv1.OrderFailed{})); n != 0 {
		t.Fatalf("%d OrderFailed events, want none", n)
	}
	t.Logf("%d orders with the consume reply held %v: all 201, one order row each (%d held replies)", buyers, hold, p.Held())
}
