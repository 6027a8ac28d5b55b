package wire

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

const testSecret = "order-test-secret-0123456789abcdef-xyz"

// testEntryKey signs the tests' entry tokens, as the dispatcher's
// ENTRY_TOKEN_KEYS would; the stack's order-service checks them with it.
const testEntryKey = "order-test-entry-token-key-0123456789abcdef"

// entrySigner signs entry tokens with testEntryKey.
func entrySigner(t *testing.T) *grant.Signer {
	t.Helper()
	s, err := grant.NewSigner([]byte(testEntryKey))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stack is an order-service wired as in production (HTTP, relay, reaper) on
// real Redis, PostgreSQL and RabbitMQ, with its own database, exchange and
// queue; plus a listener for its events and, when asked, a stand-in for the
// dispatcher's restoration consumer.
type stack struct {
	t     *testing.T
	q     string
	cfg   Config
	url   string
	ops   string // the ops listener's URL
	store *redisstore.Store
	ver   *auth.Verifier
	conn  *broker.Conn
	lead  int64 // the test's leader epoch for issuing tokens
	dbURL string

	pgProxy, amqpProxy *testenv.Proxy
	redisProxy         *testenv.Proxy

	listener *testenv.Listener
	// health records the order.health reports, when they are on.
	health *testenv.Listener
	// redis is the stack's own redis-server, when it has one.
	redis *testenv.RedisServer
	// queueCfg, when set, sets more of the queue's knobs in configure.
	queueCfg func(*queue.Config)
}

type stackOptions struct {
	pgProxy, amqpProxy bool
	rateLimit          int
	userRateLimit      int
	lease, txTimeout   time.Duration
	// retention turns the retention job on, with this for both tables.
	retention time.Duration
	// health turns the health reports on, this often, and listens to them
	// (s.health).
	health time.Duration
	// privateRedis gives the stack a redis-server of its own (s.redis),
	// which the test may stop and start.
	privateRedis bool
	// redisProxy puts a proxy (s.redisProxy) between the order-service and
	// its Redis; redisQuery is added to the service's REDIS_URL (client
	// options such as pool_size).
	redisProxy bool
	redisQuery string
	// queue sets more of the queue's knobs, before the service starts.
	queue func(*queue.Config)
	// config sets more of the service's configuration before it starts.
	config func(*Config)
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	id := testenv.ID(t)
	s := &stack{t: t, q: id, queueCfg: o.queue}
	var err error
	if s.ver, err = auth.NewVerifier(testSecret); err != nil {
		t.Fatal(err)
	}
	redisURL := testenv.RedisURL(t)
	if o.privateRedis {
		s.redis = testenv.StartRedisServer(t)
		redisURL = s.redis.URL()
	}
	if !o.privateRedis {
		// The shared database keeps no queue of this test (the console's
		// overview of the test database listed three).
		testenv.PurgeAtCleanup(t, redisURL, s.q)
	}
	rdb, err := redisstore.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	s.store, _ = redisstore.NewStore(rdb)
	s.configure(s.q)

	s.dbURL = testenv.PostgresURL(t)
	amqpURL := testenv.AMQPURL(t)
	// A shutdown bound above 5 s: net/http waits that long for a
	// connection a client opened but sent nothing on (50 concurrent
	// clients leave some), and Run reports a shutdown cut short.
	s.cfg = Config{
		HTTPAddr: "127.0.0.1:0", OrderRateLimitPerQueue: o.rateLimit, OrderRateLimitPerUser: o.userRateLimit, OrderLease: 30 * time.Second, TxTimeout: 5 * time.Second,
		DBMaxConns: 20, ReapInterval: 100 * time.Millisecond, MaxQuantity: 10, StartupTimeout: 10 * time.Second, HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second},
	}
	s.cfg.OpsAddr = "127.0.0.1:0"
	if o.lease > 0 {
		s.cfg.OrderLease, s.cfg.TxTimeout = o.lease, o.txTimeout
	}
	if o.retention > 0 {
		s.cfg.OutboxRetention, s.cfg.IdempotencyKeyRetention, s.cfg.RetentionInterval = o.retention, o.retention, 100*time.Millisecond
	}
	s.cfg.HealthInterval = o.health
	s.cfg.JWTSecret = testSecret
	s.cfg.Redis.URL = redisURL
	if o.redisProxy {
		u, err := url.Parse(redisURL)
		if err != nil {
			t.Fatal(err)
		}
		s.redisProxy = testenv.StartProxy(t, u.Host)
		u.Host = s.redisProxy.Addr()
		s.cfg.Redis.URL = u.String()
	}
	if o.redisQuery != "" {
		sep := "?"
		if strings.Contains(s.cfg.Redis.URL, "?") {
			sep = "&"
		}
		s.cfg.Redis.URL += sep + o.redisQuery
	}
	s.cfg.EntryTokens.Keys, s.cfg.FailOpenMaxOrdersPerUser = []string{testEntryKey}, 1 // the env's default
	s.cfg.Database.URL = s.dbURL
	s.cfg.AMQP.URL = amqpURL
	s.cfg.AMQP.Exchange = "test." + id
	// The stand-in restorer consumes what the dispatcher would.
	s.cfg.OrderFailedQueue, s.cfg.OrderFailedDeliveryLimit = s.cfg.AMQP.Exchange+".restorer", 20
	s.cfg.QueueChangesQueue = s.cfg.AMQP.Exchange + ".queue-changes"
	if o.pgProxy {
		s.pgProxy = testenv.StartProxy(t, "127.0.0.1:5432")
		s.cfg.Database.URL = testenv.PostgresURLVia(t, s.dbURL, s.pgProxy.Addr())
	}
	if o.amqpProxy {
		s.amqpProxy = testenv.StartProxy(t, hostPort(amqpURL))
		s.cfg.AMQP.URL = strings.Replace(amqpURL, hostPort(amqpURL), s.amqpProxy.Addr(), 1)
	}
	if o.config != nil {
		o.config(&s.cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if s.conn, err = broker.New(amqpURL, broker.Options{Exchange: s.cfg.AMQP.Exchange, Source: "/test", Log: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.conn.Close() })
	t.Cleanup(func() { deleteTopology(amqpURL, s.cfg.AMQP.Exchange) })
	s.listen()
	if o.health > 0 {
		s.health = testenv.Listen(t, s.conn, broker.QueueSpec{Name: s.cfg.AMQP.Exchange + ".health", Bindings: []string{events.RoutingKeyOrderHealth}, Quorum: true})
	}
	s.start()
	s.lead = s.lease(s.q)
	return s
}

// configure makes q a queue that admits 1,000/s with 120 s tokens (and
// what queueCfg sets), removed when the test ends.
func (s *stack) configure(q string) {
	s.t.Helper()
	if _, _, err := s.store.UpdateConfig(context.Background(), q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.AdmissionRatePerSec, c.ActivationSpreadMs, c.TokenTTLSeconds = 1000, 0, 120
		if s.queueCfg != nil {
			s.queueCfg(&c)
		}
		return c, nil
	}); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.store.Purge(context.Background(), q) })
}

// lease takes q's admission lease for the test, as the dispatcher would.
func (s *stack) lease(q string) int64 {
	s.t.Helper()
	epoch, err := s.store.AcquireLease(context.Background(), q, "test", time.Hour)
	if err != nil || epoch == 0 {
		s.t.Fatalf("lease on %s: %d %v", q, epoch, err)
	}
	return epoch
}

func hostPort(url string) string {
	rest := url[strings.Index(url, "@")+1:]
	return strings.TrimSuffix(rest, "/")
}

func (s *stack) start() {
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := New(ctx, s.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		s.t.Fatalf("order-service did not start: %v", err)
	}
	s.url, s.ops = "http://"+svc.Addr(), "http://"+svc.OpsAddr()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	s.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				s.t.Errorf("order-service exited with %v", err)
			}
		case <-time.After(20 * time.Second):
			s.t.Error("order-service did not stop within 20s")
		}
	})
}

// listen records every event on the test's exchange through a durable queue.
func (s *stack) listen() {
	s.listener = testenv.Listen(s.t, s.conn, broker.QueueSpec{Name: s.cfg.AMQP.Exchange + ".listener", Bindings: []string{"#"}, Quorum: true})
}

// restorer does what the admission-dispatcher's restoration consumer does
// with every OrderFailed: restore or free.
func (s *stack) restorer() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Declared (and bound) before anything is published: an event published
	// to a key nobody is bound to yet would be parked as unrouted.
	{
		dctx, dcancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := s.conn.Declare(dctx, events.OrderFailedQueue(s.cfg.OrderFailedQueue, s.cfg.OrderFailedDeliveryLimit)); err != nil {
			dcancel()
			s.t.Fatalf("declare the test's queue: %v", err)
		}
		dcancel()
	}
	go func() {
		defer close(done)
		_ = s.conn.Consume(ctx, events.OrderFailedQueue(s.cfg.OrderFailedQueue, s.cfg.OrderFailedDeliveryLimit),
			func(ctx context.Context, d broker.Delivery) broker.Result {
				var ev waitingroomv1.OrderFailed
				if proto.Unmarshal(d.Body, &ev) != nil {
					return broker.DeadLetter
				}
				if _, err := s.store.Restore(ctx, ev.GetQueueId(), ev.GetUserId(), ev.GetTokenId(), ev.GetOrderId(), ev.GetRestorable()); err != nil {
					return broker.Retry
				}
				return broker.Ack
			})
	}()
	s.t.Cleanup(func() { cancel(); <-done })
}

func (s *stack) received(typ proto.Message) []broker.Delivery {
	return s.listener.Of(events.TypeName(typ))
}

func deleteTopology(url, exchange string) {
	testenv.DeleteAMQPTopology(url, exchange, exchange+".listener", exchange+".restorer", exchange+".restorer.dlq", exchange+".health",
		exchange+".queue-changes", exchange+".queue-changes.dlq")
}

func (s *stack) admit(users ...string) map[string]string {
	s.t.Helper()
	return s.admitIn(s.q, s.lead, users...)
}

// admitIn lets users into q under the lease epoch and returns their secrets.
func (s *stack) admitIn(q string, epoch int64, users ...string) map[string]string {
	s.t.Helper()
	ctx := context.Background()
	for _, u := range users {
		if _, err := s.store.Enter(ctx, q, u); err != nil {
			s.t.Fatal(err)
		}
	}
	secrets := map[string]string{}
	for len(secrets) < len(users) {
		// Signed as the dispatcher signs them.
		gs, err := entrySigner(s.t).Grants(q, 0, len(users), time.Now())
		if err != nil {
			s.t.Fatal(err)
		}
		time.Sleep(110 * time.Millisecond) // credit accrues at 1,000/s
		if _, err := s.store.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: gs}); err != nil {
			s.t.Fatal(err)
		}
		for _, u := range users {
			st, err := s.store.Position(ctx, q, u)
			if err == nil && st.Token != nil {
				secrets[u] = st.Token.Secret
			}
		}
	}
	return secrets
}

func (s *stack) product(id string, stock int) {
	s.t.Helper()
	r := s.do(http.MethodPut, "/admin/v1/products/"+id, s.token("ops", auth.RoleAdmin), "",
		map[string]any{"queueId": s.q, "name": "Product " + id, "stock": stock, "priceCents": 1999})
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		s.t.Fatalf("put product: %d %s", r.status, r.body)
	}
}

func (s *stack) token(user, role string) string {
	tok, err := s.ver.Mint(user, role, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problemType() string {
	var p struct{ Type string }
	_ = json.Unmarshal(r.body, &p)
	return p.Type
}

// getOps is a GET on the ops listener (/metrics, /healthz, /readyz).
func (s *stack) getOps(path string) response {
	res, err := http.Get(s.ops + path)
	if err != nil {
		return response{status: -1, body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (s *stack) do(method, path, jwt, entryToken string, body any, hdr ...string) response {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	if jwt != "" {
		req.Header.Set("Authorization", "Bearer "+jwt)
	}
	if entryToken != "" {
		req.Header.Set("X-Entry-Token", entryToken)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{status: -1, body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (s *stack) order(user, secret, product string, qty int, hdr ...string) response {
	return s.do(http.MethodPost, "/api/v1/orders", s.token(user, ""), secret,
		map[string]any{"queueId": s.q, "productId": product, "quantity": qty}, hdr...)
}

// stock reads a product's stock from the database itself (the public
// list may be up to a second old).
func (s *stack) stock(product string) int {
	s.t.Helper()
	return s.queryInt(`SELECT stock FROM products WHERE id = $1 AND queue_id = $2`, product, s.q)
}

// queryInt runs a query with one integer answer on the service's database.
func (s *stack) queryInt(query string, args ...any) int {
	s.t.Helper()
	raw, err := sql.Open("pgx", s.dbURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRow(query, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s %v: %v", query, args, err)
	}
	return n
}

// commitDirectly commits an order the way a handler would have right before
// its process died, without settling the token.
func (s *stack) commitDirectly(orderID, user, tokenID string) error {
	db, err := pg.Open(context.Background(), s.dbURL, pg.Options{MaxOpenConns: 2, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.PlaceOrder(context.Background(), order.Placement{Order: order.Order{
		ID: orderID, UserID: user, QueueID: s.q, ProductID: "p1", Quantity: 1, EntryTokenID: tokenID, Status: order.StatusCreated,
	}, Event: func(o order.Order) order.Event { return order.Created{Order: o} }})
	return err
}

func uniqueIDs(ds []broker.Delivery) map[string]bool {
	m := map[string]bool{}
	for _, d := range ds {
		m[d.MessageID] = true
	}
	return m
}
