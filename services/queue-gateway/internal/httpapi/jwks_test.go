package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/auth/authtest"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// withJWKS makes the gateway verify tokens as a service configured with
// AUTH_JWKS_URL (and the HS256 secret, for the harness's admin tokens)
// does; the harness then mints with the issuer and audience set.
func withJWKS(idp *authtest.IdP) harnessOption {
	return func(o *httpapi.Options, h *harness) {
		ctx, cancel := context.WithCancel(context.Background())
		h.t.Cleanup(cancel)
		var c config.Auth
		err := config.LoadFrom(&c, map[string]string{
			"AUTH_JWT_SECRET": testSecret,
			"AUTH_JWKS_URL":   idp.URL,
			"AUTH_ISSUER":     authtest.Issuer,
			"AUTH_AUDIENCE":   authtest.Audience + ",admin-console",
		})
		if err == nil {
			err = auth.CheckConfig(c)
		}
		if err != nil {
			h.t.Fatal(err)
		}
		ver, err := auth.FromConfig(ctx, c, o.Log)
		if err != nil {
			h.t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for ver.Ready(ctx) != nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := ver.Ready(ctx); err != nil {
			h.t.Fatal(err)
		}
		o.Verifier, h.ver = ver, ver
	}
}

func TestEnterWithIdentityProviderTokens(t *testing.T) {
	t.Parallel()
	rsaKey, ecKey, edKey := authtest.RSAKey("rsa-1", "RS256"), authtest.ECKey("ec-1", ""), authtest.EdKey("ed-1")
	rotated, unknown := authtest.RSAKey("rsa-3", ""), authtest.RSAKey("rsa-2", "RS256")
	idp := authtest.NewIdP(t, rsaKey, ecKey, edKey)
	h := newHarness(t, withJWKS(idp))
	q := h.newQueue(nil) // with an HS256 admin token: both kinds are on
	enter := func(tok string) response {
		return h.must(http.MethodPost, "/api/v1/queues/"+q+"/enter", tok, nil)
	}
	entered := func(who string, tok string, pos int64) {
		t.Helper()
		r := enter(tok)
		var st standing
		if r.status == http.StatusOK {
			r.json(t, &st)
		}
		if r.status != http.StatusOK || st.Position != pos {
			t.Fatalf("%s: enter = %d position %d, want 200 position %d; %s", who, r.status, st.Position, pos, r.body)
		}
	}

	entered("alice (RS256)", rsaKey.Sign(t, authtest.Claims("alice")), 1)
	// The provider rotates a key in: its first token fetches the set.
	idp.Publish(rsaKey, ecKey, edKey, rotated)
	entered("bob (rotated-in key, second audience)", rotated.Sign(t, authtest.With(authtest.Claims("bob"), "aud", []string{"admin-console", "other"})), 2)

	for name, tok := range authtest.BadTokens(t, rsaKey, unknown) {
		r := enter(tok)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s: enter = %d, want 401; %s", name, r.status, r.body)
			continue
		}
		r.problem(t, http.StatusUnauthorized, "unauthorized")
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no WWW-Authenticate challenge", name)
		}
	}
	if z := h.zcard(q); z != 2 {
		t.Fatalf("%d waiting after the refused tokens, want 2 (alice, bob)", z)
	}
	// The unknown kid among them fetched nothing: bob's fetch was < 10 s ago.
	if n := idp.Fetches(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (start, then the rotated-in kid)", n)
	}

	// ES256 from a key published without alg (as Entra does), and EdDSA.
	entered("carol (ES256)", ecKey.Sign(t, authtest.Claims("carol")), 3)
	entered("dave (EdDSA)", edKey.Sign(t, authtest.Claims("dave")), 4)

	// The dev endpoint's HS256 tokens carry the issuer and audience; an
	// HS256 token without them is refused.
	r := h.must(http.MethodPost, "/api/v1/dev/token", "", map[string]any{"userId": "erin"})
	var minted struct{ Token string }
	r.json(t, &minted)
	entered("erin (dev token)", minted.Token, 5)
	bare, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "frank", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	enter(bare).problem(t, http.StatusUnauthorized, "unauthorized")
	if z := h.zcard(q); z != 5 {
		t.Fatalf("%d waiting, want 5 (alice, bob, carol, dave, erin)", z)
	}
}
