package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const secret = "chaos-secret-0123456789abcdef-0123456789"

// full is the long form (CHAOS_FULL=1): more kills, more users.
var full = testenv.Full()

// summary prints the drill's Jepsen-style line to the test log and stdout.
func summary(t *testing.T, drill string, ok, lost, dup, recovered int, gap time.Duration) {
	line := fmt.Sprintf("drill=%s ok=%d lost=%d duplicated=%d recovered=%d gap=%s", drill, ok, lost, dup, recovered, gap.Round(time.Millisecond))
	t.Log(line)
	if testing.Verbose() {
		fmt.Println(line)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilt()
	os.Exit(code)
}

// start runs a service binary on a free port; with waitReady, it returns
// once the service is ready. Drills kill services, so how one ends is not
// checked at cleanup.
func start(t *testing.T, name string, env map[string]string, waitReady bool) *testenv.Service {
	t.Helper()
	return testenv.StartService(t, name, testenv.ServiceOptions{Env: env, NoWait: !waitReady})
}

// rig is one drill's names and connection strings.
type rig struct {
	t                        *testing.T
	q, exchange              string
	redisURL, amqpURL, dbURL string
	ver                      *auth.Verifier
	// redisEnv is added to every service's environment (REDIS_WAIT_*).
	redisEnv map[string]string
	// gatewayEnv is added to the sale's gateway's environment last (a
	// REDIS_URL of its own).
	gatewayEnv map[string]string
	// onGateway, when set, is told the sale's gateway URL once its queue
	// exists, before anyone enters.
	onGateway func(url string)
}

func newRig(t *testing.T) *rig {
	id := testenv.ID(t)
	r := &rig{t: t, q: id, exchange: "chaos." + id}
	testenv.PurgeAtCleanup(t, testenv.RedisURL(t), r.q)
	var err error
	if r.ver, err = auth.NewVerifier(secret); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) env(extra map[string]string) map[string]string {
	m := map[string]string{
		"REDIS_URL": r.redisURL, "AMQP_URL": r.amqpURL, "AMQP_EXCHANGE": r.exchange, "AUTH_JWT_SECRET": secret,
		"ORDER_FAILED_QUEUE": r.exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": r.exchange + ".queue-changes", "ENTER_RATE_LIMIT_PER_IP": "0", "DISPATCH_QUEUES": r.q,
		"SHUTDOWN_TIMEOUT": "3s",
	}
	if r.dbURL != "" {
		m["DATABASE_URL"] = r.dbURL
	}
	for k, v := range r.redisEnv {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// deleteTopology removes the drill's exchange and queues from the broker at cleanup.
func (r *rig) deleteTopology() {
	r.t.Cleanup(func() {
		testenv.DeleteAMQPTopology(r.amqpURL, r.exchange, r.exchange+".listener", r.exchange+".order-failed", r.exchange+".order-failed.dlq",
			r.exchange+".queue-changes", r.exchange+".queue-changes.dlq")
	})
}

type response struct {
	status int
	header http.Header
	body   map[string]any
}

var client = &http.Client{Timeout: 10 * time.Second}

func (r *rig) call(method, url, user, role, entryToken string, body any) response {
	return r.callWith(method, url, user, role, entryToken, body, nil)
}

// callWith is call with extra request headers.
func (r *rig) callWith(method, url, user, role, entryToken string, body any, hdr http.Header) response {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if user != "" {
		tok, err := r.ver.Mint(user, role, time.Hour)
		if err != nil {
			panic(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if entryToken != "" {
		req.Header.Set("X-Entry-Token", entryToken)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := client.Do(req)
	if err != nil {
		return response{status: 0, body: map[string]any{"error": err.Error()}}
	}
	defer res.Body.Close()
	var v map[string]any
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &v)
	return response{status: res.StatusCode, header: res.Header, body: v}
}

func (r *rig) createQueue(gateway string, rate int) {
	if res := r.call(http.MethodPut, gateway+"/admin/v1/queues/"+r.q, "ops", "admin", "",
		map[string]any{"admissionRatePerSec": rate, "activationSpreadMs": 0}); res.status != http.StatusCreated && res.status != http.StatusOK {
		r.t.Fatalf("create queue: %d %v", res.status, res.body)
	}
}

// setState opens or pauses the drill's queue.
func (r *rig) setState(gateway, state string) {
	if res := r.call(http.MethodPut, gateway+"/admin/v1/queues/"+r.q, "ops", "admin", "",
		map[string]any{"state": state}); res.status != http.StatusOK {
		r.t.Fatalf("queue %s: %d %v", state, res.status, res.body)
	}
}

func (r *rig) createProduct(orderSvc string, stock int) {
	if res := r.call(http.MethodPut, orderSvc+"/admin/v1/products/tee", "ops", "admin", "",
		map[string]any{"queueId": r.q, "name": "Limited tee", "stock": stock, "priceCents": 2500}); res.status != http.StatusCreated {
		r.t.Fatalf("create product: %d %v", res.status, res.body)
	}
}

func (r *rig) order(orderSvc, user, token string) response {
	return r.orderKeyed(orderSvc, user, token, "")
}

// orderKeyed is order with an Idempotency-Key ("" for none).
func (r *rig) orderKeyed(orderSvc, user, token, key string) response {
	var hdr http.Header
	if key != "" {
		hdr = http.Header{"Idempotency-Key": {key}}
	}
	return r.callWith(http.MethodPost, orderSvc+"/api/v1/orders", user, "", token, map[string]any{"queueId": r.q, "productId": "tee", "quantity": 1}, hdr)
}

func (r *rig) position(gateway, user string) response {
	return r.call(http.MethodGet, gateway+"/api/v1/queues/"+r.q+"/position", user, "", "", nil)
}

func (r *rig) waitAdmitted(gateway, user string, within time.Duration) map[string]any {
	deadline := time.Now().Add(within)
	for {
		res := r.position(gateway, user)
		if res.status == http.StatusOK && res.body["state"] == "ADMITTED" && res.body["token"] != nil {
			return res.body
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s not admitted within %s: %d %v", user, within, res.status, res.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// event is one delivery on the listener, decoded.
type event struct {
	key, messageID string
	msg            proto.Message
}

// listener records every event of the drill's exchange through a durable
// quorum queue bound to every routing key, declared before the run.
type listener struct{ *testenv.Listener }

func (r *rig) listen(url string) *listener {
	conn, err := broker.New(url, broker.Options{Exchange: r.exchange, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = conn.Close() }) // after the listener's own cleanup
	return &listener{testenv.Listen(r.t, conn, broker.QueueSpec{Name: r.exchange + ".listener", Bindings: []string{"#"}, Quorum: true})}
}

// byKey returns the deliveries with routing key k, decoded.
func (l *listener) byKey(k string) []event {
	var out []event
	for _, d := range l.Keyed(k) {
		var m proto.Message
		switch k {
		case events.RoutingKeyTokenIssued:
			m = &v1.TokenIssued{}
		case events.RoutingKeyOrderCreated:
			m = &v1.OrderCreated{}
		case events.RoutingKeyOrderFailed:
			m = &v1.OrderFailed{}
		case events.RoutingKeyTokenRestored:
			m = &v1.TokenRestored{}
		case events.RoutingKeyUserAbandoned:
			m = &v1.UserAbandoned{}
		}
		if m != nil && proto.Unmarshal(d.Body, m) != nil {
			m = nil
		}
		out = append(out, event{key: d.RoutingKey, messageID: d.MessageID, msg: m})
	}
	return out
}

// distinct counts distinct message ids with routing key k.
func (l *listener) distinct(k string) map[string]event {
	out := map[string]event{}
	for _, e := range l.byKey(k) {
		out[e.messageID] = e
	}
	return out
}

func eventually(within time.Duration, f func() bool) bool {
	deadline := time.Now().Add(within)
	for !f() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
