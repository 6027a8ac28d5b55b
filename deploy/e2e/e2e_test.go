package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const secret = "e2e-secret-0123456789abcdef-0123456789"

// system is the three services as processes, on their own queue, exchange,
// database and order-failed queue.
type system struct {
	t                          *testing.T
	q, exchange                string
	gateway, dispatcher, order *testenv.Service
	ver                        *auth.Verifier
	pgProxy                    *testenv.Proxy
	// orderBroker, when asked for, is the order-service's way to RabbitMQ.
	orderBroker *testenv.Proxy

	events *testenv.Listener
}

func newSystem(t *testing.T, cutDatabase bool) *system {
	id := testenv.ID(t)
	return newSystemWith(t, systemOptions{queues: []string{id}, id: id, cutDatabase: cutDatabase})
}

// systemOptions shape a system: the queues its dispatcher serves (the first
// is s.q), whether the order-service reaches Postgres through a proxy
// (s.pgProxy), and the order-service's extra environment.
type systemOptions struct {
	id          string
	queues      []string
	cutDatabase bool
	orderEnv    map[string]string
	// env is every service's extra environment; dispatcherEnv the
	// dispatcher's on top of it.
	env, dispatcherEnv map[string]string
	// cutOrderBroker runs the order-service's AMQP connection through a
	// proxy (s.orderBroker).
	cutOrderBroker bool
}

func newSystemWith(t *testing.T, o systemOptions) *system {
	s := &system{t: t, q: o.queues[0], exchange: "e2e." + o.id}
	testenv.PurgeAtCleanup(t, testenv.RedisURL(t), o.queues...)
	var err error
	if s.ver, err = auth.NewVerifier(secret); err != nil {
		t.Fatal(err)
	}
	amqpURL := testenv.AMQPURL(t)
	dbURL := testenv.PostgresURL(t)
	if o.cutDatabase {
		s.pgProxy = testenv.StartProxy(t, "127.0.0.1:5432")
		dbURL = testenv.PostgresURLVia(t, dbURL, s.pgProxy.Addr())
	}
	common := merged(map[string]string{
		"REDIS_URL": testenv.RedisURL(t), "AMQP_URL": amqpURL, "AMQP_EXCHANGE": s.exchange, "AUTH_JWT_SECRET": secret,
		"ORDER_FAILED_QUEUE": s.exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": s.exchange + ".queue-changes",
	}, o.env)
	orderAMQP := amqpURL
	if o.cutOrderBroker {
		s.orderBroker = testenv.StartProxy(t, "127.0.0.1:5672")
		orderAMQP = "amqp://guest:guest@" + s.orderBroker.Addr() + "/"
	}
	s.listen(amqpURL)
	s.gateway = start(t, "queue-gateway", merged(common, map[string]string{"ENTER_RATE_LIMIT_PER_IP": "0"}))
	s.order = start(t, "order-service", merged(common, map[string]string{"DATABASE_URL": dbURL, "AMQP_URL": orderAMQP}, o.orderEnv))
	s.dispatcher = start(t, "admission-dispatcher", merged(common, map[string]string{"DISPATCH_QUEUES": strings.Join(o.queues, ",")},
		o.dispatcherEnv))
	t.Cleanup(func() { s.cleanup(amqpURL) })
	return s
}

// merged is the union of maps, later ones winning.
func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// listen records every event of the system's exchange from now on.
func (s *system) listen(url string) {
	conn, err := broker.New(url, broker.Options{Exchange: s.exchange, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = conn.Close() }) // after the listener's own cleanup
	s.events = testenv.Listen(s.t, conn, broker.QueueSpec{Name: s.exchange + ".listener", Bindings: []string{"#"}, Quorum: true})
}

func (s *system) count(key string) int { return len(s.events.Keyed(key)) }

func (s *system) cleanup(url string) {
	testenv.DeleteAMQPTopology(url, s.exchange, s.exchange+".listener", s.exchange+".order-failed", s.exchange+".order-failed.dlq",
		s.exchange+".queue-changes", s.exchange+".queue-changes.dlq")
}

func (s *system) call(method, url, user, role, entryToken string, body any) (int, map[string]any) {
	s.t.Helper()
	st, v, err := s.request(method, url, user, role, entryToken, body, 0)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	return st, v
}

// request sends one request as user (with role; none when user is empty),
// with the entry token and JSON body when given, within timeout (0: none),
// and decodes the JSON answer. A transport error is returned, not fatal, so
// it can be called from many goroutines. header is extra header name,
// value pairs.
func (s *system) request(method, url, user, role, entryToken string, body any, timeout time.Duration, header ...string) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if user != "" {
		tok, err := s.ver.Mint(user, role, time.Hour)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if entryToken != "" {
		req.Header.Set("X-Entry-Token", entryToken)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var v map[string]any
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &v)
	return res.StatusCode, v, nil
}

func (s *system) setup(stock int) {
	if st, v := s.call(http.MethodPut, s.gateway.URL+"/admin/v1/queues/"+s.q, "ops", "admin", "",
		map[string]any{"admissionRatePerSec": 5, "activationSpreadMs": 0}); st != http.StatusCreated {
		s.t.Fatalf("create queue: %d %v", st, v)
	}
	if st, v := s.call(http.MethodPut, s.order.URL+"/admin/v1/products/tee", "ops", "admin", "",
		map[string]any{"queueId": s.q, "name": "Limited tee", "stock": stock, "priceCents": 2500}); st != http.StatusCreated {
		s.t.Fatalf("create product: %d %v", st, v)
	}
}

// waitAdmitted polls the gateway as a browser would until the user holds a token.
func (s *system) waitAdmitted(user string) map[string]any {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, v := s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+s.q+"/position", user, "", "", nil)
		if st == http.StatusOK && v["state"] == "ADMITTED" && v["token"] != nil {
			return v
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s not admitted within 30s: %d %v\ndispatcher log:\n%s", user, st, v, s.dispatcher.Tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBuyerPathAcrossServices(t *testing.T) {
	t.Parallel()
	s := newSystem(t, false)
	s.setup(3)
	users := []string{"ann", "ben", "cat", "dov", "eli"}
	for i, u := range users {
		st, v := s.call(http.MethodPost, s.gateway.URL+"/api/v1/queues/"+s.q+"/enter", u, "", "", nil)
		if st != http.StatusOK || (v["state"] != "WAITING" && v["state"] != "ADMITTED") {
			t.Fatalf("enter %s: %d %v", u, st, v)
		}
		_ = i
	}
	created, soldOut := 0, 0
	for _, u := range users {
		adm := s.waitAdmitted(u)
		st, v := s.call(http.MethodPost, s.order.URL+"/api/v1/orders", u, "", adm["token"].(string),
			map[string]any{"queueId": s.q, "productId": "tee", "quantity": 1})
		switch {
		case st == http.StatusCreated && v["status"] == "CREATED":
			created++
			if _, p := s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+s.q+"/position", u, "", "", nil); p["state"] != "ORDERED" {
				t.Fatalf("%s after ordering: %v, want ORDERED", u, p["state"])
			}
		case st == http.StatusConflict && v["type"] == "sold-out":
			soldOut++
		default:
			t.Fatalf("order by %s: %d %v\norder-service log:\n%s", u, st, v, s.order.Tail())
		}
	}
	if created != 3 || soldOut != 2 {
		t.Fatalf("%d created, %d sold out; want 3 and 2", created, soldOut)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.count("token.issued") < 5 || s.count("order.created") < 3 || s.count("order.failed") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("events: %d token.issued, %d order.created, %d order.failed; want 5, 3, 2",
				s.count("token.issued"), s.count("order.created"), s.count("order.failed"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDatabaseOutageTokenRestoredByTheDispatcher(t *testing.T) {
	t.Parallel()
	s := newSystem(t, true)
	s.setup(5)
	if st, _ := s.call(http.MethodPost, s.gateway.URL+"/api/v1/queues/"+s.q+"/enter", "fay", "", "", nil); st != http.StatusOK {
		t.Fatalf("enter: %d", st)
	}
	adm := s.waitAdmitted("fay")
	token, expires := adm["token"].(string), adm["expiresAt"].(string)

	s.pgProxy.Cut()
	st, v := s.call(http.MethodPost, s.order.URL+"/api/v1/orders", "fay", "", token, map[string]any{"queueId": s.q, "productId": "tee", "quantity": 1})
	if st != http.StatusServiceUnavailable {
		t.Fatalf("order with the database cut: %d %v", st, v)
	}
	// The dispatcher's restoration consumer gives the token back: same token, same expiry.
	again := s.waitAdmitted("fay")
	if again["token"] != token || again["expiresAt"] != expires || s.count("order.failed") < 1 {
		t.Fatalf("after restore: %v (order.failed events %d); want the same token and expiry %s", again, s.count("order.failed"), expires)
	}
	s.pgProxy.Restore()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, v = s.call(http.MethodPost, s.order.URL+"/api/v1/orders", "fay", "", token, map[string]any{"queueId": s.q, "productId": "tee", "quantity": 1})
		if st == http.StatusCreated {
			break
		}
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("retry after the database came back: %d %v", st, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
