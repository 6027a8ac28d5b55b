package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// fuzzRoutes are the user routes FuzzUserRoutes picks from.
var fuzzRoutes = []struct{ method, suffix string }{
	{http.MethodPost, "/enter"},
	{http.MethodGet, "/position"},
	{http.MethodDelete, "/position"},
	{http.MethodPost, "/challenge"},
	{http.MethodGet, ""},
}

// FuzzUserRoutes drives enter, position, leave, challenge and the public
// queue view with any queue id in the path, any Authorization and any
// X-Enter-Challenge, through the gateway's handler on a real Redis.
// Placeholders keep kept inputs valid: "{open}" and "{pow}" in the id are
// a queue without and one with a proof-of-work challenge, "{alice}" and
// "{bob}" in the header fresh logins, and "{solved}" in the solution a
// challenge just issued to alice for {pow} and solved. Whatever comes in:
//   - never a 5xx; every refusal is a problem+json naming its own status;
//   - a refusal changes no line, and neither does a path whose id is no
//     valid queue id;
//   - a place in the {pow} line is only ever got with the fresh solution;
//   - a solution that is not a real one is never let in, on any queue;
//   - an accepted enter, position or view names the queue of the path.
func FuzzUserRoutes(f *testing.F) {
	h := newHarness(f)
	open := h.newQueue(nil)
	pow := h.newQueue(map[string]any{"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 4})
	ids := strings.NewReplacer("{open}", open, "{pow}", pow)
	logins := strings.NewReplacer("{alice}", h.token("alice", ""), "{bob}", h.token("bob", ""))

	for _, s := range []struct {
		route         uint8
		q, authz, sol string
	}{
		{0, "{open}", "Bearer {alice}", ""}, {1, "{open}", "Bearer {alice}", ""}, {2, "{open}", "Bearer {bob}", ""},
		{3, "{pow}", "Bearer {alice}", ""}, {0, "{pow}", "Bearer {alice}", "{solved}"}, {0, "{pow}", "Bearer {bob}", "{solved}"},
		{0, "{pow}", "Bearer {bob}", ""}, {0, "{open}", "Bearer {alice}", "{solved}"}, {0, "{pow}", "Bearer {alice}", "x:1"},
		{0, "{pow}", "Bearer {alice}", "{solved}x"}, {0, "{pow}", "Bearer {alice}", ":"}, {3, "{open}", "Bearer {alice}", ""},
		{4, "{open}", "", ""}, {4, "nobody-here", "", ""}, {0, "nobody-here", "Bearer {alice}", ""},
		{0, "Bad_Queue", "Bearer {alice}", ""}, {1, strings.Repeat("a", 65), "Bearer {alice}", ""},
		{0, "{open}", "", ""}, {0, "{open}", "Bearer junk", ""}, {0, "{open}", "Basic {alice}", ""},
		{0, "", "Bearer {alice}", ""}, {4, "{open}/", "", ""}, {2, "{open}/../{pow}", "Bearer {alice}", ""},
		{0, "{open}/position", "Bearer {alice}", ""}, {0, "{open}\x00", "Bearer {alice}", ""}, {0, "{op}en}", "Bearer {alice}", ""},
		{4, "%7Bopen%7D", "", ""}, {1, "s\u0430le", "Bearer {alice}", ""},
	} {
		f.Add(s.route, s.q, s.authz, s.sol)
	}

	ctx := context.Background()
	lines := func(t testing.TB) [2]int64 {
		var o, p *redis.IntCmd
		_, err := h.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			o = pl.ZCard(ctx, redisstore.KeysFor(open).Waiting())
			p = pl.ZCard(ctx, redisstore.KeysFor(pow).Waiting())
			return nil
		})
		if err != nil {
			t.Fatalf("count the lines: %v", err)
		}
		return [2]int64{o.Val(), p.Val()}
	}
	serve := func(method, path, authz, sol string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/", nil)
		req.URL.Path = path
		if authz != "" {
			req.Header["Authorization"] = []string{authz}
		}
		if sol != "" {
			req.Header["X-Enter-Challenge"] = []string{sol}
		}
		rec := httptest.NewRecorder()
		h.h.ServeHTTP(rec, req)
		return rec
	}
	// fresh issues alice a challenge for {pow} and solves it.
	fresh := func(t *testing.T) string {
		rec := serve(http.MethodPost, "/api/v1/queues/"+pow+"/challenge", logins.Replace("Bearer {alice}"), "")
		var c issuedChallenge
		if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &c) != nil {
			t.Fatalf("challenge for alice: %d %s", rec.Code, rec.Body)
		}
		return c.Challenge + ":" + challenge.Solve(c.Challenge, c.DifficultyBits)
	}

	f.Fuzz(func(t *testing.T, route uint8, rawQ, rawAuthz, rawSol string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		q, authz, sol := ids.Replace(rawQ), logins.Replace(rawAuthz), rawSol
		realSolution := ""
		if strings.Contains(rawSol, "{solved}") {
			realSolution = fresh(t)
			sol = strings.ReplaceAll(rawSol, "{solved}", realSolution)
		}
		before := lines(t)
		rec := serve(rt.method, "/api/v1/queues/"+q+rt.suffix, authz, sol)
		after := lines(t)
		status, body := rec.Code, rec.Body.Bytes()

		switch {
		case status >= 500:
			t.Fatalf("%s %q auth %q solution %q: %d %s", rt.method, q+rt.suffix, rawAuthz, rawSol, status, body)
		case status >= 400:
			var p problemBody
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %q: %d as %q", rt.method, q+rt.suffix, status, ct)
			}
			if err := json.Unmarshal(body, &p); err != nil || p.Status != status || p.Type == "" {
				t.Fatalf("%s %q: %d with problem %s (%v)", rt.method, q+rt.suffix, status, body, err)
			}
		}
		refused := status < 200 || status >= 300
		if (refused || q != open && q != pow) && after != before {
			t.Fatalf("%s %q auth %q solution %q: %d, yet the lines went from %v to %v", rt.method, q+rt.suffix, rawAuthz, rawSol, status, before, after)
		}
		if after[1] > before[1] && (sol != realSolution || realSolution == "") {
			t.Fatalf("a place in the challenge queue without the fresh solution: %q, auth %q (%d)", rawSol, rawAuthz, status)
		}
		if rt.suffix == "/enter" && sol != "" && sol != realSolution && !refused {
			t.Fatalf("enter %q with solution %q, not a real one, got %d %s", q, rawSol, status, body)
		}
		if !refused && rt.method != http.MethodDelete && rt.suffix != "/challenge" {
			// The id is the path's first segment after /queues/: an id
			// like "{open}/position" makes the public view's path the
			// position route's.
			var v struct {
				QueueID string `json:"queueId"`
			}
			if err := json.Unmarshal(body, &v); err != nil || v.QueueID != strings.SplitN(q, "/", 2)[0] {
				t.Fatalf("%s %q: %d names queue %q (%v)", rt.method, q+rt.suffix, status, v.QueueID, err)
			}
		}
	})
}
