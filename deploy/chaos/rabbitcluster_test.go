package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// flowWindow is how long after a node's kill TokenIssued must keep flowing
// at 90 % of the admission rate; admission must resume within admitBound.
const (
	flowWindow = 15 * time.Second
	minFlow    = 0.9
	admitBound = 5 * time.Second
)

// TestRabbitMQNodeKill runs the four services against a private 3-node
// RabbitMQ cluster (AMQP_URL lists the three nodes; node 1 holds an earlier
// version's classic parking queue) while people enter and every admitted
// person orders, and SIGKILLs a node: the short form (make test, 600
// people) the one holding most of the drill (queue leaders, connections),
// the full form (make chaos, 2,000 people) each node in turn, restarting it
// before the next. Per kill it measures, over the next 15 s, how much of the admission
// rate reached a listener as TokenIssued (at least 90 %), and how long
// admission and the events paused; at the end nobody is admitted or buys
// twice, nothing is oversold, and no event is lost (a duplicate only with
// its event's own id).
func TestRabbitMQNodeKill(t *testing.T) {
	t.Parallel()
	cluster := testenv.StartRabbitCluster(t)
	r := newRig(t)
	r.redisURL, r.amqpURL, r.dbURL = testenv.RedisURL(t), cluster.URL(), testenv.PostgresURL(t)
	rdb := testenv.Redis(t)
	db := pgConn(t, r.dbURL)
	ctx := context.Background()
	l := r.listen(r.amqpURL)
	r.leaveClassicParking(t, cluster)

	const rate = 25
	nUsers, kills := pick(600, 2000), pick(1, 3)
	stock := nUsers * 3 / 4
	gw := start(t, "queue-gateway", r.env(nil), true)
	ord := start(t, "order-service", r.env(nil), true)
	disp := start(t, "admission-dispatcher", r.env(nil), true)
	notif := start(t, "notification-service", r.env(nil), true)
	r.createQueue(gw.URL, rate)
	r.createProduct(ord.URL, stock)
	users := userNames("n", nUsers)

	entered := make(chan []error, 1)
	go func() { entered <- r.enterEach(gw.URL, users, 100) }()
	buyers := r.buyAsAdmitted(ord.URL, rdb, users)
	s := startSampling(t, rdb, l, r.q, nUsers)

	// Kill when a quarter of the run's admissions lie between kills, so
	// each 15 s window falls inside admission.
	var reports []killReport
	brokered := []*testenv.Service{ord, disp, notif}
	everMoved := map[string]bool{}
	victims := r.killOrder(t, cluster)
	for k := range kills {
		due := (2*k + 1) * nUsers / (2*kills + 2)
		if !eventually(time.Duration(nUsers/rate+30)*time.Second, func() bool { return issuedTotal(t, rdb, r.q) >= due }) {
			t.Fatalf("kill %d: %d issued, want %d first", k+1, issuedTotal(t, rdb, r.q), due)
		}
		if k > 0 {
			victims = r.killOrder(t, cluster) // leaders moved with the last kill
			victims = unkilled(victims, reports)
		}
		node := victims[0]
		before := reconnects(brokered)
		killed := time.Now()
		cluster.Kill(node)
		time.Sleep(flowWindow)
		rep := s.report(node, killed)
		after := reconnects(brokered)
		var moved []string
		for i, p := range brokered {
			if after[i] > before[i] {
				moved = append(moved, p.Name)
				everMoved[p.Name] = true
			}
		}
		rep.reconnected = "none"
		if len(moved) > 0 {
			rep.reconnected = strings.Join(moved, ", ")
		}
		reports = append(reports, rep)
		t.Logf("kill %d: %s", k+1, rep)
		for _, p := range []*testenv.Service{gw, ord, disp, notif} {
			if !eventually(10*time.Second, func() bool { return testenv.Readyz(p.OpsURL) == http.StatusOK }) {
				t.Errorf("kill %d: %s /readyz %d 10 s after the kill; log:\n%s", k+1, p.Name, testenv.Readyz(p.OpsURL), p.Tail())
			}
		}
		if k < kills-1 {
			cluster.Start(node)
		}
	}
	if kills == 3 { // every node died once: so did every connection
		for _, p := range brokered {
			if !everMoved[p.Name] {
				t.Errorf("%s never reconnected, though every node was killed once", p.Name)
			}
		}
	}
	for _, err := range <-entered {
		t.Errorf("enter: %v", err)
	}
	outcome := buyers.wait()
	s.stop()
	for _, err := range outcome.errs {
		t.Error(err)
	}

	// Wait for the last events, then count.
	issued := issuedTotal(t, rdb, r.q)
	var orders, boughtTwice int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM orders WHERE queue_id = $1", r.q).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, "SELECT count(*) FROM (SELECT user_id FROM orders GROUP BY user_id HAVING count(*) > 1) d").Scan(&boughtTwice); err != nil {
		t.Fatal(err)
	}
	wantCreated, wantFailed := outboxIDs(t, db, events.RoutingKeyOrderCreated), outboxIDs(t, db, events.RoutingKeyOrderFailed)
	var tokens tokenEvents
	lost := func() int {
		tokens = tokenEventsOf(l, r.q)
		return max(0, issued-len(tokens.ids)) + missing(wantCreated, l.distinct(events.RoutingKeyOrderCreated)) + missing(wantFailed, l.distinct(events.RoutingKeyOrderFailed))
	}
	eventually(30*time.Second, func() bool { return lost() == 0 })
	lostEvents := lost()

	// Everyone admitted once; each event under one id only.
	lostPlaces, admittedTwice := 0, 0
	for _, u := range users {
		switch n := len(tokens.of[u]); {
		case n == 0:
			lostPlaces++
		case n > 1:
			admittedTwice++
			t.Errorf("%s admitted %d times: %v", u, n, tokens.of[u])
		}
	}
	renamed := 0 // one event published under two ids
	for tok, ids := range tokens.ids {
		if len(ids) > 1 {
			renamed++
			t.Errorf("TokenIssued of token %s under %d message ids", tok, len(ids))
		}
	}
	created := map[string]map[string]bool{} // order id -> message ids of its OrderCreated
	for _, e := range l.byKey(events.RoutingKeyOrderCreated) {
		if m, ok := e.msg.(*v1.OrderCreated); ok {
			if created[m.GetOrderId()] == nil {
				created[m.GetOrderId()] = map[string]bool{}
			}
			created[m.GetOrderId()][e.messageID] = true
		}
	}
	for id, ids := range created {
		if len(ids) > 1 {
			renamed++
			t.Errorf("OrderCreated of order %s under %d message ids", id, len(ids))
		}
	}
	deliveries := len(l.Keyed(events.RoutingKeyTokenIssued)) + len(l.Keyed(events.RoutingKeyOrderCreated)) + len(l.Keyed(events.RoutingKeyOrderFailed))
	distinct := len(tokens.ids) + len(l.distinct(events.RoutingKeyOrderCreated)) + len(l.distinct(events.RoutingKeyOrderFailed))

	worstFlow, worstAdmit, worstEvents := 1e9, time.Duration(0), time.Duration(0)
	for _, rep := range reports {
		worstFlow = min(worstFlow, rep.flow)
		worstAdmit, worstEvents = max(worstAdmit, rep.admissionPause), max(worstEvents, rep.eventPause)
	}
	t.Logf("%d people, stock %d: issued %d, orders %d (created %d, sold out %d, %d attempts retried after 503); events: %d distinct, %d deliveries, %d lost, %d under a second id",
		nUsers, stock, issued, orders, outcome.created, outcome.soldOut, outcome.retried, distinct, deliveries, lostEvents, renamed)
	t.Logf("places lost %d, admitted twice %d, bought twice %d, oversold %d; worst over %d kill(s): TokenIssued %.0f %% of the admission rate within 15 s, longest wait for the next token %s, for the next TokenIssued %s",
		lostPlaces, admittedTwice, boughtTwice, max(0, orders-stock), kills, 100*worstFlow, worstAdmit.Round(time.Millisecond), worstEvents.Round(time.Millisecond))
	summary(t, "rabbitmq-node-kill", distinct, lostEvents, admittedTwice+boughtTwice+renamed, len(reports), worstEvents)
	for _, rep := range reports {
		if rep.flow < minFlow || rep.admissionPause > admitBound {
			t.Errorf("kill of node %d: TokenIssued at %.0f %% of admission within 15 s (want >= %.0f %%), admission paused %s (want under %s)",
				rep.node+1, 100*rep.flow, 100*minFlow, rep.admissionPause.Round(time.Millisecond), admitBound)
		}
	}
	if lostPlaces != 0 || admittedTwice != 0 || boughtTwice != 0 || orders != stock || outcome.created != stock ||
		outcome.soldOut != nUsers-stock || issued != nUsers || lostEvents != 0 || renamed != 0 || len(reports) != kills {
		t.Fatalf("places lost %d, admitted twice %d, bought twice %d, orders %d (created %d, sold out %d), issued %d, events lost %d, renamed %d, kills %d; want 0, 0, 0, %d (%d, %d), %d, 0, 0, %d",
			lostPlaces, admittedTwice, boughtTwice, orders, outcome.created, outcome.soldOut, issued, lostEvents, renamed, len(reports), stock, stock, nUsers-stock, nUsers, kills)
	}
}

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

// killOrder lists the nodes to kill: first the one holding most of the
// drill (the leaders of its quorum queues, the connections of its services
// and listener), a tie going to the parking queue's leader.
func (r *rig) killOrder(t *testing.T, cluster *testenv.RabbitCluster) []int {
	t.Helper()
	var leaders map[string]int
	var conns [][]string
	var err error
	for via := range 3 { // one may be down
		if leaders, err = cluster.Leaders(via); err == nil {
			if conns, err = cluster.Connections(via); err == nil {
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("queue leaders and connections: %v", err)
	}
	held := make([]int, 3)
	desc := make([][]string, 3)
	for q, n := range leaders {
		switch {
		case q == r.exchange+broker.UnroutedSuffix: // the old classic queue holds up nothing
			desc[n] = append(desc[n], "home of "+strings.TrimPrefix(q, r.exchange))
		case strings.HasPrefix(q, r.exchange+"."):
			held[n]++
			desc[n] = append(desc[n], "leader of "+strings.TrimPrefix(q, r.exchange))
		}
	}
	for n, names := range conns {
		held[n] += len(names)
		desc[n] = append(desc[n], names...)
	}
	parked := leaders[r.exchange+broker.ParkedSuffix]
	order := []int{0, 1, 2}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if held[a] != held[b] {
			return held[a] > held[b]
		}
		return a == parked && b != parked
	})
	var lines []string
	for n := range desc {
		sort.Strings(desc[n])
		lines = append(lines, fmt.Sprintf("node %d: %s", n+1, strings.Join(desc[n], ", ")))
	}
	t.Logf("%s; kill order %v (node numbers from 0)", strings.Join(lines, "; "), order)
	return order
}

// leaveClassicParking makes the cluster look like one upgraded from a
// version that parked unrouted events in the classic queue
// "<exchange>.unrouted" (on node 1, holding an event): the services must
// unbind it and never wait for it, though one of the kills takes its node.
func (r *rig) leaveClassicParking(t *testing.T, cluster *testenv.RabbitCluster) {
	t.Helper()
	conn, err := amqp.Dial(cluster.NodeURL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := r.exchange + broker.UnroutedSuffix
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-max-length": int64(100_000), "x-overflow": "drop-head"}); err != nil {
		t.Fatalf("declare the classic parking queue: %v", err)
	}
	if err := ch.Publish("", q, false, false, amqp.Publishing{MessageId: "parked-by-an-earlier-version", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

// reconnects counts each service's broker reconnects so far.
func reconnects(ps []*testenv.Service) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Lines("broker: reconnected")
	}
	return out
}

// unkilled drops the nodes killed already, keeping the order.
func unkilled(order []int, done []killReport) []int {
	var out []int
	for _, n := range order {
		seen := false
		for _, d := range done {
			seen = seen || d.node == n
		}
		if !seen {
			out = append(out, n)
		}
	}
	return out
}

// enterEach enters every user at perSec through the gateway, each in its own
// goroutine, and returns every refusal: an enter answered 200 is an
// acknowledged place.
func (r *rig) enterEach(gateway string, users []string, perSec int) []error {
	tick := time.NewTicker(time.Second / time.Duration(perSec))
	defer tick.Stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(users))
	for _, u := range users {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := r.call(http.MethodPost, gateway+"/api/v1/queues/"+r.q+"/enter", u, "", "", nil); res.status != http.StatusOK {
				errs <- fmt.Errorf("%s: %d %v", u, res.status, res.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// buying is every buyer of a drill: started as each is admitted, each
// orders once its token is in Redis, again after a 503 (the token comes
// back after a failure that consumed it), until 201 or sold out.
type buying struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	out  buyOutcome
	done chan struct{}
}

type buyOutcome struct {
	created, soldOut, retried int
	errs                      []error
}

// buyAsAdmitted walks the users in entry order (the order they are
// admitted in, but for enters that overtook each other), one Redis read per
// 50 ms, and starts each one's buyer as their token appears.
func (r *rig) buyAsAdmitted(orderSvc string, rdb redis.UniversalClient, users []string) *buying {
	b := &buying{done: make(chan struct{})}
	keys := redisstore.KeysFor(r.q)
	ctx := context.Background()
	secret := func(u string) string {
		s, _ := rdb.HGet(ctx, keys.Token(u), redisstore.TokenFieldSecret).Result()
		return s
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		deadline := time.Now().Add(time.Duration(len(users))*time.Second/10 + 2*time.Minute)
		for _, u := range users {
			for secret(u) == "" {
				if time.Now().After(deadline) {
					b.fail(fmt.Errorf("%s: no token by the deadline", u))
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.buy(r, orderSvc, u, secret)
			}()
		}
	}()
	go func() { b.wg.Wait(); close(b.done) }()
	return b
}

func (b *buying) buy(r *rig, orderSvc, u string, secret func(string) string) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		tok := secret(u)
		if tok == "" { // consumed by an attempt that failed; coming back
			time.Sleep(100 * time.Millisecond)
			continue
		}
		res := r.order(orderSvc, u, tok)
		b.mu.Lock()
		switch {
		case res.status == http.StatusCreated:
			b.out.created++
			b.mu.Unlock()
			return
		case res.status == http.StatusConflict && res.body["type"] == "sold-out":
			b.out.soldOut++
			b.mu.Unlock()
			return
		case res.status == http.StatusServiceUnavailable || res.status == 0:
			b.out.retried++
			b.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		default:
			b.out.errs = append(b.out.errs, fmt.Errorf("order by %s: %d %v", u, res.status, res.body))
			b.mu.Unlock()
			return
		}
	}
	b.fail(fmt.Errorf("%s: no order outcome within 2 minutes", u))
}

func (b *buying) fail(err error) {
	b.mu.Lock()
	b.out.errs = append(b.out.errs, err)
	b.mu.Unlock()
}

// wait returns once every buyer is done.
func (b *buying) wait() buyOutcome {
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out
}

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
