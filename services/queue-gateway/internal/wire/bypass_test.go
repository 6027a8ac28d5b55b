package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestFailModeThroughARedisOutage: the wired gateway on a private Redis,
// with its per-IP enter limit on. With Redis killed, a queue that fails OPEN
// answers enter and position with BYPASS (its cached state and rate, no
// place, a poll hint of ~5 s), even past the enter limit; one that fails
// CLOSED, an unknown queue, leave and the admin API answer 503
// backend-unavailable with Retry-After. A queue that fails OPEN and asks
// for proof of work lets people through without one while Redis is down
// (the challenge's single-use record and the place are Redis's): the
// order-service's per-queue bucket is what holds them then. With Redis
// back (empty) and the queues re-created, the line resumes: WAITING at
// place 1, no BYPASS, and the proof of work is asked for again (428).
func TestFailModeThroughARedisOutage(t *testing.T) {
	t.Parallel()
	redisSrv := testenv.StartRedisServer(t)
	cfg := Config{HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second},
		EnterRateLimitPerIP: 5, EnterChallengeTTL: time.Minute}
	cfg.Redis.URL = redisSrv.URL()
	cfg.DevMode = true
	cfg.EntryTokens.Keys = []string{passKey}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	c := &client{t: t, base: "http://" + srv.Addr()}
	admin, ann, bob := c.token("operator", "admin"), c.token("ann", ""), c.token("bob", "")

	// CLOSED first: a cache that knows the OPEN queue knows both.
	createQueues := func() {
		t.Helper()
		c.put("/admin/v1/queues/fails-closed", admin, map[string]any{})
		c.put("/admin/v1/queues/fails-open", admin, map[string]any{"failMode": "OPEN", "admissionRatePerSec": 40})
		c.put("/admin/v1/queues/fails-open-pow", admin, map[string]any{"failMode": "OPEN", "admissionRatePerSec": 40,
			"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 20})
	}
	createQueues()
	if r := c.do(http.MethodPost, "/api/v1/queues/fails-open/enter", ann); r.status != http.StatusOK || r.standing(t).State != "WAITING" {
		t.Fatalf("ann's enter before the outage: %d %s", r.status, r.body)
	}

	// The cache refreshes every second: two of them and it holds both
	// queues. (A queue made less than a refresh before an outage is not
	// known yet, and answers 503.)
	time.Sleep(2 * time.Second)
	redisSrv.Stop()
	// 503 until the gateway's probe finds Redis down (a few failed
	// refreshes in a row), then BYPASS.
	var annPass string
	testenv.WaitFor(t, 10*time.Second, "ann's position BYPASS", func() bool {
		r := c.do(http.MethodGet, "/api/v1/queues/fails-open/position", ann)
		if r.status == http.StatusServiceUnavailable {
			return false
		}
		annPass = checkBypass(t, "ann's position", r)
		return true
	})
	// Three times the enter limit, from one address: the limiter is in
	// Redis too, and BYPASS is not held back by it. Bob is given one pass,
	// and the same pass again.
	bobPass := checkBypass(t, "bob's enter 1", c.do(http.MethodPost, "/api/v1/queues/fails-open/enter", bob))
	for i := 1; i < 3*cfg.EnterRateLimitPerIP; i++ {
		if p := checkBypass(t, fmt.Sprintf("bob's enter %d", i+1), c.do(http.MethodPost, "/api/v1/queues/fails-open/enter", bob)); p != bobPass {
			t.Fatalf("bob's enter %d: another pass", i+1)
		}
	}
	if p := checkBypass(t, "bob's position", c.do(http.MethodGet, "/api/v1/queues/fails-open/position", bob)); p != bobPass || p == annPass {
		t.Fatalf("bob's position: pass %q, want his own %q (ann's is %q)", p, bobPass, annPass)
	}
	// A proof-of-work queue gives a pass only to an enter with a valid
	// solution (checked without Redis): without one, 428 (the finding: an
	// entrant with no solution got BYPASS).
	if r := c.do(http.MethodPost, "/api/v1/queues/fails-open-pow/enter", bob); r.status != http.StatusPreconditionRequired {
		t.Fatalf("bob's enter without a proof of work, Redis down: %d %s, want 428", r.status, r.body)
	}

	for _, r := range []struct{ what, method, path, tok string }{
		{"enter, fails CLOSED", http.MethodPost, "/api/v1/queues/fails-closed/enter", bob},
		{"position, fails CLOSED", http.MethodGet, "/api/v1/queues/fails-closed/position", bob},
		{"enter, unknown queue", http.MethodPost, "/api/v1/queues/nobody-made-it/enter", bob},
		{"position, unknown queue", http.MethodGet, "/api/v1/queues/nobody-made-it/position", bob},
		{"leave, fails OPEN", http.MethodDelete, "/api/v1/queues/fails-open/position", ann},
		{"admin view, fails OPEN", http.MethodGet, "/admin/v1/queues/fails-open", admin},
	} {
		res := c.do(r.method, r.path, r.tok)
		var p struct{ Type string }
		_ = json.Unmarshal(res.body, &p)
		if res.status != http.StatusServiceUnavailable || p.Type != problem.TypeBackendUnavailable || res.header.Get("Retry-After") == "" {
			t.Errorf("%s with Redis down: %d %q Retry-After %q, want 503 %s with Retry-After", r.what, res.status, p.Type,
				res.header.Get("Retry-After"), problem.TypeBackendUnavailable)
		}
	}
	metrics := c.metrics("http://" + srv.OpsAddr() + "/metrics")
	for series, want := range map[string]int{
		`waitingroom_gateway_enter_total{outcome="bypass"}`:           3 * cfg.EnterRateLimitPerIP,
		`waitingroom_gateway_position_requests_total{state="bypass"}`: 2,
		`waitingroom_gateway_enter_total{outcome="unavailable"}`:      2,
	} {
		if got := metrics[series]; got != want {
			t.Errorf("%s = %d, want %d", series, got, want)
		}
	}

	redisSrv.Start()
	// The private server kept nothing: the operator makes the queues again.
	deadline := time.Now().Add(5 * time.Second)
	for c.status(http.MethodGet, "/api/v1/queues/fails-open", "") == http.StatusServiceUnavailable && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	createQueues()
	for _, q := range []string{"fails-open", "fails-closed"} {
		r := c.do(http.MethodPost, "/api/v1/queues/"+q+"/enter", bob)
		if st := r.standing(t); r.status != http.StatusOK || st.State != "WAITING" || st.Position != 1 {
			t.Errorf("bob's enter on %s after the outage: %d %s, want WAITING at 1", q, r.status, r.body)
		}
	}
	if r := c.do(http.MethodPost, "/api/v1/queues/fails-open-pow/enter", bob); r.status != http.StatusPreconditionRequired {
		t.Errorf("bob's enter without a proof of work after the outage: %d %s, want 428", r.status, r.body)
	}
	if r := c.do(http.MethodGet, "/api/v1/queues/fails-open/position", ann); r.status != http.StatusOK || r.standing(t).State != "NOT_IN_QUEUE" {
		t.Errorf("ann's position after the outage (her place went with Redis): %d %s, want NOT_IN_QUEUE", r.status, r.body)
	}
}

// passKey signs the passes of the gateway under test, as ENTRY_TOKEN_KEYS.
const passKey = "gateway-test-pass-key-0123456789abcdef"

// checkBypass: a 200 BYPASS standing with no place, a ~5 s poll hint and
// a pass the order-service accepts for the queue; it returns the pass.
func checkBypass(t *testing.T, what string, r response) string {
	t.Helper()
	return checkBypassOf(t, "fails-open", what, r)
}

// checkBypassOf is checkBypass for queue q.
func checkBypassOf(t *testing.T, q, what string, r response) string {
	t.Helper()
	st := r.standing(t)
	retry, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if r.status != http.StatusOK || st.State != "BYPASS" || st.QueueID != q || st.QueueState != "OPEN" ||
		st.AdmissionRatePerSec != 40 || st.Position != 0 || st.Ahead != 0 || st.EtaSeconds != 0 ||
		st.RetryAfterMs < 4000 || st.RetryAfterMs > 6000 || retry < 4 || retry > 6 {
		t.Fatalf("%s with Redis down: %d %s Retry-After %q, want 200 BYPASS of %s (OPEN, 40/s, place 0, retry 4-6 s)",
			what, r.status, r.body, r.header.Get("Retry-After"), q)
	}
	signer, err := grant.NewSigner([]byte(passKey))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := signer.Check(q, st.Token); err != nil || v.TokenID != st.TokenID {
		t.Fatalf("%s: pass %q (id %q) checks as %+v %v", what, st.Token, st.TokenID, v, err)
	}
	return st.Token
}

// client speaks to the wired gateway over HTTP.
type client struct {
	t    *testing.T
	base string
}

type response struct {
	status int
	header http.Header
	body   []byte
}

type standing struct {
	QueueID             string  `json:"queueId"`
	State               string  `json:"state"`
	QueueState          string  `json:"queueState"`
	Position            int64   `json:"position"`
	Ahead               int64   `json:"ahead"`
	EtaSeconds          int64   `json:"etaSeconds"`
	RetryAfterMs        int64   `json:"retryAfterMs"`
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`
	Token               string  `json:"token"`
	TokenID             string  `json:"tokenId"`
}

func (r response) standing(t *testing.T) standing {
	t.Helper()
	var st standing
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &st); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
	return st
}

func (c *client) send(method, path, tok string, body any) response {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (c *client) do(method, path, tok string) response { return c.send(method, path, tok, nil) }

func (c *client) status(method, path, tok string) int { return c.do(method, path, tok).status }

// token mints one from the dev endpoint, which needs no Redis.
func (c *client) token(user, role string) string {
	c.t.Helper()
	r := c.send(http.MethodPost, "/api/v1/dev/token", "", map[string]string{"userId": user, "role": role})
	var v struct{ Token string }
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != http.StatusOK {
		c.t.Fatalf("dev token for %s: %d %s", user, r.status, r.body)
	}
	return v.Token
}

func (c *client) put(path, tok string, knobs map[string]any) {
	c.t.Helper()
	if r := c.send(http.MethodPut, path, tok, knobs); r.status != http.StatusCreated {
		c.t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
	}
}

var seriesLine = regexp.MustCompile(`(?m)^(waitingroom_gateway_\S+) (\d+)$`)

// metrics reads the gateway's counters by series.
func (c *client) metrics(url string) map[string]int {
	c.t.Helper()
	res, err := http.Get(url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range seriesLine.FindAllStringSubmatch(string(b), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}
