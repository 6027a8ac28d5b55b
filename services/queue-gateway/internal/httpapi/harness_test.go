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
	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/ticket"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/wire"
)

const testSecret = "test-secret-0123456789abcdef-0123456789"

// harness is a gateway on a real Redis, reached over real HTTP.
type harness struct {
	t      testing.TB
	url    string
	client *http.Client
	ver    *auth.Verifier
	rdb    redis.UniversalClient
	store  *redisstore.Store
	h      http.Handler
	reg    *prometheus.Registry // what the ops listener's /metrics serves
	// challengeTTL is the enter challenges' lifetime (2 minutes unless set).
	challengeTTL time.Duration
	// limits are the service's per-client limits (none unless set).
	limits app.Limits
	// ticketKeys sign and check queue tickets (a key derived from the
	// test secret unless set); frontiers is the gateway's frontier cache.
	ticketKeys [][]byte
	frontiers  *redisstore.FrontierCache
}

// withTicketKeys sets the gateway's TICKET_KEYS.
func withTicketKeys(keys ...[]byte) harnessOption {
	return func(_ *httpapi.Options, h *harness) { h.ticketKeys = keys }
}

type harnessOption func(*httpapi.Options, *harness)

// withRedisURL points the gateway at another Redis (a private one for fault tests).
func withRedisURL(url string) harnessOption {
	return func(_ *httpapi.Options, h *harness) {
		rdb, err := redisstore.NewClient(url)
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = rdb.Close() })
		h.rdb = rdb
	}
}

func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	ver, err := auth.NewVerifier(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ver: ver}
	o := httpapi.Options{
		Verifier: ver,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		DevMode:  true,
	}
	for _, opt := range opts {
		opt(&o, h)
	}
	if h.rdb == nil {
		h.rdb = testenv.Redis(t)
	}
	if h.store, err = redisstore.NewStore(h.rdb); err != nil {
		t.Fatal(err)
	}
	if h.challengeTTL == 0 {
		h.challengeTTL = 2 * time.Minute
	}
	signer, err := challenge.NewSigner(challenge.DeriveKey(testSecret), h.challengeTTL)
	if err != nil {
		t.Fatal(err)
	}
	// The service's metrics as wire registers them, on the registry the
	// tests read.
	if o.Service, err = app.New(h.store, signer, h.limits, nil, wire.NewMetrics(o.Registry)); err != nil {
		t.Fatal(err)
	}
	if h.ticketKeys == nil {
		h.ticketKeys = [][]byte{ticket.DeriveKey(testSecret)}
	}
	tickets, err := ticket.NewSigner(h.ticketKeys...)
	if err != nil {
		t.Fatal(err)
	}
	h.frontiers = redisstore.NewFrontierCache(h.store, o.Log, redisstore.FrontierOptions{})
	fctx, stop := context.WithCancel(context.Background())
	fdone := make(chan struct{})
	go func() { defer close(fdone); _ = h.frontiers.Run(fctx) }()
	t.Cleanup(func() { stop(); <-fdone })
	o.Service.WithTickets(tickets, h.frontiers).WithWordings(h.store)
	wire.RegisterQueueLengths(o.Registry, o.Service, o.Log)
	h.reg = o.Registry
	o.Health = httpserver.NewHealth(map[string]httpserver.Check{"redis": h.store.Ping})
	if h.h, err = httpapi.New(o); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.h)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	h.client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
	}
	t.Cleanup(h.client.CloseIdleConnections)
	return h
}

func (h *harness) token(user, role string) string {
	h.t.Helper()
	tok, err := h.ver.Mint(user, role, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

func (h *harness) admin() string { return h.token("operator", auth.RoleAdmin) }

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %d body %q: %v", r.status, r.body, err)
	}
}

// problemBody is an RFC 9457 problem as clients read it.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// problem checks r is a problem+json with the given status and type.
func (r response) problem(t testing.TB, status int, typ string) problemBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json", ct)
	}
	var p problemBody
	r.json(t, &p)
	if p.Type != typ || p.Status != status {
		t.Fatalf("problem type %q status %d, want %q %d", p.Type, p.Status, typ, status)
	}
	return p
}

// do sends a request; a transport error is returned, not fatal, so it can be
// called from many goroutines.
func (h *harness) do(method, path, token string, body any, hdr ...string) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, h.url+path, rd)
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := h.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// must is do that fails the test on a transport error.
func (h *harness) must(method, path, token string, body any, hdr ...string) response {
	h.t.Helper()
	r, err := h.do(method, path, token, body, hdr...)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// newQueue creates a queue through the admin API and returns its id.
func (h *harness) newQueue(knobs map[string]any) string {
	h.t.Helper()
	return h.newQueueWithID(testenv.ID(h.t), knobs)
}

func (h *harness) newQueueWithID(q string, knobs map[string]any) string {
	h.t.Helper()
	if knobs == nil {
		knobs = map[string]any{}
	}
	h.t.Cleanup(func() { _ = h.store.Purge(context.Background(), q) })
	r := h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), knobs)
	if r.status != http.StatusCreated {
		h.t.Fatalf("create queue %s: %d %s", q, r.status, r.body)
	}
	return q
}

// standing is the enter / position body.
type standing struct {
	QueueID             string  `json:"queueId"`
	State               string  `json:"state"`
	QueueState          string  `json:"queueState"`
	Position            int64   `json:"position"`
	Ahead               int64   `json:"ahead"`
	Total               int64   `json:"total"`
	EtaSeconds          int64   `json:"etaSeconds"`
	RetryAfterMs        int64   `json:"retryAfterMs"`
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`
	Token               string  `json:"token"`
	TokenID             string  `json:"tokenId"`
	ActivateAt          string  `json:"activateAt"`
	ExpiresAt           string  `json:"expiresAt"`
	StartsAt            string  `json:"startsAt"`
	StartsInMs          int64   `json:"startsInMs"`
	PreQueued           int64   `json:"preQueued"`
	Ticket              string  `json:"ticket"`
}

func (h *harness) enter(q, user string) (response, standing, error) {
	r, err := h.do(http.MethodPost, "/api/v1/queues/"+q+"/enter", h.token(user, ""), nil)
	var st standing
	if err == nil && r.status == http.StatusOK {
		err = json.Unmarshal(r.body, &st)
	}
	return r, st, err
}

func (h *harness) position(q, user string) (response, standing) {
	h.t.Helper()
	r := h.must(http.MethodGet, "/api/v1/queues/"+q+"/position", h.token(user, ""), nil)
	var st standing
	if r.status == http.StatusOK {
		r.json(h.t, &st)
	}
	return r, st
}

// grantToken writes a token the way the dispatcher's issue script does.
func (h *harness) grantToken(q, user, secret, id string, ttl time.Duration) {
	h.t.Helper()
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	now := time.Now()
	tok := queue.Token{Secret: secret, ID: id, ActivateAt: now.Add(time.Second), ExpiresAt: now.Add(ttl)}
	if err := h.rdb.Set(ctx, k.Status(user), redisstore.TokenMarker(tok, 1), ttl+2*time.Minute).Err(); err != nil {
		h.t.Fatalf("grant token: %v", err)
	}
}

func (h *harness) zcard(q string) int64 {
	h.t.Helper()
	n, err := h.rdb.ZCard(context.Background(), redisstore.KeysFor(q).Waiting()).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func userID(i int) string { return fmt.Sprintf("user-%05d", i) }
