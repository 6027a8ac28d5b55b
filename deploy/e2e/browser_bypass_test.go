package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// newBypassSystem is a gateway and an order-service on a private
// redis-server, which the test stops and starts again: the fail-mode path.
// The gateway keeps its per-IP enter limit (in Redis too); no dispatcher
// runs (nobody is admitted) and the stream address is dead (the page polls).
func newBypassSystem(t *testing.T) (*browserSystem, *testenv.RedisServer) {
	t.Helper()
	redis := testenv.StartRedisServer(t)
	ver, err := auth.NewVerifier(auth.DevSecret)
	if err != nil {
		t.Fatal(err)
	}
	exchange := "e2e." + testenv.ID(t)
	amqpURL := testenv.AMQPURL(t)
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(amqpURL, exchange, exchange+".order-failed", exchange+".order-failed.dlq", exchange+".queue-changes", exchange+".queue-changes.dlq")
	})
	gwPort, orderPort, deadPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	origin := func(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
	env := func(extra map[string]string) map[string]string {
		m := map[string]string{
			"AUTH_DEV_MODE": "true", "AUTH_JWT_SECRET": "",
			"REDIS_URL": redis.URL(), "AMQP_URL": amqpURL, "AMQP_EXCHANGE": exchange,
			"ORDER_FAILED_QUEUE": exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": exchange + ".queue-changes",
			"ENTRY_TOKEN_KEYS": "e2e-bypass-entry-token-key-0123456789abcdef",
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	s := &browserSystem{t: t, ver: ver}
	s.order = startOn(t, "order-service", orderPort, env(map[string]string{
		"DATABASE_URL": testenv.PostgresURL(t), "CORS_ALLOWED_ORIGINS": origin(gwPort),
	}))
	s.gateway = startOn(t, "queue-gateway", gwPort, env(map[string]string{
		"ENTER_RATE_LIMIT_PER_IP":         "10",
		"ORDER_SERVICE_PUBLIC_URL":        origin(orderPort),
		"NOTIFICATION_SERVICE_PUBLIC_URL": origin(deadPort),
	}))
	return s, redis
}

// Redis stops under a queue that fails OPEN: a buyer who enters gets the
// order form at once (BYPASS), with a note, and orders without a pass; a
// second person on the bypassed form keeps asking every ~5 s and, when
// Redis is back and the queue made again, is offered the line again and
// takes place 1.
func browserBypass(t *testing.T, browser context.Context, q string) {
	s, redis := newBypassSystem(t)
	s.queue(q, map[string]any{"failMode": "OPEN", "admissionRatePerSec": 5})
	s.product(q, "mug", "Bypass mug", 3, 1200)

	buyer := newTab(t, browser, "bypass-buyer")
	reqs := buyer.recordRequests()
	buyer.navigate(s.gateway.URL + "/q/" + q)
	buyer.signIn("shopper-bypass")
	other := openTab(t, browser, "bypass-other", s.gateway.URL+"/q/"+q)
	otherReqs := other.recordRequests()
	other.signIn("shopper-bypass-2")
	// Both services refresh their cached configs every second: two of them
	// and the queue's fail mode is known before Redis goes.
	time.Sleep(2 * time.Second)
	redis.Stop()
	// Both services bypass once their probes find Redis down: a few failed
	// refreshes in a row (redisstore.OutageProbes over OutageWindow).
	var probePass string
	testenv.WaitFor(t, 10*time.Second, "the gateway bypasses", func() bool {
		code, v := s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q+"/position", "probe-bypass", "", nil)
		probePass, _ = v["token"].(string)
		return code == http.StatusOK && v["state"] == "BYPASS" && probePass != ""
	})
	jwt, err := s.ver.Mint("probe-bypass", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the order-service bypasses", func() bool {
		req, err := http.NewRequest(http.MethodPost, s.order.URL+"/api/v1/orders",
			strings.NewReader(`{"queueId":"`+q+`","productId":"no-such-product","quantity":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+jwt)
		req.Header.Set("X-Entry-Token", probePass)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusBadRequest // product-not-found: the pass was taken
	})

	bypassed := func(tb *tab) pageState {
		t.Helper()
		clicked := time.Now()
		tb.click("enter")
		st := tb.waitFor("the bypassed order form", 5*time.Second, func(p pageState) bool {
			return p.Shown["order-form"] && len(p.Products) > 0 && !p.OrderDisabled
		})
		const say = "The waiting room is bypassed for now: you can order straight away."
		if st.Status != say || st.Kind != "info" || !st.Shown["bypass-note"] || st.Shown["expiry"] || st.Shown["countdown"] ||
			st.Shown["figures"] || st.Shown["enter"] || st.Shown["line"] {
			t.Fatalf("%s bypassed: %v", tb.name, st)
		}
		if want := "Bypass mug — $12.00 — 3 left"; len(st.Products) != 1 || st.Products[0] != want || strings.Join(st.Quantities, ",") != "1,2,3" {
			t.Fatalf("%s bypassed: products %q quantities %v, want [%q] 1..3", tb.name, st.Products, st.Quantities, want)
		}
		t.Logf("%s: the order form %s after Enter, Redis down", tb.name, time.Since(clicked).Round(time.Millisecond))
		tb.shot("bypassed-order-form")
		tb.audit("bypass")
		return st
	}
	bypassed(buyer)
	v := s.position(q, "shopper-bypass")
	if v["state"] != "BYPASS" || v["retryAfterMs"].(float64) < 4000 || v["retryAfterMs"].(float64) > 6000 {
		t.Fatalf("the gateway tells the buyer %v, want BYPASS with retryAfterMs 4000-6000", v)
	}
	bypassed(other)
	bypassedAt := time.Now()
	isPoll := func(r sentRequest) bool { return strings.HasSuffix(r.url, "/api/v1/queues/"+q+"/position") }
	pollsBefore := otherReqs.count(isPoll)

	buyer.do(chromedp.SetValue(chromedp.ID("quantity"), "2"))
	buyer.click("order")
	st := buyer.waitFor("the order confirmation", 15*time.Second, func(p pageState) bool { return p.Shown["result"] && p.OrderID != "" })
	if !strings.HasPrefix(st.Status, "Order confirmed. Your order number is "+st.OrderID) || st.Kind != "ok" || st.Shown["order-form"] {
		t.Fatalf("after ordering bypassed: %v", st)
	}
	buyer.shot("bypassed-confirmed")
	posts := reqs.matching(func(r sentRequest) bool {
		return r.method == http.MethodPost && strings.HasSuffix(r.url, "/api/v1/orders")
	})
	if len(posts) != 1 || posts[0].headers["x-entry-token"] == "" || posts[0].headers["idempotency-key"] == "" {
		t.Fatalf("order requests %+v, want one, with an Idempotency-Key and the gateway's pass as X-Entry-Token", posts)
	}
	code, order := s.call(http.MethodGet, s.order.URL+"/api/v1/orders/"+st.OrderID, "shopper-bypass", "", nil)
	if code != http.StatusOK || order["quantity"] != 2.0 || order["productId"] != "mug" || order["status"] != "CREATED" {
		t.Fatalf("GET order %s: %d %v", st.OrderID, code, order)
	}
	t.Logf("bypassed order %s: %v", st.OrderID, order)
	// The product list is the order-service's cache, up to a second old.
	stock := func() any {
		code, products := s.call(http.MethodGet, s.order.URL+"/api/v1/products?queueId="+q, "", "", nil)
		if list, _ := products["products"].([]any); code == http.StatusOK && len(list) == 1 {
			return list[0].(map[string]any)["stock"]
		}
		return products
	}
	left := stock()
	for deadline := time.Now().Add(3 * time.Second); left != 1.0 && time.Now().Before(deadline); left = stock() {
		time.Sleep(100 * time.Millisecond)
	}
	if left != 1.0 {
		t.Fatalf("stock after the bypassed order of 2 (of 3): %v, want 1", left)
	}

	// The bypassed page keeps asking at the gateway's hint, 5 s ±10 %: its
	// second poll comes 9 to 11 s after its enter, and the form stays.
	other.waitFor("two polls while bypassed", 14*time.Second, func(p pageState) bool {
		if !p.Shown["bypass-note"] || !p.Shown["order-form"] {
			t.Fatalf("%s left the bypassed form with Redis down: %v", other.name, p)
		}
		return otherReqs.count(isPoll)-pollsBefore >= 2
	})
	if d := time.Since(bypassedAt); d < 8500*time.Millisecond {
		t.Fatalf("%s polled twice %s after it was bypassed, want one poll per ~5 s", other.name, d)
	}
	t.Logf("%s: two polls %s after it was bypassed", other.name, time.Since(bypassedAt).Round(time.Millisecond))

	redis.Start()
	// The private server kept nothing: the operator makes the queue again.
	deadline := time.Now().Add(5 * time.Second)
	for code, _ = s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q, "", "", nil); code != http.StatusOK && time.Now().Before(deadline); code, _ = s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q, "", "", nil) {
		if code == http.StatusNotFound {
			s.queue(q, map[string]any{"failMode": "OPEN", "admissionRatePerSec": 5})
		}
		time.Sleep(100 * time.Millisecond)
	}
	back := time.Now()
	st = other.waitFor("the line back", 8*time.Second, func(p pageState) bool { return p.Shown["enter"] })
	if st.Status != "The waiting room is back: enter the line to take a place." || st.Shown["turn"] || st.Shown["bypass-note"] || st.EnterDisabled {
		t.Fatalf("%s with the line back: %v", other.name, st)
	}
	polls := otherReqs.count(isPoll) - pollsBefore
	bypassedFor := time.Since(bypassedAt)
	t.Logf("the line was back on the page %s after the queue was made again; %d position polls in %s of bypass",
		time.Since(back).Round(time.Millisecond), polls, bypassedFor.Round(time.Millisecond))
	if most := int(bypassedFor/(4500*time.Millisecond)) + 1; polls < 3 || polls > most {
		t.Errorf("%d position polls in %s of bypass, want 3 to %d (one per ~5 s)", polls, bypassedFor, most)
	}
	other.shot("line-back")
	other.click("enter")
	st = other.waitFor("place 1", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if st.Shown["turn"] || !strings.HasPrefix(st.Status, "You are number 1 in line") {
		t.Fatalf("%s back in line: %v", other.name, st)
	}
	other.shot("back-in-line")
}
