package order_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// productIDByHand is the documented product id rule spelled out byte by
// byte, apart from the regular expression: 1 to 64 bytes of A-Z, a-z, 0-9
// and _ . : -.
func productIDByHand(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:-", c) >= 0) {
			return false
		}
	}
	return true
}

// Stand-ins Check never calls.
type (
	noTokens struct{ order.Tokens }
	noRepo   struct{ order.Repo }
)

// FuzzValidProductID: ValidProductID agrees with the rule spelled out by
// hand; Check faults productId exactly when the id is refused; an accepted
// id is a path segment as it is (/admin/v1/products/{productId}) and a JSON
// string without escapes.
func FuzzValidProductID(f *testing.F) {
	for _, s := range []string{
		"sku-1", "SKU_1.a:b", "0", strings.Repeat("p", 64), strings.Repeat("p", 65),
		"", "sku 1", "sku/1", "sku\n", "sku\x00", "ſku", "sku?x", "sku%2F1", "..", "\xff",
	} {
		f.Add(s)
	}
	svc, err := order.New(noTokens{}, noRepo{}, nil, order.Limits{}, slog.New(slog.NewTextHandler(io.Discard, nil)), order.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ok := order.ValidProductID(id)
		if ok != productIDByHand(id) {
			t.Fatalf("ValidProductID(%q) = %v, the documented rule says %v", id, ok, !ok)
		}
		faulted := false
		for _, e := range svc.Check(order.PlaceRequest{QueueID: "sale", ProductID: id, Quantity: 1}) {
			if e.Field != "productId" || e.Message == "" {
				t.Fatalf("product id %q: unexpected field error %+v", id, e)
			}
			faulted = true
		}
		if faulted == ok {
			t.Fatalf("product id %q: valid %v but Check faulted it %v", id, ok, faulted)
		}
		if !ok {
			return
		}
		if esc := url.PathEscape(id); esc != id {
			t.Fatalf("valid product id %q needs escaping in a path: %q", id, esc)
		}
		if b, _ := json.Marshal(id); string(b) != `"`+id+`"` {
			t.Fatalf("valid product id %q is escaped in JSON: %s", id, b)
		}
	})
}
