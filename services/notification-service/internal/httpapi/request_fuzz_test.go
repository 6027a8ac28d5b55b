package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/wire"
)

// askedPositions is the fixed store, remembering whom it was asked about:
// the handler reads a standing only once the request has passed every
// check of its inputs, just before the stream opens.
type askedPositions struct {
	*positions
	asked []string // "queue user"
}

func (p *askedPositions) Position(ctx context.Context, q, user string) (queue.Standing, error) {
	p.asked = append(p.asked, q+" "+user)
	return p.positions.Position(ctx, q, user)
}

// outcome is what one stream request came to.
type outcome struct {
	status int
	ctype  string
	body   string
	asked  string
}

// FuzzStreamRequest drives GET /api/v1/queues/{queueId}/events with any
// queue id, Authorization header, access_token and userId query and
// Last-Event-ID header: everything the handler decodes before a stream
// opens. "{alice}" (admitted) and "{bob}" (waiting) in the header or the
// access_token are fresh tokens. Each request's context is already over, so
// a stream that opens writes its first frames and ends at once. Whatever
// comes in:
//   - never a 5xx; every refusal is a problem+json naming its own status,
//     and the store was not asked and no stream left open;
//   - a stream opens only for a valid queue id, for the token's own user
//     (userId absent or the same), with the retry hint, the position and,
//     for alice, her admission;
//   - a well-formed request (a real token in the header, or only in the
//     query; a valid id) gets exactly the answer the contract names;
//   - Last-Event-ID changes nothing of that.
func FuzzStreamRequest(f *testing.F) {
	ver, err := auth.NewVerifier(secret)
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	h := hub.New(16, 0)
	pos := &askedPositions{positions: &positions{admitted: map[string]*queue.Token{
		"alice": {Secret: "s", ID: "tok-alice", ActivateAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)},
	}}}
	svc := stream.New(h, pos, log, wire.NewMetrics(reg, h), stream.Options{Heartbeat: time.Hour, PositionEvery: time.Hour})
	e, err := httpapi.New(httpapi.Options{Service: svc, Verifier: ver, Log: log, Registry: reg, Health: httpserver.NewHealth(nil)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = e.Close() })
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		if tokens[u], err = ver.Mint(u, "", time.Hour); err != nil {
			f.Fatal(err)
		}
	}
	logins := strings.NewReplacer("{alice}", tokens["alice"], "{bob}", tokens["bob"])

	for _, s := range [][5]string{
		{"q1", "Bearer {alice}", "", "", ""}, {"q1", "", "{bob}", "bob", ""}, {"q1", "", "{alice}", "bob", ""},
		{"q1", "Bearer {bob}", "{alice}", "", "tok-alice"}, {"missing", "Bearer {alice}", "", "", ""},
		{"Q1", "Bearer {alice}", "", "", ""}, {"q1/../q2", "", "{alice}", "", ""}, {"", "", "{alice}", "", ""},
		{"q1", "", "", "", ""}, {"q1", "Bearer junk", "{alice}", "", ""}, {"q1", "Basic {alice}", "{bob}", "", ""},
		{"q1", "", "{alice} ", "", ""}, {"q1", "bearer   {alice}  ", "", "alice", "\x00\r\nevil: 1"},
		{"q1", "", "{alice}", "alice\x00", ""}, {strings.Repeat("q", 65), "", "{alice}", "", ""}, {"{q}", "", "{bob}", "", "1"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	serve := func(q, authz, access, user, last string) outcome {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		req.URL.Path = "/api/v1/queues/" + q + "/events"
		query := url.Values{}
		if access != "" {
			query.Set("access_token", access)
		}
		if user != "" {
			query.Set("userId", user)
		}
		req.URL.RawQuery = query.Encode()
		if authz != "" {
			req.Header["Authorization"] = []string{authz}
		}
		if last != "" {
			req.Header["Last-Event-ID"] = []string{last}
		}
		pos.asked = nil
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return outcome{status: rec.Code, ctype: rec.Header().Get("Content-Type"), body: rec.Body.String(), asked: strings.Join(pos.asked, ",")}
	}

	f.Fuzz(func(t *testing.T, q, rawAuthz, rawAccess, user, last string) {
		authz, access := logins.Replace(rawAuthz), logins.Replace(rawAccess)
		got := serve(q, authz, access, user, last)
		if h.Len() != 0 {
			t.Fatalf("%d streams left open", h.Len())
		}
		if last != "" {
			without := serve(q, authz, access, user, "")
			if without.status != got.status || without.ctype != got.ctype || without.asked != got.asked || frames(without.body) != frames(got.body) {
				t.Fatalf("Last-Event-ID %q changed the answer: %d %q asked %q, without it %d %q asked %q",
					last, got.status, got.body, got.asked, without.status, without.body, without.asked)
			}
		}
		in := []any{q, rawAuthz, rawAccess, user, last}

		switch {
		case got.status >= 500:
			t.Fatalf("%q: %d %s", in, got.status, got.body)
		case got.status >= 300:
			var p problemBody
			if got.status >= 400 && (got.ctype != "application/problem+json" || json.Unmarshal([]byte(got.body), &p) != nil ||
				p.Status != got.status || p.Type == "") {
				t.Fatalf("%q: %d as %q: %s", in, got.status, got.ctype, got.body)
			}
			if got.asked != "" && got.status != http.StatusNotFound {
				t.Fatalf("%q: refused with %d after asking the store about %q", in, got.status, got.asked)
			}
			if got.status == http.StatusNotFound && got.asked != "" && q != "missing" {
				t.Fatalf("%q: 404 for a queue the store knows", in)
			}
		case got.status == http.StatusOK:
			who := strings.TrimPrefix(got.asked, q+" ")
			if !queue.ValidID(q) || tokens[who] == "" || (user != "" && user != who) {
				t.Fatalf("%q: a stream opened for %q", in, got.asked)
			}
			if got.ctype != "text/event-stream" || !strings.HasPrefix(got.body, "retry: ") || !strings.Contains(got.body, "event: position\n") ||
				(who == "alice") != strings.Contains(got.body, "event: admitted\nid: tok-alice\n") {
				t.Fatalf("%q: stream %q %q", in, got.ctype, got.body)
			}
		default:
			t.Fatalf("%q: status %d %s", in, got.status, got.body)
		}

		// A well-formed request: a real token in the header, or none there
		// and one in the query.
		who := ""
		for u, tok := range tokens {
			if authz == "Bearer "+tok || authz == "" && access == tok {
				who = u
			}
		}
		if who == "" || strings.Contains(q, "/") {
			return
		}
		want := http.StatusOK
		switch {
		case !queue.ValidID(q):
			want = http.StatusBadRequest
		case user != "" && user != who:
			want = http.StatusForbidden
		case q == "missing":
			want = http.StatusNotFound
		}
		if got.status != want {
			t.Fatalf("%q as %s: %d, want %d: %s", in, who, got.status, want, got.body)
		}
	})
}

// frames is a stream's frame lines apart from their data (positions and
// retry hints carry jitter): its events and their ids, in order.
func frames(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "event: ") || strings.HasPrefix(l, "id: ") || strings.HasPrefix(l, "retry: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "|")
}

// problemBody is an RFC 9457 problem as clients read it.
type problemBody struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
}
