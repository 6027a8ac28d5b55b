package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/testenv/pushtest"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/push"
)

// pushConfig is testConfig with Web Push on, sending to loopback, on its
// own shared queue.
func pushConfig(t *testing.T, exchange string) (Config, string) {
	private, public, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, exchange)
	cfg.Push = Push{PublicKey: public, PrivateKey: private, Subject: "mailto:ops@shop.example", LoopbackEndpoints: true,
		Queue: exchange + ".push", Rate: 1000, Burst: 100, Concurrency: 16, SubscriptionTTL: time.Hour, DevicesPerUser: 3, Attempts: 3}
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange, cfg.Push.Queue) })
	return cfg, public
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, method, url, jwt string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if jwt != "" {
		req.Header.Set("Authorization", "Bearer "+jwt)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := reply{status: res.StatusCode, header: res.Header}
	_ = json.NewDecoder(res.Body).Decode(&r.body)
	return r
}

func subscription(server *pushtest.Server, name string) (*pushtest.Device, map[string]any) {
	d := pushtest.NewDevice()
	p256dh, auth := d.Keys()
	return d, map[string]any{
		"subscription": map[string]any{"endpoint": server.Endpoint(name, d), "expirationTime": nil, "keys": map[string]any{"p256dh": p256dh, "auth": auth}},
		"title":        "Your turn", "body": name, "lang": "en",
	}
}

// TestYourTurnIsPushedOnceByOneOfTwoReplicas: 60 people subscribe through
// either of two replicas, then their TokenIssued are published: each
// device gets exactly one message, its own (decrypted: its queue and its
// words), whichever replica took the event from the shared queue.
func TestYourTurnIsPushedOnceByOneOfTwoReplicas(t *testing.T) {
	t.Parallel()
	exchange := "test." + testenv.ID(t)
	cfg, public := pushConfig(t, exchange)
	urls := []string{replica(t, cfg), replica(t, cfg)}
	server := pushtest.NewServer(t, public)
	q := newQueue(t)
	ver, _ := auth.NewVerifier(secret)

	const users = 60
	errs := make([]error, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() {
			user := fmt.Sprintf("user-%02d", i)
			jwt, err := ver.Mint(user, "", time.Hour)
			if err != nil {
				errs[i] = err
				return
			}
			_, body := subscription(server, user)
			if r := call(t, http.MethodPut, urls[i%2]+"/api/v1/queues/"+q+"/push", jwt, body); r.status != http.StatusOK || r.body["id"] == "" {
				errs[i] = fmt.Errorf("subscribe %s: %d %v", user, r.status, r.body)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("user %d: %v", i, err)
		}
	}
	// The first half as a TokenIssued each, the second as one TokensIssued
	// (TOKEN_EVENTS=batch), delivered twice.
	var evs []broker.Event
	now := time.Now()
	b := &waitingroomv1.TokensIssued{QueueId: q, OccurredAt: timestamppb.New(now)}
	for i := range users {
		e := issued(q, fmt.Sprintf("user-%02d", i), fmt.Sprintf("tok-%02d", i), now)
		if i < users/2 {
			evs = append(evs, e)
			continue
		}
		b.Tokens = append(b.Tokens, e.Message.(*waitingroomv1.TokenIssued))
	}
	b.EventId = b.Tokens[0].GetEventId() + ".batch"
	batch := broker.Event{ID: b.EventId, RoutingKey: events.RoutingKeyTokensIssued, Time: now, Message: b}
	publish(t, cfg, append(evs, batch, batch))
	deadline := time.Now().Add(20 * time.Second)
	for len(server.Received()) < users && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let a duplicate arrive, if one would
	got := server.Received()
	per := map[string]int{}
	for _, m := range got {
		if m.Err != nil {
			t.Fatalf("message for %s: %v", m.Device, m.Err)
		}
		var turn push.Turn
		if err := json.Unmarshal(m.Plain, &turn); err != nil || turn.QueueID != q || turn.Body != m.Device {
			t.Errorf("message for %s decrypted to %q (%v), want its queue and its words", m.Device, m.Plain, err)
		}
		per[m.Device]++
	}
	if len(got) != users || len(per) != users {
		t.Fatalf("%d messages for %d devices, want %d each once", len(got), len(per), users)
	}
	for d, n := range per {
		if n != 1 {
			t.Errorf("%s got %d messages", d, n)
		}
	}
}

// TestThePushAPI: the key is served; a subscription is refused with a
// problem naming the bad field (and nothing stored), without a token
// (401), for a queue that does not exist (404); removing one answers 204
// then 404; a flood of subscribes from one user is refused 429 with
// Retry-After before Redis; a service without push answers 404 on every
// push route.
func TestThePushAPI(t *testing.T) {
	t.Parallel()
	exchange := "test." + testenv.ID(t)
	cfg, public := pushConfig(t, exchange)
	url := replica(t, cfg)
	server := pushtest.NewServer(t, public)
	q := newQueue(t)
	ver, _ := auth.NewVerifier(secret)
	jwt, _ := ver.Mint("ann", "", time.Hour)

	if r := call(t, http.MethodGet, url+"/api/v1/push/key", "", nil); r.status != 200 || r.body["publicKey"] != public {
		t.Errorf("key: %d %v, want 200 with the VAPID public key", r.status, r.body)
	}
	_, good := subscription(server, "ann")
	bad := map[string]any{"subscription": map[string]any{"endpoint": "http://10.0.0.7/admin", "keys": good["subscription"].(map[string]any)["keys"]}, "title": "x"}
	r := call(t, http.MethodPut, url+"/api/v1/queues/"+q+"/push", jwt, bad)
	if r.status != 400 || r.body["type"] == nil || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("an inward endpoint: %d %v, want a 400 problem", r.status, r.body)
	}
	if errs, _ := r.body["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "subscription.endpoint" {
		t.Errorf("an inward endpoint: errors %v, want subscription.endpoint named", r.body["errors"])
	}
	if r := call(t, http.MethodPut, url+"/api/v1/queues/"+q+"/push", jwt, map[string]any{"subscription": 1}); r.status != 400 {
		t.Errorf("junk body: %d, want 400", r.status)
	}
	if r := call(t, http.MethodPut, url+"/api/v1/queues/"+q+"/push", "", good); r.status != 401 {
		t.Errorf("no token: %d, want 401", r.status)
	}
	if r := call(t, http.MethodPut, url+"/api/v1/queues/"+q+"-none/push", jwt, good); r.status != 404 || r.body["type"] != "queue-not-found" {
		t.Errorf("no such queue: %d %v, want 404 queue-not-found", r.status, r.body["type"])
	}
	r = call(t, http.MethodPut, url+"/api/v1/queues/"+q+"/push", jwt, good)
	id, _ := r.body["id"].(string)
	if r.status != 200 || id == "" {
		t.Fatalf("subscribe: %d %v", r.status, r.body)
	}
	if r := call(t, http.MethodDelete, url+"/api/v1/queues/"+q+"/push/"+id, jwt, nil); r.status != 204 {
		t.Errorf("unsubscribe: %d, want 204", r.status)
	}
	if r := call(t, http.MethodDelete, url+"/api/v1/queues/"+q+"/push/"+id, jwt, nil); r.status != 404 {
		t.Errorf("unsubscribe again: %d, want 404", r.status)
	}
	limited := 0
	for range 20 {
		if r := call(t, http.MethodPut, url+"/api/v1/queues/"+q+"/push", jwt, good); r.status == 429 {
			limited++
			if r.header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
	}
	if limited < 5 {
		t.Errorf("%d of 20 quick subscribes refused 429, want at least 5 past the burst of 10", limited)
	}

	off := replica(t, testConfig(t, "test."+testenv.ID(t)+".off"))
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/push/key"}, {http.MethodPut, "/api/v1/queues/" + q + "/push"}, {http.MethodDelete, "/api/v1/queues/" + q + "/push/" + id},
	} {
		if r := call(t, c.method, off+c.path, jwt, good); r.status != 404 || r.body["type"] != "not-found" {
			t.Errorf("push off: %s %s: %d %v, want 404 not-found", c.method, c.path, r.status, r.body["type"])
		}
	}
}
