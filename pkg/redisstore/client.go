// Package redisstore is the Redis adapter of the waiting room: the client built
// from REDIS_URL, the key layout, and the Lua scripts that make every state
// change of a queue one atomic operation.
//
// # Scripts
//
// Each script in lua/ runs with lua/prelude.lua in front of it (script, in
// scripts.go) and states its keys, arguments and rules in its header, with a
// "Called by" line. Below, for each: the Go caller here, the service and the
// port of its domain that the caller serves, and its rule in one line (in
// full: docs/DESIGN.md, "The atomic operations").
//
//   - check.lua: Store.CheckToken (orders.go); order-service, order.Tokens.
//     Read-only: sorts a presented secret as VALID, NOT_ACTIVE, SPENT or
//     INVALID before any limit is charged.
//   - close.lua: Store.Close (store.go); queue-gateway, app.Store. No new
//     entries, the line and the pre-queue dropped; issued tokens stay valid.
//   - consume.lua: Store.Consume (orders.go); order-service, order.Tokens.
//     Exactly one caller takes a token, into in-flight under a lease; a
//     repeat of the same order id answers OK, a copy past its deadline LATE.
//   - draw.lua: Store.StartDraw, Store.PlaceDrawn, Store.FinishDraw
//     (draw.go); admission-dispatcher, dispatch.TickStore. Announces,
//     places in the drawn order and finishes a closed pre-queue, each step
//     fenced by the epoch and safe to repeat.
//   - enter.lua: Store.EnterWithProof (store.go); queue-gateway, app.Store.
//     A place, the token already held, or why not; the cap holds under
//     concurrency, and a proof of work is used once.
//   - frontier.lua: Store.Frontiers (frontier.go), run by FrontierCache;
//     queue-gateway and notification-service, behind app.Frontiers and
//     stream.Frontiers. A queue's admission frontier and leaver bins in one
//     read; changes nothing.
//   - issue.lua: Store.IssueAll (batch.go); admission-dispatcher,
//     dispatch.TickStore. One tick: the head of the line gets tokens, slots
//     and TokenIssued events, all or nothing; a stale epoch, a repeated or a
//     late tick changes nothing.
//   - lease.lua: Store.AcquireLeases, Store.RenewLeases, Store.FollowLeases
//     (batch.go), Store.ReleaseLease (admission.go); admission-dispatcher,
//     dispatch.LeaseStore. Acquiring bumps the queue's epoch, the fencing
//     token every tick presents; the epoch never goes back.
//   - leave.lua: Store.Leave (store.go); queue-gateway, app.Store. Takes a
//     person out of the line or the pre-queue; a place left is counted for
//     the estimates and the frontier's bins.
//   - outbox_ack.lua: Store.AckOutboxes (outbox.go); admission-dispatcher,
//     dispatch.OutboxStore. Acknowledges and deletes published events of one
//     outbox together.
//   - outbox_group.lua: Store.EnsureOutboxGroup (outbox.go);
//     admission-dispatcher, dispatch.OutboxStore. Creates the relay's group
//     only while the queue exists, so a deleted queue's outbox never comes
//     back.
//   - overdue.lua: Store.Overdue (orders.go); order-service, order.Tokens.
//     The reaper's list of in-flight tokens past their lease, by Redis TIME;
//     read-only.
//   - position.lua: Store.Position (store.go), Store.PositionMany (many.go);
//     queue-gateway, app.Store, and notification-service, stream.Positions.
//     Where a person stands, as enter would say it; changes nothing.
//   - prelude.lua: script (scripts.go), in front of every other script.
//     The shared helpers; time comes from Redis TIME, never from the caller.
//   - restore.lua: Store.Restore (orders.go); admission-dispatcher,
//     restore.Store. A failed order's token goes back with its original
//     expiry, or its slot is freed; only that token and order's in-flight
//     marker is acted on.
//   - settle.lua: Store.Settle (orders.go); order-service, order.Tokens. A
//     committed order frees its slot and says ORDERED; a repeat settles
//     nothing.
//   - stats.lua: Store.Config (config.go); queue-gateway, app.Store, and
//     admission-dispatcher, dispatch.TickStore. A queue's knobs and live
//     figures; read-only.
//   - touch.lua: Store.OutboxReplicated (replicas.go); admission-dispatcher,
//     dispatch.OutboxStore. A write that changes nothing, so the WAIT after
//     it covers the events the relay read, once this node is seen to hold
//     them.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client timeouts, used unless the URL sets them. They are short on purpose:
// when Redis is gone the gateway answers 503 at once instead of holding
// thousands of requests open.
const (
	defaultDialTimeout  = 2 * time.Second
	defaultReadTimeout  = time.Second
	defaultWriteTimeout = time.Second
	// Two dial attempts 50 ms apart and one command retry: a dead Redis costs
	// a request about a fifth of a second, not the library's seconds.
	defaultDialerRetries      = 2
	defaultDialerRetryTimeout = 50 * time.Millisecond
	defaultMaxRetries         = 1
)

// NewClient builds a client from a URL:
//
//	redis://[user:pass@]host:6379/0         single node (rediss:// for TLS)
//	redis+sentinel://[user:pass@]h1:26379,h2:26379/master[/db]
//	redis+cluster://[user:pass@]h1:7000,h2:7001
//	h1:7000,h2:7001 or redis://h1:7000,redis://h2:7001   cluster seed list
//
// go-redis query options (dial_timeout=3s, pool_size=50, ...) pass through.
// All three kinds are returned as a redis.UniversalClient, so the rest of the
// code does not know which one it talks to.
func NewClient(rawURL string) (redis.UniversalClient, error) {
	raw := strings.TrimSpace(rawURL)
	if raw == "" {
		return nil, errors.New("redisstore: empty REDIS_URL")
	}
	switch {
	case strings.HasPrefix(raw, "redis+sentinel://"), strings.HasPrefix(raw, "rediss+sentinel://"):
		opt, err := parseSentinel(raw)
		if err != nil {
			return nil, err
		}
		defaults(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.DialerRetries, &opt.DialerRetryTimeout, &opt.MaxRetries)
		return redis.NewFailoverClient(opt), nil
	case strings.HasPrefix(raw, "redis+cluster://"), strings.HasPrefix(raw, "rediss+cluster://"), strings.Contains(raw, ","):
		opt, err := parseCluster(raw)
		if err != nil {
			return nil, err
		}
		defaults(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.DialerRetries, &opt.DialerRetryTimeout, &opt.MaxRetries)
		return redis.NewClusterClient(opt), nil
	default:
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redisstore: REDIS_URL: %w", err)
		}
		defaults(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.DialerRetries, &opt.DialerRetryTimeout, &opt.MaxRetries)
		return redis.NewClient(opt), nil
	}
}

func defaults(dial, read, write *time.Duration, dialRetries *int, dialRetryTimeout *time.Duration, maxRetries *int) {
	if *dialRetries == 0 {
		*dialRetries = defaultDialerRetries
	}
	if *dialRetryTimeout == 0 {
		*dialRetryTimeout = defaultDialerRetryTimeout
	}
	if *maxRetries == 0 {
		*maxRetries = defaultMaxRetries
	}
	if *dial == 0 {
		*dial = defaultDialTimeout
	}
	if *read == 0 {
		*read = defaultReadTimeout
	}
	if *write == 0 {
		*write = defaultWriteTimeout
	}
}

// multiHost is a URL whose host part is a comma separated list, which net/url
// cannot parse.
type multiHost struct {
	tls      bool
	userinfo string
	hosts    []string
	path     []string
	query    string
}

func splitMultiHost(raw string) (multiHost, error) {
	var m multiHost
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "redis", raw
	}
	m.tls = strings.HasPrefix(scheme, "rediss")
	// Seed lists may repeat the scheme on every element.
	rest = strings.NewReplacer(",rediss://", ",", ",redis://", ",").Replace(rest)
	rest, m.query, _ = strings.Cut(rest, "?")
	hostPart, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(hostPart, "@"); i >= 0 {
		m.userinfo, hostPart = hostPart[:i], hostPart[i+1:]
	}
	for _, h := range strings.Split(hostPart, ",") {
		if h = strings.TrimSpace(h); h != "" {
			m.hosts = append(m.hosts, h)
		}
	}
	if len(m.hosts) == 0 {
		return m, fmt.Errorf("redisstore: REDIS_URL names no host")
	}
	for _, p := range strings.Split(path, "/") {
		if p != "" {
			m.path = append(m.path, p)
		}
	}
	return m, nil
}

// single rewrites m as the one-host URL go-redis parses, the other hosts as
// addr= parameters.
func (m multiHost) single(path string, extra url.Values) (string, error) {
	q, err := url.ParseQuery(m.query)
	if err != nil {
		return "", fmt.Errorf("redisstore: REDIS_URL query: %w", err)
	}
	for k, vs := range extra {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	for _, h := range m.hosts[1:] {
		q.Add("addr", h)
	}
	scheme := "redis"
	if m.tls {
		scheme = "rediss"
	}
	s := scheme + "://"
	if m.userinfo != "" {
		s += m.userinfo + "@"
	}
	s += m.hosts[0] + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s, nil
}

func parseCluster(raw string) (*redis.ClusterOptions, error) {
	m, err := splitMultiHost(raw)
	if err != nil {
		return nil, err
	}
	if len(m.path) > 0 && m.path[0] != "0" {
		return nil, errors.New("redisstore: Redis Cluster has only database 0")
	}
	s, err := m.single("", nil)
	if err != nil {
		return nil, err
	}
	opt, err := redis.ParseClusterURL(s)
	if err != nil {
		return nil, fmt.Errorf("redisstore: REDIS_URL: %w", err)
	}
	return opt, nil
}

func parseSentinel(raw string) (*redis.FailoverOptions, error) {
	m, err := splitMultiHost(raw)
	if err != nil {
		return nil, err
	}
	if len(m.path) == 0 || len(m.path) > 2 {
		return nil, errors.New("redisstore: sentinel REDIS_URL needs /<master name>[/<db>]")
	}
	path := ""
	if len(m.path) == 2 {
		path = "/" + m.path[1]
	}
	s, err := m.single(path, url.Values{"master_name": {m.path[0]}})
	if err != nil {
		return nil, err
	}
	opt, err := redis.ParseFailoverURL(s)
	if err != nil {
		return nil, fmt.Errorf("redisstore: REDIS_URL: %w", err)
	}
	return opt, nil
}

// slogPrinter routes go-redis's internal log lines (one per failed dial while
// Redis is down) to a structured logger at debug level, so an outage does not
// flood the log; the HTTP edge logs the outage once per request at warn.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	p.log.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// SetLogger sends go-redis's own log lines to log (process-wide).
func SetLogger(log *slog.Logger) { redis.SetLogger(slogPrinter{log: log}) }

// Connect is how a service starts on Redis: the client for url (see
// NewClient), a Store over it, and the service's scripts preloaded, so each
// first call is an EVALSHA. A Redis that does not answer yet is not an
// error: that is logged, and the scripts are sent with EVAL on first use.
// The caller closes the client.
func Connect(ctx context.Context, url string, log *slog.Logger, scripts ...*redis.Script) (redis.UniversalClient, *Store, error) {
	rdb, err := NewClient(url)
	if err != nil {
		return nil, nil, err
	}
	store, err := NewStore(rdb)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	if err := LoadScripts(ctx, rdb, scripts...); err != nil {
		log.Warn("could not preload Lua scripts; Redis may be down, will retry on use", "err", err)
	}
	if err := store.SyncClock(ctx); err != nil {
		log.Warn("could not read Redis's clock; requests carry no deadline until a reading succeeds (retried on use)", "err", err)
	}
	return rdb, store, nil
}
