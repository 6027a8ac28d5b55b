package chaos

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// admitAll enters users and returns each one's entry token and token id.
func (r *rig) admitAll(gateway string, users []string) map[string][2]string {
	r.enterAll(gateway, users, 200)
	out := map[string][2]string{}
	for _, u := range users {
		adm := r.waitAdmitted(gateway, u, 30*time.Second)
		out[u] = [2]string{adm["token"].(string), ""}
	}
	return out
}

func tokenID(t *testing.T, r *rig, user string) string {
	rdb := testenv.Redis(t)
	m, err := rdb.Get(context.Background(), redisstore.KeysFor(r.q).Status(user)).Result()
	tok, _, held := redisstore.ParseTokenMarker(m)
	if err != nil || !held {
		t.Fatalf("token id of %s: marker %q %v", user, m, err)
	}
	return tok.ID
}

// cuttableDatabase gives the rig's order-service a fresh database behind a
// proxy the drill can cut; direct is the database's own URL, for checks.
func (r *rig) cuttableDatabase(t *testing.T) (direct string, proxy *testenv.Proxy) {
	direct = testenv.PostgresURL(t)
	proxy = testenv.StartProxy(t, testenv.PostgresAddr(t, direct))
	r.dbURL = testenv.PostgresURLVia(t, direct, proxy.Addr())
	return direct, proxy
}

// startBuyers starts a gateway, an order-service with orderEnv and a
// dispatcher, opens the rig's queue at 100/s with stock for ten orders per
// buyer, and admits n buyers named prefix0000 and on: their tokens (as
// admitAll returns them) and entry token ids, by user.
func (r *rig) startBuyers(t *testing.T, orderEnv map[string]string, prefix string, n int) (
	gw, ord *testenv.Service, users []string, toks map[string][2]string, ids map[string]string,
) {
	gw = start(t, "queue-gateway", r.env(nil), true)
	ord = start(t, "order-service", orderEnv, true)
	start(t, "admission-dispatcher", r.env(nil), true)
	r.createQueue(gw.URL, 100)
	r.createProduct(ord.URL, 10*n)
	users = userNames(prefix, n)
	toks = r.admitAll(gw.URL, users)
	ids = map[string]string{}
	for _, u := range users {
		ids[u] = tokenID(t, r, u)
	}
	return gw, ord, users, toks, ids
}

func pgConn(t *testing.T, url string) *pgx.Conn {
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func ordersFor(t *testing.T, db *pgx.Conn, tokenID string) int {
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM orders WHERE entry_token_id = $1", tokenID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func want503(t *testing.T, what string, res response) bool {
	if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" {
		t.Errorf("%s with Redis down: %d Retry-After=%q %v; want 503 with Retry-After", what, res.status, res.header.Get("Retry-After"), res.body)
		return false
	}
	return true
}

// TestRedisRestart stops a private Redis under the gateway, dispatcher and
// order-service: they answer 503 with Retry-After and keep running; Redis
// comes back empty, the queue is recreated, and they serve again.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rs := testenv.StartRedisServer(t)
	r.redisURL, r.amqpURL, r.dbURL = rs.URL(), testenv.AMQPURL(t), testenv.PostgresURL(t)
	r.deleteTopology()
	gw := start(t, "queue-gateway", r.env(nil), true)
	ord := start(t, "order-service", r.env(nil), true)
	disp := start(t, "admission-dispatcher", r.env(nil), true)
	procs := []*testenv.Service{gw, ord, disp}
	r.createQueue(gw.URL, 50)
	r.createProduct(ord.URL, 100)
	r.enterAll(gw.URL, []string{"ann"}, 10)
	token := r.waitAdmitted(gw.URL, "ann", 20*time.Second)["token"].(string)

	rs.Stop()
	ok := 0
	rounds := testenv.Pick(1, 5)
	for range rounds {
		for _, c := range []struct {
			what string
			res  response
		}{
			{"enter", r.call(http.MethodPost, gw.URL+"/api/v1/queues/"+r.q+"/enter", "ben", "", "", nil)},
			{"position", r.position(gw.URL, "ann")},
			{"order", r.order(ord.URL, "ann", token)},
		} {
			if want503(t, c.what, c.res) {
				ok++
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, p := range procs {
		if !eventually(5*time.Second, func() bool { return testenv.Readyz(p.OpsURL) == http.StatusServiceUnavailable }) {
			t.Errorf("%s /readyz with Redis down: %d, want 503", p.Name, testenv.Readyz(p.OpsURL))
		} else {
			ok++
		}
	}
	for _, p := range procs {
		if !p.Alive() {
			t.Fatalf("%s exited with Redis down; log:\n%s", p.Name, p.Tail())
		}
	}

	back := time.Now()
	rs.Start()
	recovered := 0
	for _, p := range procs {
		if eventually(15*time.Second, func() bool { return testenv.Readyz(p.OpsURL) == http.StatusOK }) {
			recovered++
		} else {
			t.Errorf("%s /readyz after Redis came back: %d; log:\n%s", p.Name, testenv.Readyz(p.OpsURL), p.Tail())
		}
	}
	gap := time.Since(back)
	r.createQueue(gw.URL, 50)
	if res := r.call(http.MethodPost, gw.URL+"/api/v1/queues/"+r.q+"/enter", "cat", "", "", nil); res.status != http.StatusOK {
		t.Fatalf("enter after Redis came back: %d %v", res.status, res.body)
	}
	ok++
	tok := r.waitAdmitted(gw.URL, "cat", 20*time.Second)["token"].(string)
	if res := r.order(ord.URL, "cat", tok); res.status != http.StatusCreated {
		t.Fatalf("order after Redis came back: %d %v\n%s", res.status, res.body, ord.Tail())
	}
	ok++
	if res := r.position(gw.URL, "ann"); res.status != http.StatusOK {
		t.Fatalf("position after Redis came back: %d %v", res.status, res.body)
	}
	ok++
	for _, p := range procs {
		if !p.Alive() {
			t.Fatalf("%s exited; log:\n%s", p.Name, p.Tail())
		}
	}
	summary(t, "redis-restart", ok, 0, 0, recovered, gap)
	if want := 3*rounds + 3 + 3; ok != want || recovered != 3 {
		t.Fatalf("ok=%d recovered=%d; want ok=%d recovered=3", ok, recovered, want)
	}
}

// TestOrderServiceSIGKILLBeforeCommit kills the order-service while orders
// hang on a cut database after the token was consumed in Redis: each token
// ends either ordered or restored, never both, never neither.
func TestOrderServiceSIGKILLBeforeCommit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.redisURL, r.amqpURL = testenv.RedisURL(t), testenv.AMQPURL(t)
	direct, pgProxy := r.cuttableDatabase(t)
	r.deleteTopology()
	db := pgConn(t, direct)
	orderEnv := r.env(map[string]string{"ORDER_LEASE": "2s", "ORDER_TX_TIMEOUT": "500ms", "REAPER_INTERVAL": "200ms"})
	n := testenv.Pick(12, 60)
	gw, ord, users, toks, ids := r.startBuyers(t, orderEnv, "k", n)

	pgProxy.Cut()
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.order(ord.URL, u, toks[u][0]) }()
	}
	time.Sleep(150 * time.Millisecond)
	killed := time.Now()
	ord.Kill()
	wg.Wait()
	pgProxy.Restore()
	ord2 := start(t, "order-service", orderEnv, true)

	// Settled: each token is ordered xor back in the user's hands.
	type outcome struct{ ordered, admitted bool }
	state := func(u string) outcome {
		p := r.position(gw.URL, u)
		return outcome{ordersFor(t, db, ids[u]) > 0, p.status == http.StatusOK && p.body["state"] == "ADMITTED" && p.body["token"] == toks[u][0]}
	}
	settled := eventually(20*time.Second, func() bool {
		for _, u := range users {
			if s := state(u); s.ordered == s.admitted {
				return false
			}
		}
		return true
	})
	gap := time.Since(killed)
	ordered, restored, lost, dup := 0, 0, 0, 0
	var back []string
	for _, u := range users {
		s := state(u)
		switch {
		case s.ordered && s.admitted:
			dup++
			t.Errorf("%s: ordered and admitted again", u)
		case s.ordered:
			ordered++
		case s.admitted:
			restored++
			back = append(back, u)
		default:
			lost++
			t.Errorf("%s: neither ordered nor restored: %v", u, r.position(gw.URL, u).body)
		}
	}
	// The restored tokens order, as buyers do: after a 503 (a transaction
	// past ORDER_TX_TIMEOUT on a loaded machine; its token comes back)
	// they try again after Retry-After.
	reordered := 0
	for _, u := range back {
		var res response
		for try := 0; try < 20; try++ {
			if res = r.order(ord2.URL, u, toks[u][0]); res.status != http.StatusServiceUnavailable {
				break
			}
			time.Sleep(pause(res))
		}
		if res.status == http.StatusCreated {
			reordered++
		} else {
			t.Errorf("order by %s with its restored token: %d %v", u, res.status, res.body)
		}
	}
	for _, u := range users {
		if c := ordersFor(t, db, ids[u]); c != 1 {
			t.Errorf("%s: %d orders at the end, want 1", u, c)
		}
	}
	t.Logf("ordered before the kill=%d restored=%d reordered=%d settled=%v", ordered, restored, reordered, settled)
	summary(t, "order-sigkill", ordered+reordered, lost, dup, restored, gap)
	if !settled || lost != 0 || dup != 0 || ordered+restored != n || reordered != restored {
		t.Fatalf("settled=%v ordered=%d restored=%d reordered=%d lost=%d dup=%d of %d", settled, ordered, restored, reordered, lost, dup, n)
	}
}

// TestPostgresCutDuringOrders cuts the database under concurrent orders:
// each gets 503, OrderFailed(restorable) is published, and the dispatcher
// gives every token back.
func TestPostgresCutDuringOrders(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.redisURL, r.amqpURL = testenv.RedisURL(t), testenv.AMQPURL(t)
	direct, pgProxy := r.cuttableDatabase(t)
	r.deleteTopology()
	l := r.listen(r.amqpURL)
	db := pgConn(t, direct)
	n := testenv.Pick(20, 100)
	gw, ord, users, toks, ids := r.startBuyers(t, r.env(map[string]string{"ORDER_TX_TIMEOUT": "1s"}), "p", n)

	pgProxy.Cut()
	cut := time.Now()
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := r.order(ord.URL, u, toks[u][0])
			if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" {
				t.Errorf("order by %s with the database cut: %d %v", u, res.status, res.body)
			}
			statuses <- res.status
		}()
	}
	wg.Wait()
	close(statuses)
	failed := 0
	for s := range statuses {
		if s == http.StatusServiceUnavailable {
			failed++
		}
	}
	restored := 0
	for _, u := range users {
		adm := r.waitAdmitted(gw.URL, u, 20*time.Second)
		if adm["token"] == toks[u][0] {
			restored++
		} else {
			t.Errorf("%s: a different token after restore", u)
		}
	}
	gap := time.Since(cut)
	restorable := func() map[string]bool {
		out := map[string]bool{}
		for _, e := range l.byKey(events.RoutingKeyOrderFailed) {
			if m, ok := e.msg.(*v1.OrderFailed); ok && m.GetRestorable() && m.GetQueueId() == r.q {
				out[m.GetTokenId()] = true
			}
		}
		return out
	}
	eventually(10*time.Second, func() bool { return len(restorable()) >= n })
	published := restorable()
	for _, u := range users {
		if !published[ids[u]] {
			t.Errorf("%s: no OrderFailed(restorable) for token %s", u, ids[u])
		}
	}
	pgProxy.Restore()
	recovered, dup := 0, 0
	for _, u := range users {
		var st int
		eventually(20*time.Second, func() bool { st = r.order(ord.URL, u, toks[u][0]).status; return st != http.StatusServiceUnavailable })
		if st == http.StatusCreated {
			recovered++
		} else {
			t.Errorf("order by %s after the database came back: %d", u, st)
		}
		if c := ordersFor(t, db, ids[u]); c > 1 {
			dup++
		}
	}
	t.Logf("failed(503)=%d OrderFailed(restorable)=%d restored=%d ordered after restore=%d", failed, len(published), restored, recovered)
	summary(t, "postgres-cut", restored, n-restored, dup, recovered, gap)
	if failed != n || restored != n || len(published) != n || recovered != n || dup != 0 {
		t.Fatalf("failed=%d published=%d restored=%d recovered=%d dup=%d; want %d each and dup=0", failed, len(published), restored, recovered, dup, n)
	}
}

func pgxStrings(rows pgx.Rows) ([]string, error) {
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
