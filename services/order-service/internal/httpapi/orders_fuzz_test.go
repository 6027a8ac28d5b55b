package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Entry tokens the in-memory token store knows; anything else is junk.
const (
	goodToken  = "0123456789abcdef0123456789abcdef"
	earlyToken = "early0123456789abcdef0123456789a"
	spentToken = "spent0123456789abcdef0123456789a"
)

// touched counts what one request asked of the stand-ins.
type touched struct {
	check, consume, settle, place, limit int
	begin, lookup, finish, abandon       int
	checkedUser                          string             // whom CheckToken was asked about
	consumed                             order.PlaceRequest // what Consume and PlaceOrder were given
}

// reachedStore reports whether anything past the read-only token check
// happened: a token consumed, an order or an Idempotency-Key written.
func (t touched) reachedStore() bool {
	return t.consume+t.settle+t.place+t.begin+t.finish+t.abandon > 0
}

// memTokens is the entry-token store in memory.
type memTokens struct {
	order.Tokens // anything else is never called
	t            *touched
}

func (m memTokens) CheckToken(_ context.Context, _, user, secret string) (queue.TokenCheck, error) {
	m.t.check++
	m.t.checkedUser = user
	switch secret {
	case goodToken:
		return queue.TokenCheck{State: queue.TokenValid}, nil
	case earlyToken:
		return queue.TokenCheck{State: queue.TokenNotActive, Wait: 1500 * time.Millisecond}, nil
	case spentToken:
		return queue.TokenCheck{State: queue.TokenSpent}, nil
	}
	return queue.TokenCheck{State: queue.TokenInvalid}, nil
}

func (m memTokens) Consume(_ context.Context, q, user, secret, _ string, _, _ time.Duration) (queue.Consumed, error) {
	m.t.consume++
	m.t.consumed.QueueID, m.t.consumed.UserID, m.t.consumed.Token = q, user, secret
	now := time.Now()
	return queue.Consumed{TokenID: "tok-1", ActivateAt: now.Add(-time.Second), ExpiresAt: now.Add(5 * time.Minute)}, nil
}

func (m memTokens) Settle(context.Context, string, string, string, string) (bool, error) {
	m.t.settle++
	return true, nil
}

// memOrders is the order database in memory: the orders, and
// Idempotency-Keys that are all new.
type memOrders struct {
	order.Repo
	t *touched
}

func (m memOrders) PlaceOrder(_ context.Context, p order.Placement) (order.Order, error) {
	o, event := p.Order, p.Event
	m.t.place++
	if p.Key != "" && p.Answer != nil {
		m.t.finish++ // the answer, kept in the order's commit
	}
	m.t.consumed.ProductID, m.t.consumed.Quantity = o.ProductID, o.Quantity
	o.CreatedAt = time.Now()
	if e, ok := event(o).(order.Created); !ok || e.Order != o {
		return order.Order{}, fmt.Errorf("event %+v for order %+v", e, o)
	}
	return o, nil
}

func (m memOrders) BeginIdempotent(context.Context, string, string) (order.StoredAnswer, bool, error) {
	m.t.begin++
	return order.StoredAnswer{}, true, nil
}

func (m memOrders) LookupIdempotent(context.Context, string, string) (order.StoredAnswer, bool, error) {
	m.t.lookup++
	return order.StoredAnswer{}, false, nil
}

func (m memOrders) FinishIdempotent(context.Context, string, string, int, []byte) error {
	m.t.finish++
	return nil
}

func (m memOrders) AbandonIdempotent(context.Context, string, string) error {
	m.t.abandon++
	return nil
}

// refuse is a limiter that refuses one key and lets every other through.
type refuse struct {
	key string
	t   *touched
}

func (r refuse) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	r.t.limit++
	return key != r.key, time.Second, nil
}

func mint(f *testing.F, ver *auth.Verifier, user string) string {
	tok, err := ver.Mint(user, "", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	return tok
}

// idempotencyKeyByHand is the documented Idempotency-Key rule: 1 to 255
// printable ASCII characters, no space.
func idempotencyKeyByHand(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

// FuzzPlaceOrder drives POST /api/v1/orders with any body and any
// Authorization, X-Entry-Token, Idempotency-Key and Content-Type, against
// in-memory stand-ins (no servers); "{alice}" and "{greedy}" in any header
// are replaced by fresh tokens of those users. Whatever comes in:
//   - the answer is one of 201, 400, 401, 403, 413, 415, 425, 429, never a
//     5xx, and every refusal is a problem+json naming its own status;
//   - a refused body, header or login (400, 401, 413, 415) asked nothing of
//     the token store, the limits or the database;
//   - without the real entry token nothing is consumed or written, and no
//     Idempotency-Key stored (junk never reaches Postgres);
//   - what reached the token store is the body's own fields, exactly as the
//     contract spells them: a JSON object with queueId, productId and
//     quantity and nothing else, each valid;
//   - the real token with a well-formed request is one order: consumed,
//     written and settled once, its key stored once, and the 201 body
//     re-encodes to the request's fields.
func FuzzPlaceOrder(f *testing.F) {
	var t touched
	ver, err := auth.NewVerifier("order-fuzz-secret-0123456789abcdef-xyz")
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := order.New(memTokens{t: &t}, memOrders{t: &t}, nil,
		order.Limits{Queue: refuse{key: "busy", t: &t}, User: refuse{key: "greedy", t: &t}}, log, order.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Service: svc, Audit: audit.New(nil), History: history.New(nil), Verifier: ver, Log: log,
		Registry: prometheus.NewRegistry(), Health: httpserver.NewHealth(nil)})
	if err != nil {
		f.Fatal(err)
	}
	// Logins are placeholders the test swaps for fresh tokens, so a kept
	// input stays valid after the token it was found with has expired.
	logins := strings.NewReplacer("{alice}", mint(f, ver, "alice"), "{greedy}", mint(f, ver, "greedy"))

	good := `{"queueId":"sale","productId":"sku-1","quantity":2}`
	type seed struct{ body, authz, entry, key, ctype string }
	for _, s := range []seed{
		{good, "Bearer {alice}", goodToken, "", "application/json"},
		{good, "Bearer {alice}", goodToken, "order-1", "application/json"},
		{good, "Bearer {alice}", "junk", "order-2", "application/json"},
		{good, "Bearer {alice}", "", "", ""},
		{good, "Bearer {alice}", earlyToken, "k", "application/json"},
		{good, "Bearer {alice}", spentToken, "k", "application/json"},
		{good, "Bearer {greedy}", "junk", "k", "application/json"},
		{`{"queueId":"busy","productId":"sku-1","quantity":1}`, "Bearer {alice}", goodToken, "k", "application/json"},
		{good, "Bearer {alice}", goodToken, "has space", "application/json"},
		{good, "Bearer {alice}", goodToken, strings.Repeat("k", 256), "application/json"},
		{good, "Bearer {alice}", goodToken, "caf\u00e9", "application/json"},
		{good, "", goodToken, "k", "application/json"},
		{good, "Bearer junk", goodToken, "k", "application/json"},
		{good, "Bearer {alice}", strings.Repeat("t", 200), "k", "application/json"},
		{good, "Bearer {alice}", goodToken, "", "text/plain"},
		{`{"queueId":"sale","productId":"sku-1","quantity":2,"price":1}`, "Bearer {alice}", goodToken, "k", ""},
		{`{"queueId":"sale","productId":"sku-1","quantity":2}{}`, "Bearer {alice}", goodToken, "k", ""},
		{`{"queueId":"sale","productId":"sku-1","quantity":2.5}`, "Bearer {alice}", goodToken, "", ""},
		{`{"queueId":"sale","productId":"sku-1","quantity":11}`, "Bearer {alice}", goodToken, "", ""},
		{`{"queueId":"Sale","productId":"sku 1","quantity":0}`, "Bearer {alice}", goodToken, "", ""},
		{`{"queueId":"sale","productId":"sku-1","quantity":1e400}`, "Bearer {alice}", goodToken, "", ""},
		{`{"queueId":null,"productId":"sku-1","quantity":2}`, "Bearer {alice}", goodToken, "", ""},
		{`{"queueId":"sale","queueId":"sale","productId":"sku-1","quantity":2}`, "Bearer {alice}", goodToken, "", ""},
		{`[1,2,3]`, "Bearer {alice}", goodToken, "", ""},
		{``, "Bearer {alice}", goodToken, "", ""},
		{"\xff\xfe", "Bearer {alice}", goodToken, "", ""},
		{`{"queueId":"sale","productId":"` + strings.Repeat("x", 70<<10) + `","quantity":2}`, "Bearer {alice}", goodToken, "", ""},
	} {
		f.Add([]byte(s.body), s.authz, s.entry, s.key, s.ctype)
	}

	f.Fuzz(func(tt *testing.T, body []byte, authz, entry, key, ctype string) {
		t = touched{}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/orders", bytes.NewReader(body))
		for name, v := range map[string]string{"Authorization": authz, "X-Entry-Token": entry, "Idempotency-Key": key, "Content-Type": ctype} {
			if v != "" {
				req.Header[name] = []string{logins.Replace(v)}
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status := rec.Code
		answer := rec.Body.Bytes()

		switch status {
		case http.StatusCreated:
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge,
			http.StatusUnsupportedMediaType, http.StatusTooEarly, http.StatusTooManyRequests:
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				tt.Fatalf("status %d as %q: %s", status, ct, answer)
			}
			if err := json.Unmarshal(answer, &p); err != nil || p.Status != status || p.Type == "" {
				tt.Fatalf("status %d with problem %s (%v)", status, answer, err)
			}
		default:
			tt.Fatalf("body %q entry %q key %q: status %d %s", body, entry, key, status, answer)
		}

		switch status {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			if t != (touched{}) {
				tt.Fatalf("refused with %d, yet the stand-ins were asked: %+v", status, t)
			}
		}
		if key != "" && !idempotencyKeyByHand(key) && t != (touched{}) {
			tt.Fatalf("Idempotency-Key %q is malformed, yet the stand-ins were asked: %+v (status %d)", key, t, status)
		}
		if entry != goodToken && (t.reachedStore() || t.limit > 1) {
			tt.Fatalf("entry token %q is not the real one, yet: %+v (status %d)", entry, t, status)
		}
		if t.lookup > 0 && (entry != spentToken || key == "") {
			tt.Fatalf("an Idempotency-Key was looked up for entry %q key %q", entry, key)
		}
		if t.check == 0 {
			return
		}

		// The request passed the edge: the fields the service saw are the
		// body's, spelled as the contract says, and valid.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			tt.Fatalf("body %q passed the edge but is no JSON object: %v", body, err)
		}
		var want struct {
			QueueID   *string  `json:"queueId"`
			ProductID *string  `json:"productId"`
			Quantity  *float64 `json:"quantity"`
		}
		for name, raw := range fields {
			var dst any
			switch name {
			case "queueId":
				dst = &want.QueueID
			case "productId":
				dst = &want.ProductID
			case "quantity":
				dst = &want.Quantity
			default:
				tt.Fatalf("body %q passed the edge with field %q, which the contract does not have", body, name)
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				tt.Fatalf("body %q passed the edge with %s = %s: %v", body, name, raw, err)
			}
		}
		if want.QueueID == nil || want.ProductID == nil || want.Quantity == nil {
			tt.Fatalf("body %q passed the edge without queueId, productId and quantity", body)
		}
		if !queue.ValidID(*want.QueueID) || !order.ValidProductID(*want.ProductID) || *want.Quantity < 1 || *want.Quantity > 10 {
			tt.Fatalf("body %q passed the edge with an invalid field", body)
		}
		if t.check != 1 || t.limit != 1 || (t.checkedUser != "alice" && t.checkedUser != "greedy") {
			tt.Fatalf("one request: %d token checks for %q and %d limits charged", t.check, t.checkedUser, t.limit)
		}
		if entry != goodToken || *want.QueueID == "busy" {
			return
		}

		// The real token: one order, its key stored once.
		if status != http.StatusCreated {
			tt.Fatalf("a well-formed order with the real token got %d: %s", status, answer)
		}
		wantKeys := 0
		if key != "" {
			wantKeys = 1
		}
		if t.consume != 1 || t.place != 1 || t.settle != 1 || t.begin != wantKeys || t.finish != wantKeys || t.abandon != 0 {
			tt.Fatalf("one order: %+v", t)
		}
		if c := t.consumed; c.QueueID != *want.QueueID || c.ProductID != *want.ProductID || float64(c.Quantity) != *want.Quantity ||
			c.UserID != t.checkedUser || c.Token != goodToken {
			tt.Fatalf("body %q placed as %+v", body, c)
		}
		var got struct {
			QueueID   string `json:"queueId"`
			ProductID string `json:"productId"`
			Quantity  int    `json:"quantity"`
		}
		if err := json.Unmarshal(answer, &got); err != nil {
			tt.Fatalf("201 body %s: %v", answer, err)
		}
		again, _ := json.Marshal(got)
		canon, _ := json.Marshal(struct {
			QueueID   string `json:"queueId"`
			ProductID string `json:"productId"`
			Quantity  int    `json:"quantity"`
		}{*want.QueueID, *want.ProductID, int(*want.Quantity)})
		if !bytes.Equal(again, canon) {
			tt.Fatalf("body %q came back as %s", body, again)
		}
	})
}
