package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// memProducts is the product table in memory, remembering every write.
type memProducts struct {
	order.Repo
	upserts *[]order.Product
}

func (m memProducts) UpsertProduct(_ context.Context, p order.Product) (order.Product, bool, error) {
	*m.upserts = append(*m.upserts, p)
	return p, len(*m.upserts)%2 == 1, nil
}

// FuzzPutProduct drives PUT /admin/v1/products/{productId} with any id in
// the path, any body and any login ("{admin}" and "{user}" are fresh
// tokens). Whatever comes in: never a 5xx; every refusal a problem+json
// that wrote nothing; and a product is written only with a valid path id
// and a body that is exactly the contract's object (queueId, name, stock,
// priceCents, spelled so, each in bounds), written and answered as sent.
func FuzzPutProduct(f *testing.F) {
	ver, err := auth.NewVerifier("product-fuzz-secret-0123456789abcdef-xyz")
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var upserts []order.Product
	svc, err := order.New(nopTokens{}, memProducts{upserts: &upserts}, nil, order.Limits{}, log, order.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Service: svc, Audit: audit.New(nil), History: history.New(nil), Verifier: ver, Log: log,
		Registry: prometheus.NewRegistry(), Health: httpserver.NewHealth(nil)})
	if err != nil {
		f.Fatal(err)
	}
	admin, err := ver.Mint("operator", auth.RoleAdmin, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	logins := strings.NewReplacer("{admin}", admin, "{user}", mint(f, ver, "alice"))

	good := `{"queueId":"sale","name":"Sneaker","stock":100,"priceCents":12999}`
	for _, s := range [][3]string{
		{"sku-1", good, "Bearer {admin}"}, {"sku-1", good, "Bearer {user}"}, {"sku-1", good, ""},
		{"sku 1", good, "Bearer {admin}"}, {"", good, "Bearer {admin}"}, {"a/b", good, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"x","stock":-1,"priceCents":1}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"","stock":1,"priceCents":1}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"` + strings.Repeat("é", 201) + `","stock":1,"priceCents":1}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"x","stock":1e10,"priceCents":1}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"x","stock":1,"priceCents":100000000001}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"x","stock":1,"priceCents":1,"color":"red"}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"x","stock":1,"priceCents":1}[]`, "Bearer {admin}"},
		{"sku-1", `{"queueId":"sale","name":"\ud800","stock":1,"priceCents":1}`, "Bearer {admin}"},
		{"sku-1", `{"queueId":null,"name":"x","stock":1,"priceCents":1}`, "Bearer {admin}"},
		{"sku-1", `null`, "Bearer {admin}"}, {"sku-1", ``, "Bearer {admin}"}, {"sku-1", "\xff", "Bearer {admin}"},
	} {
		f.Add(s[0], []byte(s[1]), s[2])
	}

	f.Fuzz(func(t *testing.T, id string, body []byte, authz string) {
		upserts = upserts[:0]
		req := httptest.NewRequest(http.MethodPut, "/", bytes.NewReader(body))
		req.URL.Path = "/admin/v1/products/" + id
		if authz != "" {
			req.Header["Authorization"] = []string{logins.Replace(authz)}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status, answer := rec.Code, rec.Body.Bytes()
		switch {
		case status >= 500:
			t.Fatalf("id %q body %q: %d %s", id, body, status, answer)
		case status >= 400:
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			}
			if rec.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(answer, &p) != nil || p.Status != status || p.Type == "" {
				t.Fatalf("id %q body %q: %d %q %s", id, body, status, rec.Header().Get("Content-Type"), answer)
			}
		}
		if status != http.StatusOK && status != http.StatusCreated {
			if len(upserts) > 0 {
				t.Fatalf("id %q body %q: %d, yet wrote %+v", id, body, status, upserts)
			}
			return
		}
		if len(upserts) != 1 {
			t.Fatalf("id %q body %q: %d after %d writes", id, body, status, len(upserts))
		}
		p := upserts[0]
		if p.ID != id || !order.ValidProductID(id) {
			t.Fatalf("path id %q written as %q", id, p.ID)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatalf("body %q written but no JSON object: %v", body, err)
		}
		var sent struct {
			QueueID    string `json:"queueId"`
			Name       string `json:"name"`
			Stock      int    `json:"stock"`
			PriceCents int64  `json:"priceCents"`
		}
		for name, raw := range fields {
			var dst any
			switch name {
			case "queueId":
				dst = &sent.QueueID
			case "name":
				dst = &sent.Name
			case "stock":
				dst = &sent.Stock
			case "priceCents":
				dst = &sent.PriceCents
			default:
				t.Fatalf("body %q written with field %q, which the contract does not have", body, name)
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				t.Fatalf("body %q written with %s = %s: %v", body, name, raw, err)
			}
		}
		if len(fields) != 4 || !queue.ValidID(sent.QueueID) || sent.Name == "" || utf8.RuneCountInString(sent.Name) > 200 ||
			sent.Stock < 0 || sent.Stock > 1_000_000_000 || sent.PriceCents < 0 || sent.PriceCents > 100_000_000_000 {
			t.Fatalf("body %q written though out of the contract: %+v", body, sent)
		}
		if p.QueueID != sent.QueueID || p.Name != sent.Name || p.Stock != sent.Stock || p.PriceCents != sent.PriceCents {
			t.Fatalf("body %q written as %+v", body, p)
		}
		var back struct {
			ProductID  string `json:"productId"`
			QueueID    string `json:"queueId"`
			Name       string `json:"name"`
			Stock      int    `json:"stock"`
			PriceCents int64  `json:"priceCents"`
		}
		if err := json.Unmarshal(answer, &back); err != nil || back.ProductID != id || back.QueueID != sent.QueueID ||
			back.Name != sent.Name || back.Stock != sent.Stock || back.PriceCents != sent.PriceCents {
			t.Fatalf("body %q answered %s (%v)", body, answer, err)
		}
	})
}
