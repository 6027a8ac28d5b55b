package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAuthRefusesBadTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	now := time.Now()
	good := jwt.MapClaims{"sub": "u1", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}

	b64 := base64.RawURLEncoding.EncodeToString
	algNone := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"sub":"u1","exp":9999999999}`)) + "."

	tests := []struct {
		name, header string
	}{
		{"no token", ""},
		{"not bearer", "Basic dTE6cHc="},
		{"garbage", "Bearer not.a.jwt"},
		{"alg none", "Bearer " + algNone},
		{"expired", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "u1", "exp": now.Add(-time.Hour).Unix()})},
		{"no exp", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "u1"})},
		{"wrong signature", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789abcdef-xyz"), good)},
		{"HS512 with the right key", "Bearer " + sign(t, jwt.SigningMethodHS512, []byte(testSecret), good)},
		{"issued in the future", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "u1", "exp": now.Add(2 * time.Hour).Unix(), "iat": now.Add(time.Hour).Unix()})},
		{"bad subject", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "u 1/../x", "exp": now.Add(time.Hour).Unix()})},
		{"no subject", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"exp": now.Add(time.Hour).Unix()})},
	}
	for _, tt := range tests {
		for _, route := range []struct{ method, path string }{
			{http.MethodPost, "/api/v1/queues/" + q + "/enter"},
			{http.MethodGet, "/api/v1/queues/" + q + "/position"},
			{http.MethodDelete, "/api/v1/queues/" + q + "/position"},
			{http.MethodGet, "/admin/v1/queues/" + q},
		} {
			var hdr []string
			if tt.header != "" {
				hdr = []string{"Authorization", tt.header}
			}
			r := h.must(route.method, route.path, "", nil, hdr...)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s: %s %s = %d, want 401", tt.name, route.method, route.path, r.status)
				continue
			}
			r.problem(t, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: no WWW-Authenticate challenge", tt.name)
			}
		}
	}
	if z := h.zcard(q); z != 0 {
		t.Fatalf("ZCARD = %d after refused requests, want 0", z)
	}

	// The good token passes.
	r := h.must(http.MethodPost, "/api/v1/queues/"+q+"/enter", "", nil,
		"Authorization", "Bearer "+sign(t, jwt.SigningMethodHS256, []byte(testSecret), good))
	if r.status != http.StatusOK {
		t.Fatalf("good token: %d %s", r.status, r.body)
	}
}

func TestAdminRoutesNeedTheAdminRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	user := h.token("plain-user", "")
	for _, rt := range []struct{ method, path string }{
		{http.MethodGet, "/admin/v1/queues"},
		{http.MethodGet, "/admin/v1/queues/" + q},
		{http.MethodPut, "/admin/v1/queues/" + q},
		{http.MethodDelete, "/admin/v1/queues/" + q},
	} {
		var body any
		if rt.method == http.MethodPut {
			body = map[string]any{"state": "CLOSED"}
		}
		h.must(rt.method, rt.path, user, body).problem(t, http.StatusForbidden, "forbidden")
	}
	// Nothing changed: still open.
	var v struct{ State string }
	r := h.must(http.MethodGet, "/admin/v1/queues/"+q, h.admin(), nil)
	r.json(t, &v)
	if r.status != http.StatusOK || v.State != "OPEN" {
		t.Fatalf("after refused admin calls: %d state %q, want 200 OPEN", r.status, v.State)
	}
}

func TestDevTokenEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	r := h.must(http.MethodPost, "/api/v1/dev/token", "", map[string]any{"userId": "dev-user-1"})
	var tok struct{ Token, ExpiresAt string }
	r.json(t, &tok)
	if r.status != http.StatusOK || tok.Token == "" {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	r = h.must(http.MethodPost, "/api/v1/queues/"+q+"/enter", tok.Token, nil)
	var st standing
	r.json(t, &st)
	if r.status != http.StatusOK || st.Position != 1 {
		t.Fatalf("enter with a dev token: %d %s", r.status, r.body)
	}
	// A minted admin token reaches the admin API.
	r = h.must(http.MethodPost, "/api/v1/dev/token", "", map[string]any{"userId": "ops", "role": "admin"})
	r.json(t, &tok)
	if r = h.must(http.MethodGet, "/admin/v1/queues/"+q, tok.Token, nil); r.status != http.StatusOK {
		t.Fatalf("admin with a dev admin token: %d", r.status)
	}
	for _, body := range []string{`{"userId":"a b"}`, `{"userId":"u","role":"root"}`, `{"userId":"u","extra":1}`, `{`, `[]`} {
		if r := h.must(http.MethodPost, "/api/v1/dev/token", "", body); r.status != http.StatusBadRequest {
			t.Errorf("mint %s: %d, want 400", body, r.status)
		}
	}
}

func TestDevTokenEndpointIsOffByDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *httpapi.Options, _ *harness) { o.DevMode = false })
	h.must(http.MethodPost, "/api/v1/dev/token", "", map[string]any{"userId": "u"}).problem(t, http.StatusNotFound, "not-found")
}
