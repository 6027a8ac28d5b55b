// Command admitwatch watches one queue's admissions from outside, as a
// downstream consumer and as browsers see them, for make bench.
//
// It binds its own exclusive queue to token.issued and tokens.issued (a
// dispatcher with TOKEN_EVENTS=each or batch) and records, for every token
// of the queue: when it arrived, its occurred_at (the admission tick's
// Redis time) and its sequence. Before that it opens -streams Server-Sent
// Events streams on the notification-service for users spread evenly over
// <prefix><from>..<prefix><to>, and waits until each has had its first
// frame; it then records when each stream's "admitted" frame arrives.
//
// The window starts -settle after the first token's occurred_at and lasts
// -window. -grace after its end the streams whose user's token has arrived
// are the ones fan-out is measured on; admitwatch waits up to -grace more
// for their frames, then prints one line and exits:
//
//	admitwatch: queue=q streams=2000 window_s=30.000 tokens=1500000 rate_per_s=50000.0 ...
//
// tokens are those whose occurred_at falls in the window, ticks their
// distinct occurred_at (admission ticks). inversions
// counts, over every token received, in the order (occurred_at, arrival),
// the tokens with a sequence below one seen before them (a sequence seen
// twice is a duplicate, not an inversion). amqp_* is arrival - occurred_at
// of the window's tokens; fanout_* is, per stream, the arrival of its
// "admitted" frame - occurred_at of that user's token (fanout_n streams
// had both, fanout_admitted had their user's token); notify_* is the
// frame's arrival - the token's arrival here, the notification-service's
// part of it. The exit status is non-zero only when it could not set up
// (broker, streams).
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	wrv1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

type config struct {
	amqpURL, exchange, queue, notify, secret, prefix string
	streams, from, to                                int
	window, settle, grace, setupTimeout              time.Duration
}

// token is one admission as received: Unix nanoseconds and its sequence.
type token struct {
	arrived, occurred int64
	seq               uint64
}

// watch is what the consumer and the streams record.
type watch struct {
	mu       sync.Mutex
	tokens   []token // in arrival order
	messages int
	first    chan struct{} // closed at the first token
	// frozen: later tokens no longer count for the streams (their frames
	// would be cut off by the end of the run).
	frozen bool
	// Per stream (index into users): its user's token's occurred_at and
	// arrival here, and the arrival of its "admitted" frame; Unix
	// nanoseconds, 0 until seen.
	users      []string
	index      map[string]int
	issuedAt   []int64
	receivedAt []int64
	framedAt   []int64
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("admitwatch: ")
	var c config
	flag.StringVar(&c.amqpURL, "amqp", envOr("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL (AMQP_URL)")
	flag.StringVar(&c.exchange, "exchange", envOr("AMQP_EXCHANGE", events.ExchangeName), "events exchange (AMQP_EXCHANGE)")
	flag.StringVar(&c.queue, "queue", "", "queue id (required)")
	flag.StringVar(&c.notify, "notify", "", "notification-service base URL, e.g. http://127.0.0.1:8082 (empty: no streams)")
	flag.StringVar(&c.secret, "secret", os.Getenv("AUTH_JWT_SECRET"), "the notification-service's AUTH_JWT_SECRET, to mint the streams' JWTs")
	flag.StringVar(&c.prefix, "user-prefix", "d", "user ids are <prefix><n>")
	flag.IntVar(&c.streams, "streams", 0, "SSE streams to open, for users spread evenly over -from..-to")
	flag.IntVar(&c.from, "from", 1, "first user number of the streams")
	flag.IntVar(&c.to, "to", 1, "last user number of the streams")
	flag.DurationVar(&c.window, "window", 30*time.Second, "measuring window")
	flag.DurationVar(&c.settle, "settle", 1500*time.Millisecond, "the window starts this long after the first token's occurred_at")
	flag.DurationVar(&c.grace, "grace", 5*time.Second, "how long after the window to wait for late tokens, and then for their frames")
	flag.DurationVar(&c.setupTimeout, "setup-timeout", 2*time.Minute, "for opening the streams, and then for the first token")
	flag.Parse()
	if c.queue == "" || (c.streams > 0 && (c.notify == "" || c.to < c.from)) {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, c config) error {
	w := &watch{first: make(chan struct{}), index: make(map[string]int)}
	for i := range c.streams {
		n := c.from
		if c.streams > 1 {
			n += int(int64(i) * int64(c.to-c.from) / int64(c.streams-1))
		}
		u := fmt.Sprintf("%s%d", c.prefix, n)
		if _, dup := w.index[u]; !dup {
			w.index[u] = len(w.users)
			w.users = append(w.users, u)
		}
	}
	w.issuedAt, w.receivedAt, w.framedAt = make([]int64, len(w.users)), make([]int64, len(w.users)), make([]int64, len(w.users))

	deliveries, closeAMQP, err := subscribe(c)
	if err != nil {
		return err
	}
	defer closeAMQP()
	consumed := make(chan struct{})
	go func() { defer close(consumed); w.consume(deliveries, c.queue) }()

	streamCtx, endStreams := context.WithCancel(ctx)
	defer endStreams()
	if err := w.openStreams(streamCtx, c); err != nil {
		return err
	}
	log.Printf("ready: %d streams open, listening on %s", len(w.users), c.exchange)

	select {
	case <-w.first:
	case <-consumed:
		return errors.New("the broker closed the subscription before any token")
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.setupTimeout):
		log.Printf("no token of queue %s within %v", c.queue, c.setupTimeout)
	}
	w.mu.Lock()
	var start int64
	if len(w.tokens) > 0 {
		start = w.tokens[0].occurred + c.settle.Nanoseconds()
	}
	w.mu.Unlock()
	end := start + c.window.Nanoseconds()
	if start > 0 {
		select {
		case <-time.After(time.Until(time.Unix(0, end)) + c.grace):
		case <-ctx.Done(): // report what there is
		}
	}
	w.mu.Lock()
	w.frozen = true
	w.mu.Unlock()
	for deadline := time.Now().Add(c.grace); time.Now().Before(deadline) && w.framesMissing() > 0 && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
	}
	endStreams()
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Println(w.report(c, start, end))
	return nil
}

// framesMissing counts the streams whose user's token arrived but whose
// "admitted" frame did not.
func (w *watch) framesMissing() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for i := range w.users {
		if w.issuedAt[i] != 0 && w.framedAt[i] == 0 {
			n++
		}
	}
	return n
}

// subscribe declares an exclusive server-named queue bound to both token
// event keys and consumes it with automatic acks, so deliveries come in the
// queue's order on one goroutine.
func subscribe(c config) (<-chan amqp.Delivery, func(), error) {
	conn, err := amqp.Dial(c.amqpURL)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: %w", err)
	}
	fail := func(err error) (<-chan amqp.Delivery, func(), error) {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("broker: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	// As pkg/broker declares it; the same arguments make this a no-op when
	// the services already did.
	if err := ch.ExchangeDeclare(c.exchange, amqp.ExchangeTopic, true, false, false, false,
		amqp.Table{"alternate-exchange": c.exchange + broker.UnroutedSuffix}); err != nil {
		return fail(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fail(err)
	}
	for _, key := range []string{events.RoutingKeyTokenIssued, events.RoutingKeyTokensIssued} {
		if err := ch.QueueBind(q.Name, key, c.exchange, false, nil); err != nil {
			return fail(err)
		}
	}
	d, err := ch.Consume(q.Name, "admitwatch", true, true, false, false, nil)
	if err != nil {
		return fail(err)
	}
	return d, func() { _ = conn.Close() }, nil
}

// consume records every token of queue, in delivery order and, within a
// TokensIssued, in the message's order.
func (w *watch) consume(deliveries <-chan amqp.Delivery, queue string) {
	for d := range deliveries {
		arrived := time.Now().UnixNano()
		m, err := events.Decode(d.Type, d.Body)
		if err != nil {
			log.Printf("delivery %q: %v", d.Type, err)
			continue
		}
		var tokens []*wrv1.TokenIssued
		switch m := m.(type) {
		case *wrv1.TokenIssued:
			tokens = []*wrv1.TokenIssued{m}
		case *wrv1.TokensIssued:
			tokens = m.GetTokens()
		}
		w.mu.Lock()
		w.messages++
		for _, t := range tokens {
			if t.GetQueueId() != queue {
				continue
			}
			occurred := t.GetOccurredAt().AsTime().UnixNano()
			if len(w.tokens) == 0 {
				close(w.first)
			}
			w.tokens = append(w.tokens, token{arrived: arrived, occurred: occurred, seq: t.GetSequence()})
			if i, ok := w.index[t.GetUserId()]; ok && !w.frozen && w.issuedAt[i] == 0 {
				w.issuedAt[i], w.receivedAt[i] = occurred, arrived
			}
		}
		w.mu.Unlock()
	}
}

// openStreams opens a stream for every user, at most 64 opening at once,
// and returns once each has had its first frame.
func (w *watch) openStreams(ctx context.Context, c config) error {
	if len(w.users) == 0 {
		return nil
	}
	ver, err := auth.NewVerifier(c.secret)
	if err != nil {
		return err
	}
	setup, cancel := context.WithTimeout(ctx, c.setupTimeout)
	defer cancel()
	opened := make(chan error, len(w.users))
	slots := make(chan struct{}, 64)
	for i, u := range w.users {
		jwt, err := ver.Mint(u, "", 2*time.Hour)
		if err != nil {
			return err
		}
		select {
		case slots <- struct{}{}:
		case <-setup.Done():
			return fmt.Errorf("opening streams: %w", setup.Err())
		}
		target := fmt.Sprintf("%s/api/v1/queues/%s/events?access_token=%s", strings.TrimRight(c.notify, "/"), url.PathEscape(c.queue), url.QueryEscape(jwt))
		go w.stream(ctx, i, target, func(err error) { <-slots; opened <- err })
	}
	for range w.users {
		select {
		case err := <-opened:
			if err != nil {
				return err
			}
		case <-setup.Done():
			return fmt.Errorf("opening streams: %w", setup.Err())
		}
	}
	return nil
}

// stream reads one SSE stream until its "admitted" frame or ctx's end;
// ready is called once, at the first frame or the failure to get one.
func (w *watch) stream(ctx context.Context, i int, target string, ready func(error)) {
	signalled := false
	once := func(err error) {
		if !signalled {
			signalled = true
			ready(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		once(err)
		return
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		once(fmt.Errorf("stream of %s: %w", w.users[i], err))
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		once(fmt.Errorf("stream of %s: %s: %s", w.users[i], res.Status, b))
		return
	}
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			once(fmt.Errorf("stream of %s ended before its first frame: %w", w.users[i], err))
			return
		}
		switch {
		case strings.HasPrefix(line, "event: admitted"):
			at := time.Now().UnixNano()
			w.mu.Lock()
			w.framedAt[i] = at
			w.mu.Unlock()
			once(nil)
			return
		case strings.HasPrefix(line, "event: "):
			once(nil)
		}
	}
}

// report is the machine-readable line; w.mu is held.
func (w *watch) report(c config, start, end int64) string {
	var (
		inWindow   int
		amqpLat    []int64
		inversions int
		duplicates int
		highest    uint64
		ticks      int // distinct occurred_at in the window: admission ticks
		lastTick   int64
		seen       = make(map[uint64]struct{}, len(w.tokens))
	)
	ordered := slices.Clone(w.tokens)
	slices.SortStableFunc(ordered, func(a, b token) int { return cmp.Compare(a.occurred, b.occurred) })
	for _, t := range ordered {
		if _, dup := seen[t.seq]; dup {
			duplicates++
			continue
		}
		seen[t.seq] = struct{}{}
		if t.seq < highest {
			inversions++
		}
		highest = max(highest, t.seq)
		if t.occurred >= start && t.occurred < end {
			inWindow++
			amqpLat = append(amqpLat, t.arrived-t.occurred)
			if t.occurred != lastTick {
				ticks++
				lastTick = t.occurred
			}
		}
	}
	var fanout, notify []int64
	admitted := 0
	for i := range w.users {
		if w.issuedAt[i] == 0 {
			continue
		}
		admitted++
		if w.framedAt[i] != 0 {
			fanout = append(fanout, w.framedAt[i]-w.issuedAt[i])
			notify = append(notify, w.framedAt[i]-w.receivedAt[i])
		}
	}
	slices.Sort(amqpLat)
	slices.Sort(fanout)
	slices.Sort(notify)
	windowS := c.window.Seconds()
	return fmt.Sprintf("admitwatch: queue=%s streams=%d window_s=%.3f tokens=%d rate_per_s=%.1f ticks=%d tokens_total=%d messages=%d "+
		"inversions=%d duplicates=%d amqp_p50_ms=%s amqp_p99_ms=%s "+
		"fanout_admitted=%d fanout_n=%d fanout_p50_ms=%s fanout_p99_ms=%s fanout_max_ms=%s notify_p50_ms=%s notify_p99_ms=%s",
		c.queue, len(w.users), windowS, inWindow, float64(inWindow)/windowS, ticks, len(w.tokens), w.messages,
		inversions, duplicates, pct(amqpLat, 0.50), pct(amqpLat, 0.99),
		admitted, len(fanout), pct(fanout, 0.50), pct(fanout, 0.99), pct(fanout, 1), pct(notify, 0.50), pct(notify, 0.99))
}

// pct is the nearest-rank percentile p of sorted nanoseconds, in
// milliseconds; "?" for none.
func pct(sorted []int64, p float64) string {
	if len(sorted) == 0 {
		return "?"
	}
	i := max(0, int(math.Ceil(p*float64(len(sorted))))-1)
	return fmt.Sprintf("%.1f", float64(sorted[i])/1e6)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
