// Command loadgen is a flash-sale load generator for the waiting room.
//
// N virtual users (dev JWTs signed locally with pkg/auth.DevSecret) enter a
// queue within -enter-within, poll their position honouring retryAfterMs, and
// order once ADMITTED with the entry token. A listener on the events exchange
// records TokenIssued / OrderCreated / OrderFailed, so the report can check
// FIFO admission (the sequence numbers), tokens issued twice or never seen,
// and events against observed state changes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	wrv1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

type standing struct {
	State        string  `json:"state"`
	Position     int64   `json:"position"`
	RetryAfterMs int64   `json:"retryAfterMs"`
	Rate         float64 `json:"admissionRatePerSec"`
	Token        string  `json:"token"`
	TokenID      string  `json:"tokenId"`
	ActivateAt   string  `json:"activateAt"`
	Eta          int64   `json:"etaSeconds"`
	EtaLow       int64   `json:"etaLowSeconds"`
	EtaHigh      int64   `json:"etaHighSeconds"`
}

type cfg struct {
	gateway, orders, queue, product, amqpURL, exchange string
	users, concurrency                                 int
	enterWithin, timeout, maxWait                      time.Duration
	prefix                                             string
	noEvents, quiet                                    bool
	// leave is the share of users who leave the line, each at a random
	// moment of the wait they were told at entry.
	leave float64
}

// latencies is a thread-safe latency recorder.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) { l.mu.Lock(); l.d = append(l.d, d); l.mu.Unlock() }
func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	i := int(math.Ceil(p/100*float64(len(l.d)))) - 1
	return l.d[max(0, min(i, len(l.d)-1))]
}
func (l *latencies) n() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.d) }

type user struct {
	id, jwt       string
	enterPos      int64
	enterStart    time.Time // start of the successful enter request
	enteredAt     time.Time // its answer
	admittedAt    time.Time
	tokenID       string
	final         string // ORDERED, SOLD_OUT, EXPIRED, TIMEOUT, ERROR, ...
	orderStatus   int
	admittedIndex int64
	// The wait the gateway announced at entry (WAITING only), seconds.
	eta, etaLow, etaHigh int64
	leaves               bool
}

type stats struct {
	enterLat, posLat, orderLat       latencies
	enters, positions, ordersCreated atomic.Int64
	soldOut, orderErr, httpErr       atomic.Int64
	admitted, done, waiting          atomic.Int64
	admitSeq                         atomic.Int64
	retries429, retries503           atomic.Int64
}

type eventLog struct {
	mu            sync.Mutex
	issued        []*wrv1.TokenIssued
	issuedByTok   map[string]int
	created       map[string]int // token id -> count
	failed        map[string]int
	expired, rest int
	dups          int
	seen          map[string]bool
	subscribed    atomic.Bool
}

func main() {
	var c cfg
	flag.StringVar(&c.gateway, "gateway", "http://127.0.0.1:8080", "queue-gateway base URL")
	flag.StringVar(&c.orders, "orders", "http://127.0.0.1:8081", "order-service base URL")
	flag.StringVar(&c.queue, "queue", "loadtest", "queue id")
	flag.StringVar(&c.product, "product", "loadtest-tee", "product id to order")
	flag.IntVar(&c.users, "users", 20000, "virtual users")
	flag.DurationVar(&c.enterWithin, "enter-within", 3*time.Second, "all users enter within this window (evenly spread)")
	flag.IntVar(&c.concurrency, "concurrency", 512, "max concurrent HTTP requests")
	flag.StringVar(&c.amqpURL, "amqp", envOr("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL for the event listener")
	flag.StringVar(&c.exchange, "exchange", "waitingroom.events", "events exchange")
	flag.BoolVar(&c.noEvents, "no-events", false, "do not listen to the exchange")
	flag.DurationVar(&c.timeout, "timeout", 0, "give up after this long (default: users/rate x 1.5 + 60s)")
	flag.StringVar(&c.prefix, "user-prefix", "", "user id prefix (default: lg<unix time>-)")
	flag.BoolVar(&c.quiet, "quiet", false, "no progress line")
	flag.Float64Var(&c.leave, "leave", 0, "share of users who leave the line at a random moment of the wait they were told (0..1)")
	mint := flag.Int("mint", 0, "only write this many signed dev JWTs (one a line, users <user-prefix>0..N-1) to stdout and exit")
	ticketGen := flag.Int64("ticket-generation", -1, "with -mint: after each JWT, a space and the queue ticket (dev key) of the user for its place in -queue at this generation (its createdAtMs)")
	stride := flag.Int("stride", 1, "with -mint: the i-th line is user <user-prefix>(i x stride), at place i x stride + 1")
	flag.Parse()
	if c.prefix == "" {
		c.prefix = "lg" + strconv.FormatInt(time.Now().Unix(), 36) + "-"
	}
	if *mint > 0 {
		os.Exit(mintTokens(*mint, max(1, *stride), c.prefix, c.queue, *ticketGen))
	}
	os.Exit(run(c))
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func run(c cfg) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	ver, err := auth.NewVerifier(auth.DevSecret)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tr := &http.Transport{
		MaxIdleConns: c.concurrency * 2, MaxIdleConnsPerHost: c.concurrency * 2,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, IdleConnTimeout: 90 * time.Second,
	}
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	sem := make(chan struct{}, c.concurrency)

	// The queue's configured rate.
	rate := queueRate(ctx, hc, c)
	if rate <= 0 {
		fmt.Fprintf(os.Stderr, "loadgen: queue %q not found or not readable at %s\n", c.queue, c.gateway)
		return 2
	}
	if c.timeout == 0 {
		c.timeout = time.Duration(float64(c.users)/rate*1.5*float64(time.Second)) + 60*time.Second
	}

	// Event listener.
	ev := &eventLog{issuedByTok: map[string]int{}, created: map[string]int{}, failed: map[string]int{}, seen: map[string]bool{}}
	var conn *broker.Conn
	evCtx, evCancel := context.WithCancel(context.Background())
	defer evCancel()
	var evWG sync.WaitGroup
	if !c.noEvents {
		conn, err = broker.New(c.amqpURL, broker.Options{Exchange: c.exchange, Source: "/loadgen", Log: log})
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: broker: %v (use -no-events to skip)\n", err)
			return 2
		}
		rctx, rc := context.WithTimeout(ctx, 5*time.Second)
		err = conn.Ready(rctx)
		rc()
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: broker not ready: %v (use -no-events to skip)\n", err)
			return 2
		}
		evWG.Add(1)
		go func() {
			defer evWG.Done()
			_ = conn.Consume(evCtx, broker.QueueSpec{Bindings: []string{"token.*", "order.*"}, Prefetch: 64},
				func(_ context.Context, d broker.Delivery) broker.Result {
					ev.record(c.queue, d)
					return broker.Ack
				})
		}()
		time.Sleep(1 * time.Second) // let the server-named queue bind before the first admission
	}

	// Users and their tokens, signed locally.
	users := make([]*user, c.users)
	for i := range users {
		id := c.prefix + strconv.Itoa(i)
		tok, err := ver.Mint(id, "", 2*time.Hour)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		users[i] = &user{id: id, jwt: tok, leaves: rand.Float64() < c.leave}
	}

	var st stats
	start := time.Now()
	deadline := start.Add(c.timeout)
	var wg sync.WaitGroup
	progressDone := make(chan struct{})
	if !c.quiet {
		go progress(&st, c.users, start, progressDone)
	}
	for i, u := range users {
		at := start.Add(time.Duration(float64(c.enterWithin) * float64(i) / float64(c.users)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			journey(ctx, hc, sem, c, u, &st, deadline)
			st.done.Add(1)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if !c.quiet {
		close(progressDone)
		time.Sleep(50 * time.Millisecond)
		fmt.Fprintln(os.Stderr)
	}
	// Let trailing events arrive.
	if conn != nil {
		time.Sleep(2 * time.Second)
		evCancel()
		evWG.Wait()
		_ = conn.Close()
	}
	evCancel()
	return report(ctx, hc, c, users, &st, ev, rate, elapsed)
}

func (ev *eventLog) record(q string, d broker.Delivery) {
	m, err := events.Decode(d.Type, d.Body)
	if err != nil {
		return
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.seen[d.MessageID] {
		ev.dups++
		return
	}
	ev.seen[d.MessageID] = true
	switch e := m.(type) {
	case *wrv1.TokenIssued:
		if e.GetQueueId() == q {
			ev.issued = append(ev.issued, e)
			ev.issuedByTok[e.GetUserId()]++
		}
	case *wrv1.OrderCreated:
		if e.GetQueueId() == q {
			ev.created[e.GetTokenId()]++
		}
	case *wrv1.OrderFailed:
		if e.GetQueueId() == q {
			ev.failed[e.GetTokenId()]++
		}
	case *wrv1.TokenExpired:
		if e.GetQueueId() == q {
			ev.expired++
		}
	case *wrv1.TokenRestored:
		if e.GetQueueId() == q {
			ev.rest++
		}
	}
}

type resp struct {
	code  int
	body  []byte
	retry time.Duration
}

func do(ctx context.Context, hc *http.Client, sem chan struct{}, method, url, jwt string, hdr map[string]string, body []byte) (resp, time.Duration, error) {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return resp{}, 0, ctx.Err()
	}
	defer func() { <-sem }()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return resp{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	r, err := hc.Do(req)
	if err != nil {
		return resp{}, time.Since(t0), err
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	lat := time.Since(t0)
	out := resp{code: r.StatusCode, body: b}
	if s := r.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			out.retry = time.Duration(n) * time.Second
		}
	}
	return out, lat, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// journey is one virtual user: enter, poll, order.
func journey(ctx context.Context, hc *http.Client, sem chan struct{}, c cfg, u *user, st *stats, deadline time.Time) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	base := c.gateway + "/api/v1/queues/" + c.queue
	var s standing
	// enter (retry on 429 / 503 / transport errors)
	for {
		t0 := time.Now()
		r, lat, err := do(ctx, hc, sem, http.MethodPost, base+"/enter", u.jwt, nil, nil)
		if ctx.Err() != nil {
			u.final = "TIMEOUT"
			return
		}
		if err != nil {
			st.httpErr.Add(1)
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		if r.code == http.StatusOK {
			st.enterLat.add(lat)
			st.enters.Add(1)
			u.enterStart = t0
			_ = json.Unmarshal(r.body, &s)
			break
		}
		if r.code == http.StatusTooManyRequests || r.code == http.StatusServiceUnavailable {
			if r.code == 429 {
				st.retries429.Add(1)
			} else {
				st.retries503.Add(1)
			}
			sleepCtx(ctx, max(r.retry, 100*time.Millisecond))
			continue
		}
		st.httpErr.Add(1)
		u.final = fmt.Sprintf("ENTER_%d", r.code)
		return
	}
	u.enteredAt = time.Now()
	u.enterPos = s.Position
	var leaveAt time.Time
	if s.State == "WAITING" {
		u.eta, u.etaLow, u.etaHigh = s.Eta, s.EtaLow, s.EtaHigh
		if u.leaves {
			leaveAt = u.enteredAt.Add(time.Duration(rand.Float64() * 0.9 * float64(s.Eta) * float64(time.Second)))
		}
	}
	st.waiting.Add(1)
	waiting := true
	defer func() {
		if waiting {
			st.waiting.Add(-1)
		}
	}()
	// poll
	for s.State == "WAITING" {
		d := time.Duration(s.RetryAfterMs) * time.Millisecond
		if d <= 0 {
			d = time.Second
		}
		if !leaveAt.IsZero() && time.Now().Add(d).After(leaveAt) {
			if !sleepCtx(ctx, time.Until(leaveAt)) {
				u.final = "TIMEOUT"
				return
			}
			if r, _, err := do(ctx, hc, sem, http.MethodDelete, base+"/position", u.jwt, nil, nil); err == nil && r.code == http.StatusNoContent {
				u.final = "LEFT"
				return
			}
			leaveAt = time.Time{} // admitted meanwhile, or the call failed: stay
			continue
		}
		if !sleepCtx(ctx, d) {
			u.final = "TIMEOUT"
			return
		}
		r, lat, err := do(ctx, hc, sem, http.MethodGet, base+"/position", u.jwt, nil, nil)
		if ctx.Err() != nil {
			u.final = "TIMEOUT"
			return
		}
		if err != nil || r.code != http.StatusOK {
			st.httpErr.Add(1)
			s.RetryAfterMs = max(int64(r.retry/time.Millisecond), 500)
			continue
		}
		st.posLat.add(lat)
		st.positions.Add(1)
		var ns standing
		if json.Unmarshal(r.body, &ns) != nil {
			st.httpErr.Add(1)
			continue
		}
		s = ns
	}
	waiting = false
	st.waiting.Add(-1)
	if s.State != "ADMITTED" {
		u.final = s.State
		return
	}
	u.admittedAt = time.Now()
	u.tokenID = s.TokenID
	u.admittedIndex = st.admitSeq.Add(1)
	st.admitted.Add(1)
	// order: wait for activateAt, retry 425 / 429 / 503 (token is not touched or is given back)
	if t, err := time.Parse(time.RFC3339Nano, s.ActivateAt); err == nil {
		if !sleepCtx(ctx, time.Until(t)) {
			u.final = "TIMEOUT"
			return
		}
	}
	body, _ := json.Marshal(map[string]any{"queueId": c.queue, "productId": c.product, "quantity": 1})
	hdr := map[string]string{"X-Entry-Token": s.Token, "Idempotency-Key": "lg-" + u.id}
	for {
		r, lat, err := do(ctx, hc, sem, http.MethodPost, c.orders+"/api/v1/orders", u.jwt, hdr, body)
		if ctx.Err() != nil {
			u.final = "TIMEOUT"
			return
		}
		if err != nil {
			st.httpErr.Add(1)
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		u.orderStatus = r.code
		switch r.code {
		case http.StatusCreated:
			st.orderLat.add(lat)
			st.ordersCreated.Add(1)
			u.final = "ORDERED"
			return
		case http.StatusConflict:
			st.orderLat.add(lat)
			st.soldOut.Add(1)
			u.final = "SOLD_OUT"
			return
		case http.StatusTooEarly, http.StatusTooManyRequests, http.StatusServiceUnavailable:
			sleepCtx(ctx, max(r.retry, 100*time.Millisecond))
			continue
		case http.StatusForbidden:
			// The token may be in flight from an earlier attempt whose answer
			// we lost, or restored with a new chance: ask the gateway.
			ns, ok := recheck(ctx, hc, sem, base, u.jwt)
			switch {
			case ok && ns.State == "ORDERED":
				st.ordersCreated.Add(1)
				u.final = "ORDERED"
				return
			case ok && ns.State == "ADMITTED" && ns.Token != "":
				hdr["X-Entry-Token"] = ns.Token
				continue
			}
			st.orderErr.Add(1)
			u.final = "ORDER_403"
			return
		default:
			st.orderErr.Add(1)
			u.final = fmt.Sprintf("ORDER_%d", r.code)
			return
		}
	}
}

// recheck polls the position until it is no longer ORDERING (bounded).
func recheck(ctx context.Context, hc *http.Client, sem chan struct{}, base, jwt string) (standing, bool) {
	for range 60 {
		r, _, err := do(ctx, hc, sem, http.MethodGet, base+"/position", jwt, nil, nil)
		if err != nil || r.code != http.StatusOK {
			return standing{}, false
		}
		var s standing
		if json.Unmarshal(r.body, &s) != nil {
			return standing{}, false
		}
		if s.State != "ORDERING" {
			return s, true
		}
		if !sleepCtx(ctx, time.Second) {
			return standing{}, false
		}
	}
	return standing{}, false
}

func progress(st *stats, n int, start time.Time, done chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			line(st, n, start)
			return
		case <-t.C:
			line(st, n, start)
		}
	}
}

func line(st *stats, n int, start time.Time) {
	done := st.done.Load()
	const w = 30
	f := int(float64(w) * float64(done) / float64(max(n, 1)))
	bar := strings.Repeat("#", f) + strings.Repeat(".", w-f)
	fmt.Fprintf(os.Stderr, "\r[%s] %5.1fs entered %d/%d waiting %d admitted %d ordered %d soldout %d done %d   ",
		bar, time.Since(start).Seconds(), st.enters.Load(), n, st.waiting.Load(), st.admitted.Load(),
		st.ordersCreated.Load(), st.soldOut.Load(), done)
}

func queueRate(ctx context.Context, hc *http.Client, c cfg) float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.gateway+"/api/v1/queues/"+c.queue, nil)
	r, err := hc.Do(req)
	if err != nil {
		return 0
	}
	defer r.Body.Close()
	var v map[string]any
	if json.NewDecoder(r.Body).Decode(&v) != nil || r.StatusCode != 200 {
		return 0
	}
	for _, k := range []string{"admissionRatePerSec", "configuredRatePerSec", "configuredAdmissionRatePerSec"} {
		if f, ok := v[k].(float64); ok && f > 0 {
			return f
		}
	}
	return 0
}

func productStock(ctx context.Context, hc *http.Client, c cfg) (int64, bool) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.orders+"/api/v1/products?queueId="+c.queue, nil)
	r, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	var list []map[string]any
	if json.Unmarshal(b, &list) != nil {
		var wrap map[string]json.RawMessage
		if json.Unmarshal(b, &wrap) == nil {
			for _, v := range wrap {
				if json.Unmarshal(v, &list) == nil {
					break
				}
			}
		}
	}
	for _, p := range list {
		id, _ := p["productId"].(string)
		if id == "" {
			id, _ = p["id"].(string)
		}
		if id == c.product {
			if f, ok := p["stock"].(float64); ok {
				return int64(f), true
			}
		}
	}
	return 0, false
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func report(ctx context.Context, hc *http.Client, c cfg, users []*user, st *stats, ev *eventLog, rate float64, elapsed time.Duration) int {
	var firstEnter, lastEnter, firstAdmit, lastAdmit time.Time
	finals := map[string]int{}
	admitted := make([]*user, 0, len(users))
	for _, u := range users {
		finals[u.final]++
		if !u.enteredAt.IsZero() {
			if firstEnter.IsZero() || u.enteredAt.Before(firstEnter) {
				firstEnter = u.enteredAt
			}
			if u.enteredAt.After(lastEnter) {
				lastEnter = u.enteredAt
			}
		}
		if !u.admittedAt.IsZero() {
			admitted = append(admitted, u)
			if firstAdmit.IsZero() || u.admittedAt.Before(firstAdmit) {
				firstAdmit = u.admittedAt
			}
			if u.admittedAt.After(lastAdmit) {
				lastAdmit = u.admittedAt
			}
		}
	}
	out := os.Stdout
	fmt.Fprintf(out, "\n== loadgen report: queue %q, %d users, entered within %v, wall %.1fs ==\n", c.queue, len(users), c.enterWithin, elapsed.Seconds())
	enterSpan := lastEnter.Sub(firstEnter).Seconds()
	fmt.Fprintf(out, "enter      %7d ok  %8.0f req/s over %.2fs  p50 %s  p99 %s  (429 retries %d, 503 retries %d)\n",
		st.enters.Load(), float64(st.enters.Load())/math.Max(enterSpan, 0.001), enterSpan, ms(st.enterLat.pct(50)), ms(st.enterLat.pct(99)), st.retries429.Load(), st.retries503.Load())
	fmt.Fprintf(out, "position   %7d ok  %8.0f req/s over the run   p50 %s  p99 %s\n",
		st.positions.Load(), float64(st.positions.Load())/elapsed.Seconds(), ms(st.posLat.pct(50)), ms(st.posLat.pct(99)))
	fmt.Fprintf(out, "order      %7d     p50 %s  p99 %s\n", st.orderLat.n(), ms(st.orderLat.pct(50)), ms(st.orderLat.pct(99)))
	fmt.Fprintf(out, "http errors %d\n", st.httpErr.Load())

	// Admission rate: from the issue times on the exchange if we have them, else from observed ADMITTED.
	var admRate float64
	var how string
	if len(ev.issued) > 1 {
		first, last := ev.issued[0].GetOccurredAt().AsTime(), ev.issued[0].GetOccurredAt().AsTime()
		for _, e := range ev.issued {
			t := e.GetOccurredAt().AsTime()
			if t.Before(first) {
				first = t
			}
			if t.After(last) {
				last = t
			}
		}
		if s := last.Sub(first).Seconds(); s > 0 {
			admRate = float64(len(ev.issued)-1) / s
		}
		how = "TokenIssued.occurred_at"
	} else if len(admitted) > 1 {
		admRate = float64(len(admitted)-1) / lastAdmit.Sub(firstAdmit).Seconds()
		how = "observed ADMITTED (polling blurs it)"
	}
	errPct := 0.0
	if rate > 0 && admRate > 0 {
		errPct = (admRate - rate) / rate * 100
	}
	fmt.Fprintf(out, "admissions %7d seen by users; rate %.1f/s vs configured %.1f/s: error %+.2f %% (from %s)\n",
		len(admitted), admRate, rate, errPct, how)

	// FIFO. Exact: TokenIssued in issue order (occurred_at, then activate_at,
	// which the issue script spreads in pop order within a tick) must carry
	// growing sequence numbers. Against entry order: a user A is overtaken
	// when someone B whose enter request started after A's enter answer came
	// back (so B certainly entered after A) was issued a token before A.
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].admittedIndex < admitted[j].admittedIndex })
	if !c.noEvents {
		issued := append([]*wrv1.TokenIssued(nil), ev.issued...)
		sort.SliceStable(issued, func(i, j int) bool {
			a, b := issued[i], issued[j]
			ta, tb := a.GetOccurredAt().AsTime(), b.GetOccurredAt().AsTime()
			if !ta.Equal(tb) {
				return ta.Before(tb)
			}
			aa, ba := a.GetActivateAt().AsTime(), b.GetActivateAt().AsTime()
			if !aa.Equal(ba) {
				return aa.Before(ba)
			}
			// Same tick and no activation spread (activationSpreadMs 0):
			// the events carry no order of their own, so none is an
			// inversion.
			return a.GetSequence() < b.GetSequence()
		})
		inv := 0
		var maxSeq uint64
		for _, e := range issued {
			if e.GetSequence() < maxSeq {
				inv++
			}
			maxSeq = max(maxSeq, e.GetSequence())
		}
		byID := map[string]*user{}
		for _, u := range users {
			byID[u.id] = u
		}
		overtaken := 0
		var maxStart time.Time
		for _, e := range issued {
			u := byID[e.GetUserId()]
			if u == nil || u.enteredAt.IsZero() {
				continue
			}
			if maxStart.After(u.enteredAt) {
				overtaken++
			}
			if u.enterStart.After(maxStart) {
				maxStart = u.enterStart
			}
		}
		twice := 0
		for _, n := range ev.issuedByTok {
			if n > 1 {
				twice++
			}
		}
		lost := 0
		for _, u := range users {
			// One who left may have been admitted just before: not lost.
			if ev.issuedByTok[u.id] > 0 && u.admittedAt.IsZero() && u.final != "LEFT" {
				lost++
			}
		}
		notOnExchange := 0
		for _, u := range admitted {
			if ev.issuedByTok[u.id] == 0 {
				notOnExchange++
			}
		}
		created := 0
		for _, n := range ev.created {
			created += n
		}
		failed := 0
		for _, n := range ev.failed {
			failed += n
		}
		fmt.Fprintf(out, "FIFO: %d TokenIssued, %d sequence inversions (exact), %d users overtaken by someone who entered after them\n", len(issued), inv, overtaken)
		etaReport(out, issued, byID, finals["LEFT"])
		fmt.Fprintf(out, "tokens: issued twice %d, issued but never seen ADMITTED (lost) %d, seen ADMITTED without TokenIssued %d, duplicate deliveries %d\n",
			twice, lost, notOnExchange, ev.dups)
		fmt.Fprintf(out, "events vs state: TokenIssued %d vs admitted %d; OrderCreated %d vs 201s %d; OrderFailed %d vs 409s+errors %d; TokenExpired %d; TokenRestored %d\n",
			len(issued), len(admitted), created, st.ordersCreated.Load(), failed, st.soldOut.Load()+st.orderErr.Load(), ev.expired, ev.rest)
	}
	stockLeft, ok := productStock(ctx, hc, c)
	if ok {
		fmt.Fprintf(out, "orders: created %d, sold out %d, errors %d; stock left %d (created + left = %d)\n",
			st.ordersCreated.Load(), st.soldOut.Load(), st.orderErr.Load(), stockLeft, st.ordersCreated.Load()+stockLeft)
	} else {
		fmt.Fprintf(out, "orders: created %d, sold out %d, errors %d\n", st.ordersCreated.Load(), st.soldOut.Load(), st.orderErr.Load())
	}
	keys := make([]string, 0, len(finals))
	for k := range finals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, finals[k]))
	}
	fmt.Fprintf(out, "user outcomes: %s\n", strings.Join(parts, " "))
	if finals["TIMEOUT"] > 0 || st.orderErr.Load() > 0 {
		return 1
	}
	return 0
}

// mintTokens writes n dev JWTs for bench tools (wrk reads them from a
// file), of users prefix+(i x stride). With a generation (>= 0) each line
// also carries, after a space, the user's queue ticket for place
// i x stride + 1 of queue q, signed with the key a dev gateway derives (for
// a line the bench wrote straight into Redis).
func mintTokens(n, stride int, prefix, q string, generation int64) int {
	ver, err := auth.NewVerifier(auth.DevSecret)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var tickets *ticket.Signer
	if generation >= 0 {
		if tickets, err = ticket.NewSigner(ticket.DeriveKey(auth.DevSecret)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	for i := range n {
		user := prefix + strconv.Itoa(i*stride)
		t, err := ver.Mint(user, "", 6*time.Hour)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		w.WriteString(t)
		if tickets != nil {
			w.WriteByte(' ')
			w.WriteString(tickets.Sign(q, user, ticket.Place{Generation: generation, Seq: int64(i*stride + 1)}))
		}
		w.WriteByte('\n')
	}
	return 0
}

// etaReport compares the wait each admitted user was told at entry with the
// wait they had, entry answer to TokenIssued.occurred_at: the median and p90
// relative error, and the share admitted inside the 80 % interval shown.
func etaReport(out io.Writer, issued []*wrv1.TokenIssued, byID map[string]*user, left int) {
	var rel []float64
	inside := 0
	seen := map[string]bool{}
	for _, e := range issued {
		u := byID[e.GetUserId()]
		if u == nil || seen[u.id] || u.enteredAt.IsZero() || u.eta == 0 {
			continue
		}
		seen[u.id] = true
		waited := e.GetOccurredAt().AsTime().Sub(u.enteredAt).Seconds()
		rel = append(rel, math.Abs(waited-float64(u.eta))/math.Max(waited, 0.1))
		if waited >= float64(u.etaLow) && waited <= float64(u.etaHigh) {
			inside++
		}
	}
	if len(rel) == 0 {
		fmt.Fprintln(out, "ETA: nobody admitted after waiting")
		return
	}
	sort.Float64s(rel)
	fmt.Fprintf(out, "ETA: %d admitted after waiting (%d left the line): relative error of etaSeconds at entry median %.3f, p90 %.3f; %.3f admitted inside the 80 %% interval shown\n",
		len(rel), left, rel[len(rel)/2], rel[len(rel)*9/10], float64(inside)/float64(len(rel)))
}
