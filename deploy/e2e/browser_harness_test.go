package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/testenv/pushtest"
)

// browserSystem is the services as processes for the browser test, in dev
// auth mode (the page mints its own token), each gateway's origin allowed by
// the order-service and the notification-service.
type browserSystem struct {
	t   *testing.T
	ver *auth.Verifier // the shared dev secret: the test mints what the page mints
	// gateway serves the page with the notification stream; pollingGateway
	// serves it with a stream address nothing listens on, so the page has to
	// fall back to polling.
	gateway, pollingGateway, order, dispatcher, notify *testenv.Service
	// db is between the order-service and PostgreSQL, to cut.
	db *testenv.Proxy
	// pushes is the push service on loopback the notification-service
	// sends "your turn" to (Web Push, its VAPID key vapid).
	pushes *pushtest.Server
	vapid  string
}

// browserQueues are the queues of one run; the dispatcher serves all but full.
type browserQueues struct{ happy, full, expired, polling, drop, ends, keys, other, push string }

func newBrowserSystem(t *testing.T, qs browserQueues) *browserSystem {
	t.Helper()
	testenv.PurgeAtCleanup(t, testenv.RedisURL(t), qs.happy, qs.full, qs.expired, qs.polling, qs.drop, qs.ends, qs.keys, qs.other, qs.push)
	ver, err := auth.NewVerifier(auth.DevSecret)
	if err != nil {
		t.Fatal(err)
	}
	s := &browserSystem{t: t, ver: ver}
	id := testenv.ID(t)
	exchange := "e2e." + id
	amqpURL := testenv.AMQPURL(t)
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(amqpURL, exchange, exchange+".order-failed", exchange+".order-failed.dlq", exchange+".push",
			exchange+".queue-changes", exchange+".queue-changes.dlq")
	})
	// Addresses first: each service must know the others' before it starts.
	gwPort, pollPort, orderPort, notifyPort, deadPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	origin := func(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
	origins := origin(gwPort) + "," + origin(pollPort)
	common := map[string]string{
		// Dev mode and no AUTH_JWT_SECRET: every service uses the shared dev secret.
		"AUTH_DEV_MODE": "true", "AUTH_JWT_SECRET": "",
		"REDIS_URL": testenv.RedisURL(t), "AMQP_URL": amqpURL, "AMQP_EXCHANGE": exchange,
		"ORDER_FAILED_QUEUE": exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": exchange + ".queue-changes",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range common {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	s.db = testenv.StartProxy(t, "127.0.0.1:5432")
	s.order = startOn(t, "order-service", orderPort, with(map[string]string{
		"DATABASE_URL": testenv.PostgresURLVia(t, testenv.PostgresURL(t), s.db.Addr()), "CORS_ALLOWED_ORIGINS": origins,
	}))
	public, private := pushtest.NewVAPID()
	s.pushes, s.vapid = pushtest.NewServer(t, public), public
	s.notify = startOn(t, "notification-service", notifyPort, with(map[string]string{
		"CORS_ALLOWED_ORIGINS": origins, "SSE_POSITION_INTERVAL": "300ms",
		"PUSH_VAPID_PUBLIC_KEY": public, "PUSH_VAPID_PRIVATE_KEY": private, "PUSH_SUBJECT": "mailto:ops@shop.example",
		"PUSH_ALLOW_LOOPBACK_ENDPOINTS": "true", "PUSH_QUEUE": exchange + ".push",
	}))
	s.dispatcher = startOn(t, "admission-dispatcher", testenv.FreePort(t), with(map[string]string{
		"DISPATCH_QUEUES": strings.Join([]string{qs.happy, qs.expired, qs.polling, qs.drop, qs.ends, qs.keys, qs.other, qs.push}, ","),
	}))
	gw := func(port, notifyPort int) map[string]string {
		return with(map[string]string{
			"ENTER_RATE_LIMIT_PER_IP":         "0",
			"ORDER_SERVICE_PUBLIC_URL":        origin(orderPort),
			"NOTIFICATION_SERVICE_PUBLIC_URL": origin(notifyPort),
			"DEFAULT_QUEUE":                   qs.happy,
		})
	}
	s.gateway = startOn(t, "queue-gateway", gwPort, gw(gwPort, notifyPort))
	s.pollingGateway = startOn(t, "queue-gateway", pollPort, gw(pollPort, deadPort))
	return s
}

// call is one JSON request as user (none when empty); it returns the status
// and the decoded body.
func (s *browserSystem) call(method, url, user, role string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if user != "" {
		tok, err := s.ver.Mint(user, role, time.Hour)
		if err != nil {
			s.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return res.StatusCode, v
}

// queue creates (201) or changes (200) a queue's knobs.
func (s *browserSystem) queue(q string, knobs map[string]any) {
	s.t.Helper()
	st, v := s.call(http.MethodPut, s.gateway.URL+"/admin/v1/queues/"+q, "ops", auth.RoleAdmin, knobs)
	if st != http.StatusCreated && st != http.StatusOK {
		s.t.Fatalf("queue %s %v: %d %v", q, knobs, st, v)
	}
}

func (s *browserSystem) product(q, id, name string, stock, priceCents int) {
	s.t.Helper()
	st, v := s.call(http.MethodPut, s.order.URL+"/admin/v1/products/"+id, "ops", auth.RoleAdmin,
		map[string]any{"queueId": q, "name": name, "stock": stock, "priceCents": priceCents})
	if st != http.StatusCreated {
		s.t.Fatalf("product %s: %d %v", id, st, v)
	}
}

// enter puts user in line through the API and returns the position.
func (s *browserSystem) enter(q, user string) int {
	s.t.Helper()
	st, v := s.call(http.MethodPost, s.gateway.URL+"/api/v1/queues/"+q+"/enter", user, "", nil)
	if st != http.StatusOK || v["state"] != "WAITING" {
		s.t.Fatalf("enter %s as %s: %d %v", q, user, st, v)
	}
	return int(v["position"].(float64))
}

// position is user's standing as the gateway tells it.
func (s *browserSystem) position(q, user string) map[string]any {
	s.t.Helper()
	st, v := s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q+"/position", user, "", nil)
	if st != http.StatusOK {
		s.t.Fatalf("position of %s in %s: %d %v", user, q, st, v)
	}
	return v
}
