package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// A Redis Cluster slot migration moves a queue's keys one MIGRATE at a time.
// While the slot is MIGRATING, a script on the source node fails at the
// first key it touches that the node does not hold, and Redis keeps every
// write the script made before that. issue.lua once popped the head of the
// line and then wrote per-user keys, so people left the line with no token.
// These tests move a queue's slot between the two masters of a private
// cluster, under a running dispatcher and under single Issue calls, and
// count the line all along.

// clusterNodes is a private Redis Cluster of a few masters and a Store over
// it, built the way a dispatcher with REDIS_URL=redis+cluster://a,b,...
// builds it.
type clusterNodes struct {
	rdb   *redis.ClusterClient
	store *redisstore.Store
}

func startTwoNodes(t *testing.T) *clusterNodes { return startNodes(t, 2) }

// startNodes starts a private cluster of n masters (see
// testenv.StartRedisClusterNodes) with every service's scripts loaded.
func startNodes(t *testing.T, n int) *clusterNodes {
	t.Helper()
	addrs := testenv.StartRedisClusterNodes(t, n)
	scripts := append(append(append([]*redis.Script{}, redisstore.DispatcherScripts...),
		redisstore.GatewayScripts...), redisstore.OrderScripts...)
	rdb, store, err := redisstore.Connect(context.Background(), "redis+cluster://"+strings.Join(addrs, ","),
		slog.New(slog.NewTextHandler(io.Discard, nil)), scripts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("redis+cluster:// gave a %T, want a cluster client", rdb)
	}
	return &clusterNodes{rdb: cc, store: store}
}

// perUserKeys is the per-user keys (token, status, consumed) among keys.
func perUserKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		if strings.Contains(k, "}:token:") || strings.Contains(k, "}:status:") || strings.Contains(k, "}:consumed:") {
			out = append(out, k)
		}
	}
	return out
}

// tickLog is the dispatcher's Store with every tick recorded against
// the migration phase it ran in.
type tickLog struct {
	*redisstore.Store
	mu    sync.Mutex
	phase string
	calls []issueCall
}

type issueCall struct {
	phase  string
	issued int
	err    error
}

func (l *tickLog) IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply {
	phase := l.current()
	replies := l.Store.IssueAll(ctx, calls)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.phase != phase { // ran across a change: belongs to neither phase
		phase = phase + " -> " + l.phase
	}
	for _, r := range replies {
		l.calls = append(l.calls, issueCall{phase: phase, issued: r.Issued, err: r.Err})
	}
	return replies
}

func (l *tickLog) current() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase
}

func (l *tickLog) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

// in sums the calls that ran wholly inside phase.
func (l *tickLog) in(phase string) (ok, failed, issued int, errs map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs = map[string]int{}
	for _, c := range l.calls {
		if c.phase != phase {
			continue
		}
		if c.err != nil {
			failed++
			errs[errKind(c.err)]++
			continue
		}
		ok++
		issued += c.issued
	}
	return ok, failed, issued, errs
}

// matchingErrs counts the errors of kind want ("": none).
func matchingErrs(errs map[string]int, want string) int {
	n := 0
	for kind, cnt := range errs {
		if want != "" && strings.Contains(kind, want) {
			n += cnt
		}
	}
	return n
}

var (
	scriptSHA = regexp.MustCompile(`[0-9a-f]{40}`)
	opPrefix  = regexp.MustCompile(`^issue \S+: `)
)

// errKind is an error without its queue id and script hash, to count alike
// errors together.
func errKind(err error) string {
	return scriptSHA.ReplaceAllString(opPrefix.ReplaceAllString(err.Error(), ""), "<sha>")
}

// lineWatch samples the line while it moves. A sample reads the dispatch
// hash's tick id, the line, issuedTotal, the slots and the tick id again,
// one key at a time (the keys may sit on different nodes mid-migration);
// when the tick id did not change, no tick completed between the reads, so
// waiting + issuedTotal must be exactly the people who entered. A tick that
// popped people and then failed would not change the tick id, and would
// show as a shortfall. It also checks, for every TokenIssued event as it is
// published, that the user holds that token and its status marker.
type lineWatch struct {
	rdb      redis.UniversalClient
	k        redisstore.Keys
	n        int64
	pub      *recorder
	ordering string // the user whose order is in flight, if any
	phase    func() string

	mu       sync.Mutex
	valid    map[string]int
	moving   int // samples a completed tick ran through: not comparable
	readErrs map[string]int
	bad      []string // the first ten findings
	nBad     int
	checked  int
}

// fail records a finding.
func (w *lineWatch) fail(msg string) {
	if w.nBad++; w.nBad <= 10 {
		w.bad = append(w.bad, msg)
	}
}

func (w *lineWatch) run(ctx context.Context) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.sample(ctx)
	}
}

func (w *lineWatch) sample(ctx context.Context) {
	phase := w.phase()
	before, e0 := w.rdb.HGet(ctx, w.k.Dispatch(), "tickId").Result()
	waiting, e1 := w.rdb.ZCard(ctx, w.k.Waiting()).Result()
	issued, e2 := w.rdb.HGet(ctx, w.k.Dispatch(), redisstore.DispatchFieldIssuedTotal).Int64()
	active, e3 := w.rdb.ZCard(ctx, w.k.Active()).Result()
	after, e4 := w.rdb.HGet(ctx, w.k.Dispatch(), "tickId").Result()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range []error{e0, e1, e2, e3, e4} {
		if err != nil {
			if ctx.Err() == nil {
				w.readErrs[errKind(err)]++
			}
			return
		}
	}
	if before != after {
		w.moving++
		return
	}
	if waiting+issued != w.n {
		w.fail(fmt.Sprintf("%s: waiting %d + issued %d = %d, %d entered", phase, waiting, issued, waiting+issued, w.n))
	}
	// No token expires in this test and the order in flight keeps its
	// slot, so every issued token holds one slot.
	if active != issued {
		w.fail(fmt.Sprintf("%s: %d slots held, %d tokens issued", phase, active, issued))
	}
	if phase == w.phase() {
		w.valid[phase]++
	}
	for _, e := range w.pub.of(queue.EventTokenIssued)[w.checked:] {
		msg := holdsToken(ctx, w.rdb, w.k, e, w.ordering)
		if ctx.Err() != nil {
			return // stopping; the end state is checked in full
		}
		if msg != "" {
			w.fail(phase + ": " + msg)
		}
		w.checked++
	}
}

// holdsToken says what is wrong with e's user's token and marker, if
// anything: the user's marker must hold token e.TokenID (TOKEN_ISSUED), or,
// for the user whose order is in flight, be the ORDERING marker.
func holdsToken(ctx context.Context, rdb redis.UniversalClient, k redisstore.Keys, e queue.Event, ordering string) string {
	status, err := rdb.Get(ctx, k.Status(e.UserID)).Result()
	if err != nil {
		return fmt.Sprintf("user %s (token %s): status marker: %v", e.UserID, e.TokenID, err)
	}
	if e.UserID == ordering {
		if !strings.HasPrefix(status, redisstore.StatusOrdering+":"+e.TokenID+":") {
			return fmt.Sprintf("user %s with an order in flight: marker %q", e.UserID, status)
		}
		return ""
	}
	if tok, _, ok := redisstore.ParseTokenMarker(status); !ok || tok.ID != e.TokenID {
		return fmt.Sprintf("user %s: marker %q, issued token %s", e.UserID, status, e.TokenID)
	}
	return ""
}

// distinctIssued is the TokenIssued events, one per user (the relay
// publishes at least once), failing on a user issued two different tokens.
func distinctIssued(t *testing.T, events []queue.Event) map[string]queue.Event {
	t.Helper()
	out := map[string]queue.Event{}
	for _, e := range events {
		if prev, ok := out[e.UserID]; ok && prev.TokenID != e.TokenID {
			t.Errorf("user %s issued two tokens: %s and %s", e.UserID, prev.TokenID, e.TokenID)
		}
		out[e.UserID] = e
	}
	return out
}

// migrationPhase is one step of the migration under a running dispatcher.
type migrationPhase struct {
	name string
	act  func()
	// wantErr is the error every failed tick of the phase carries; admits
	// says whether ticks succeed in it instead.
	wantErr string
	admits  bool
}

const (
	errNonLocal = "non local key"
	errTryAgain = "TRYAGAIN"
)

func TestSlotMigrationUnderARunningDispatcherLosesNobody(t *testing.T) {
	t.Parallel()
	tn := startTwoNodes(t)
	// The issue script runs on the migrating source only when all eight
	// keys it declares exist there, and the in-flight set exists only
	// while an order is in flight. With one, the script starts and must
	// stop at its first per-user read; without, Redis refuses the call
	// before it starts (ASK, then TRYAGAIN on the target).
	cases := []struct {
		name          string
		orderInFlight bool
		want          map[string]migrationPhase // expectations per phase name
	}{
		{
			name:          "order in flight: the script starts on the source",
			orderInFlight: true,
			want: map[string]migrationPhase{
				"migrating":           {wantErr: errNonLocal},
				"per-user keys moved": {wantErr: errNonLocal},
				"queue keys split":    {wantErr: errTryAgain},
				// Every declared key exists on the target: the script runs
				// there (ASKING) and admission goes on before the slot is
				// handed over.
				"all keys moved": {admits: true},
			},
		},
		{
			name: "no order in flight: Redis refuses the script",
			want: map[string]migrationPhase{
				"migrating":           {wantErr: errTryAgain},
				"per-user keys moved": {wantErr: errTryAgain},
				"queue keys split":    {wantErr: errTryAgain},
				"all keys moved":      {wantErr: errTryAgain},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			migrateUnderLoad(t, tn, tc.orderInFlight, tc.want)
		})
	}
}

func migrateUnderLoad(t *testing.T, tn *clusterNodes, orderInFlight bool, want map[string]migrationPhase) {
	const (
		n    = 300
		rate = 50.0
		tick = 100 * time.Millisecond
	)
	ctx := context.Background()
	c := &cluster{t: t, rdb: tn.rdb, store: tn.store, pub: &recorder{}}
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionRatePerSec, cfg.MaxQueueSize, cfg.TokenTTLSeconds, cfg.ActivationSpreadMs = rate, 10_000, 300, 0
	})
	c.pub.queue = q
	k := redisstore.KeysFor(q)
	c.fill(q, n)
	tl := &tickLog{Store: tn.store, phase: "before"}
	stopDispatcher := runLoggedDispatcher(t, tl, c.pub, dispatch.Options{Owner: testenv.ID(t), Queues: []string{q}, Tick: tick})

	testenv.WaitFor(t, 20*time.Second, "25 people admitted before the migration", func() bool {
		return len(distinctIssued(t, c.pub.of(queue.EventTokenIssued))) >= 25
	})
	ordering := ""
	if orderInFlight {
		ordering = c.pub.of(queue.EventTokenIssued)[0].UserID
		placeOrder(t, tn, q, ordering)
	}
	wantInflight := map[bool]int64{true: 1, false: 0}[orderInFlight]
	if got := tn.rdb.Exists(ctx, k.Inflight()).Val(); got != wantInflight {
		t.Fatalf("in-flight set exists: %d, want %d", got, wantInflight)
	}

	watch, stopWatch := startLineWatch(t, tn.rdb, k, n, c.pub, ordering, tl.current)
	m := testenv.NewSlotMove(t, tn.rdb, k.Config())
	phases := []migrationPhase{
		{name: "migrating", act: m.Begin},
		{name: "per-user keys moved", act: func() {
			// Every other per-user key: some users' token and marker
			// are on the target, some on the source.
			var half []string
			for i, key := range perUserKeys(m.Keys()) {
				if i%2 == 0 {
					half = append(half, key)
				}
			}
			m.Move(half...)
		}},
		// The line and the slots on the target; config, dispatch, lease,
		// outbox and in-flight set still on the source.
		{name: "queue keys split", act: func() { m.Move(k.Waiting(), k.Active(), k.Seq()) }},
		{name: "all keys moved", act: m.MoveAll},
	}
	for _, p := range phases {
		w := want[p.name]
		w.name, w.act = p.name, p.act
		runPhase(t, tl, watch, w)
	}

	tl.setPhase("-> after")
	m.End()
	endAt := time.Now()
	tl.setPhase("after")
	testenv.WaitFor(t, 30*time.Second, "the whole line admitted and every TokenIssued published", func() bool {
		return tn.rdb.ZCard(ctx, k.Waiting()).Val() == 0 && len(distinctIssued(t, c.pub.of(queue.EventTokenIssued))) == n
	})
	stopDispatcher()
	stopWatch()

	admitted := checkEveryoneAdmitted(t, tn.rdb, k, c.pub.of(queue.EventTokenIssued), n, ordering)
	checkRateAfter(t, admitted, endAt, rate, tick)
}

// runLoggedDispatcher runs a dispatcher on store until the returned stop
// (also called at cleanup).
func runLoggedDispatcher(t *testing.T, store dispatch.Store, pub dispatch.Publisher, o dispatch.Options) (stop func()) {
	t.Helper()
	d, err := dispatch.New(store, pub, slog.New(slog.NewTextHandler(debugOut(), nil)), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dispatcher: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// placeOrder consumes user's token: an order is in flight, so the queue's
// in-flight set exists.
func placeOrder(t *testing.T, tn *clusterNodes, q, user string) {
	t.Helper()
	ctx := context.Background()
	tok, _, ok := redisstore.ParseTokenMarker(tn.rdb.Get(ctx, redisstore.KeysFor(q).Status(user)).Val())
	if !ok {
		t.Fatalf("%s holds no token", user)
	}
	secret := tok.Secret
	if _, err := tn.store.Consume(ctx, q, user, secret, "order-1", 10*time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// startLineWatch samples the line until the returned stop (also called at
// cleanup), which reports what the samples found.
func startLineWatch(t *testing.T, rdb redis.UniversalClient, k redisstore.Keys, n int64, pub *recorder, ordering string, phase func() string) (*lineWatch, func()) {
	w := &lineWatch{rdb: rdb, k: k, n: n, pub: pub, ordering: ordering, phase: phase,
		valid: map[string]int{}, readErrs: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			t.Logf("line samples: %v comparable, %d skipped (a tick completed between the reads), read errors %v",
				w.valid, w.moving, w.readErrs)
			for _, b := range w.bad {
				t.Error(b)
			}
			if w.nBad > len(w.bad) {
				t.Errorf("... %d findings in all", w.nBad)
			}
		})
	}
	t.Cleanup(stop)
	return w, stop
}

func (w *lineWatch) samples(phase string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.valid[phase]
}

// runPhase takes one migration step and watches the ticks and the line
// until five ticks showed what the step does to admission.
func runPhase(t *testing.T, tl *tickLog, watch *lineWatch, p migrationPhase) {
	t.Helper()
	tl.setPhase("-> " + p.name)
	p.act()
	tl.setPhase(p.name)
	testenv.WaitFor(t, 20*time.Second, p.name+": five ticks and ten line samples", func() bool {
		ok, _, issued, errs := tl.in(p.name)
		ticked := matchingErrs(errs, p.wantErr) >= 5
		if p.admits {
			ticked = ok >= 5 && issued > 0
		}
		return ticked && watch.samples(p.name) >= 10
	})
	ok, failed, issued, errs := tl.in(p.name)
	t.Logf("%s: %d ticks failed, %d succeeded admitting %d, %d line samples; errors %v",
		p.name, failed, ok, issued, watch.samples(p.name), errs)
	if !p.admits && issued != 0 {
		t.Errorf("%s: ticks admitted %d people, want none while the slot is split", p.name, issued)
	}
	// Every failed tick failed the expected way, or was Redis being slow
	// (a timeout on this shared machine): nothing else.
	for kind, cnt := range errs {
		if (p.wantErr == "" || !strings.Contains(kind, p.wantErr)) && !strings.Contains(kind, queue.ErrUnavailable.Error()) {
			t.Errorf("%s: %d ticks failed with %q", p.name, cnt, kind)
		}
	}
}

// checkEveryoneAdmitted checks the end state: all n admitted exactly once,
// in entry order, each holding a token and a marker, counted the same in
// the line, issuedTotal, the events, the markers and the slots. It returns
// the admissions by sequence.
func checkEveryoneAdmitted(t *testing.T, rdb redis.UniversalClient, k redisstore.Keys, events []queue.Event, n int64, ordering string) []queue.Event {
	t.Helper()
	ctx := context.Background()
	byUser := distinctIssued(t, events)
	total, err := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldIssuedTotal).Int64()
	if err != nil {
		t.Fatal(err)
	}
	waiting := rdb.ZCard(ctx, k.Waiting()).Val()
	active := rdb.ZCard(ctx, k.Active()).Val()
	issuedMarkers, orderingMarkers := 0, 0
	for i := range int(n) {
		u := userName(i)
		e, ok := byUser[u]
		switch {
		case !ok:
			t.Errorf("user %s lost: not waiting, no TokenIssued", u)
		case holdsToken(ctx, rdb, k, e, ordering) != "":
			t.Error(holdsToken(ctx, rdb, k, e, ordering))
		case u == ordering:
			orderingMarkers++
		default:
			issuedMarkers++
		}
	}
	markers := int64(issuedMarkers + orderingMarkers)
	t.Logf("end: waiting %d + issuedTotal %d = %d of %d; %d TokenIssued events for %d users; markers TOKEN_ISSUED %d + ORDERING %d; slots %d",
		waiting, total, waiting+total, n, len(events), len(byUser), issuedMarkers, orderingMarkers, active)
	if waiting != 0 || total != n || int64(len(byUser)) != n || markers != n || active != n {
		t.Errorf("want waiting 0 and %d everywhere: issuedTotal %d, users with TokenIssued %d, markers %d, slots %d",
			n, total, len(byUser), markers, active)
	}
	// By sequence, users come in entry order, and their ticks never go
	// back in (Redis) time.
	admitted := make([]queue.Event, 0, len(byUser))
	for _, e := range byUser {
		admitted = append(admitted, e)
	}
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].Seq < admitted[j].Seq })
	for i, e := range admitted {
		if seqOf(t, e) != int64(i) {
			t.Fatalf("admission %d went to %s, out of entry order", i, e.UserID)
		}
		if i > 0 && e.OccurredAt.Before(admitted[i-1].OccurredAt) {
			t.Fatalf("%s admitted at %v, before %s at %v", e.UserID, e.OccurredAt, admitted[i-1].UserID, admitted[i-1].OccurredAt)
		}
	}
	return admitted
}

// checkRateAfter checks that admission resumed at the rate once the slot
// was handed over at endAt. The first tick after it makes up for the ticks
// that failed (up to one second's worth); the rate is counted from it, on
// the Redis clock, over two seconds or until the tick that emptied the line.
func checkRateAfter(t *testing.T, admitted []queue.Event, endAt time.Time, rate float64, tick time.Duration) {
	t.Helper()
	times, counts := ticks(admitted)
	var after []time.Time
	for _, tm := range times {
		if tm.After(endAt) {
			after = append(after, tm)
		}
	}
	if len(after) < 3 {
		t.Fatalf("%d ticks admitted after the migration ended", len(after))
	}
	t0, t1, got := after[0], after[0], 0
	for _, tm := range after[1 : len(after)-1] {
		if tm.Sub(t0) > 2*time.Second {
			break
		}
		t1, got = tm, got+counts[tm]
	}
	span := t1.Sub(t0)
	if span < time.Second {
		t.Fatalf("only %v of admissions after the migration to measure", span)
	}
	want := rate * span.Seconds()
	// The catch-up tick may leave up to one tick's batch of credit, which
	// the next ticks spend on top of the rate.
	slack := float64(queue.BatchCap(rate, tick))
	t.Logf("after the migration: first tick admitted %d (a catch-up if ticks had failed); then %d in %v on the Redis clock = %.1f/s (%.1f expected)",
		counts[t0], got, span, float64(got)/span.Seconds(), want)
	if float64(got) < want-3 || float64(got) > want+slack+3 {
		t.Errorf("admitted %d in %v after the migration, want %.1f (-3, +%.0f)", got, span, want, slack+3)
	}
}

// issueScriptLines is the issue script as Redis numbers its lines: the
// prelude, a newline, the script.
func issueScriptLines(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(testenv.Root(), "pkg", "redisstore", "lua")
	prelude, err := os.ReadFile(filepath.Join(dir, "prelude.lua"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join(dir, "issue.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(prelude)+"\n"+string(body), "\n")
}

var scriptLine = regexp.MustCompile(`@user_script:(\d+)`)

// issueSnapshot is everything of a queue an Issue call writes, to compare.
type issueSnapshot struct {
	waiting, active, inflight, outbox int64
	dispatch                          map[string]string
}

func takeSnapshot(t *testing.T, rdb redis.UniversalClient, k redisstore.Keys) issueSnapshot {
	t.Helper()
	ctx := context.Background()
	var s issueSnapshot
	var errs [5]error
	s.waiting, errs[0] = rdb.ZCard(ctx, k.Waiting()).Result()
	s.active, errs[1] = rdb.ZCard(ctx, k.Active()).Result()
	s.inflight, errs[2] = rdb.ZCard(ctx, k.Inflight()).Result()
	s.outbox, errs[3] = rdb.XLen(ctx, k.Outbox()).Result()
	s.dispatch, errs[4] = rdb.HGetAll(ctx, k.Dispatch()).Result()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s issueSnapshot) String() string {
	return fmt.Sprintf("waiting %d, slots %d, in flight %d, outbox %d, tick %s, issuedTotal %s, credit %s",
		s.waiting, s.active, s.inflight, s.outbox, s.dispatch["tickId"], s.dispatch["issuedTotal"], s.dispatch["credit"])
}

func TestIssueOnAMigratingSlotWritesNothing(t *testing.T) {
	t.Parallel()
	tn := startTwoNodes(t)
	lines := issueScriptLines(t)
	const (
		n    = 40
		rate = 100.0
		tick = 100 * time.Millisecond
	)
	cases := []struct {
		name string
		// expire: the five tokens issued before the migration run out
		// first, so the tick has slots to prune.
		expire bool
		// move picks the keys moved to the target before the call, from
		// the keys of the five users who hold tokens.
		move func(k redisstore.Keys, holders []string) []string
		// The call fails with wantErr (always queue.ErrUnavailable); a
		// non-local key stops the script at the line holding wantLine (a
		// read).
		wantErr  string
		wantLine string
	}{
		{
			name: "holders' keys moved, the head of the line has no marker here",
			move: func(k redisstore.Keys, holders []string) []string {
				var ks []string
				for _, u := range holders {
					ks = append(ks, k.Status(u))
				}
				return ks
			},
			wantErr: errNonLocal, wantLine: "redis.call('EXISTS', status_prefix .. heads[i])",
		},
		{
			name:   "expired slots' markers moved",
			expire: true,
			move: func(k redisstore.Keys, holders []string) []string {
				var ks []string
				for _, u := range holders {
					ks = append(ks, k.Status(u))
				}
				return ks
			},
			wantErr: errNonLocal, wantLine: "markers[i] = redis.call('GET', status_prefix .. user)",
		},
		{
			name:    "line and slots moved, the other queue keys not",
			move:    func(k redisstore.Keys, _ []string) []string { return []string{k.Waiting(), k.Active()} },
			wantErr: errTryAgain,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := &cluster{t: t, rdb: tn.rdb, store: tn.store, pub: &recorder{}}
			q := c.newQueue(func(cfg *queue.Config) {
				cfg.AdmissionRatePerSec, cfg.TokenTTLSeconds, cfg.ActivationSpreadMs = rate, 300, 0
			})
			k := redisstore.KeysFor(q)
			c.fill(q, n)
			l := leadByHand(t, tn.store, q, tick)
			// u000000 orders: the in-flight set exists, so all eight keys
			// the script declares are on the source and the script runs
			// there.
			l.admit(1)
			placeOrder(t, tn, q, userName(0))
			if tc.expire {
				if _, _, err := tn.store.UpdateConfig(ctx, q, func(cfg queue.Config, _ bool) (queue.Config, error) {
					cfg.TokenTTLSeconds = 1
					return cfg, nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			l.admit(6)
			holders := []string{userName(1), userName(2), userName(3), userName(4), userName(5)}
			if tc.expire {
				testenv.WaitFor(t, 10*time.Second, "five slots expired by the Redis clock", func() bool {
					now, err := tn.rdb.Time(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					return tn.rdb.ZCount(ctx, k.Active(), "-inf", strconv.FormatInt(now.UnixMilli(), 10)).Val() == 5
				})
			}

			m := testenv.NewSlotMove(t, tn.rdb, k.Config())
			m.Begin()
			m.Move(tc.move(k, holders)...)
			// The tick must have credit to admit someone, or it reads no
			// head of the line: at 100/s, 50 ms since admit's last tick
			// give five, whatever the time the move took (a fast move left
			// less than one and the tick ran on without touching a key).
			time.Sleep(50 * time.Millisecond)
			before := takeSnapshot(t, tn.rdb, k)
			_, err := l.tick(20)
			after := takeSnapshot(t, tn.rdb, k)
			t.Logf("issue while migrating: %v\nbefore: %v\nafter:  %v", err, before, after)
			if err == nil {
				t.Fatal("issue succeeded on a split slot")
			}
			// Both a redirection Redis keeps answering and a script stopped
			// on a non-local key (before any write) are "unavailable, retry
			// the tick".
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("errors.Is(%v, ErrUnavailable) = false, want true", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if tc.wantLine != "" {
				checkStoppedAt(t, err, lines, tc.wantLine)
			}
			if before.String() != after.String() || !maps.Equal(before.dispatch, after.dispatch) {
				t.Errorf("the failed call wrote:\nbefore %v\nafter  %v", before, after)
			}

			// Finish the move: the next tick runs, prunes what expired
			// (the markers it could not read before say so now), admits.
			m.MoveAll()
			m.End()
			var res queue.IssueResult
			testenv.WaitFor(t, 10*time.Second, "a tick after the migration", func() bool {
				res, err = l.tick(20)
				return err == nil && res.Issued > 0
			})
			end := takeSnapshot(t, tn.rdb, k)
			total, _ := strconv.ParseInt(end.dispatch[redisstore.DispatchFieldIssuedTotal], 10, 64)
			t.Logf("after the migration: %+v; %v", res, end)
			if end.waiting+total != n || total != int64(6+res.Issued) {
				t.Errorf("waiting %d + issuedTotal %d, want %d with %d issued", end.waiting, total, n, 6+res.Issued)
			}
			wantExpired, wantMarker := 0, redisstore.StatusTokenIssued+":"
			if tc.expire {
				wantExpired, wantMarker = 5, redisstore.StatusExpired+":"
			}
			if res.Expired != wantExpired {
				t.Errorf("first tick after the migration expired %d slots, want %d", res.Expired, wantExpired)
			}
			for _, u := range holders {
				if st := tn.rdb.Get(ctx, k.Status(u)).Val(); !strings.HasPrefix(st, wantMarker) {
					t.Errorf("user %s: marker %q, want %s...", u, st, wantMarker)
				}
			}
		})
	}

	// The premise, shown on the same kind of split slot: Redis keeps what a
	// script wrote before it touched a key the node does not hold. A
	// script that pops first (as issue.lua did) loses the person it
	// popped; the checks above would catch that.
	t.Run("control: a script that pops before it reads loses a person", func(t *testing.T) {
		ctx := context.Background()
		c := &cluster{t: t, rdb: tn.rdb, store: tn.store, pub: &recorder{}}
		q := c.newQueue(nil)
		k := redisstore.KeysFor(q)
		c.fill(q, 10)
		m := testenv.NewSlotMove(t, tn.rdb, k.Config())
		m.Begin()
		popThenRead := redis.NewScript(`redis.call('ZPOPMIN', KEYS[1]) return redis.call('EXISTS', ARGV[1])`)
		err := popThenRead.Run(ctx, tn.rdb, []string{k.Waiting()}, k.Status("nobody")).Err()
		if err == nil || !strings.Contains(err.Error(), errNonLocal) {
			t.Fatalf("pop-then-read on a migrating slot: %v, want %q", err, errNonLocal)
		}
		if got := tn.rdb.ZCard(ctx, k.Waiting()).Val(); got != 9 {
			t.Fatalf("waiting %d after the failed script, want 9 (the pop kept)", got)
		}
		t.Logf("pop-then-read failed with %q and the line went from 10 to 9", errKind(err))
		m.MoveAll()
		m.End()
	})
}

// manualLeader drives Store.Issue by hand, holding the queue's lease.
type manualLeader struct {
	t        *testing.T
	store    *redisstore.Store
	q        string
	tickLen  time.Duration
	epoch    int64
	admitted int
}

func leadByHand(t *testing.T, store *redisstore.Store, q string, tick time.Duration) *manualLeader {
	t.Helper()
	epoch, err := store.AcquireLease(context.Background(), q, testenv.ID(t), time.Minute)
	if err != nil || epoch <= 0 {
		t.Fatalf("lease: %d, %v", epoch, err)
	}
	return &manualLeader{t: t, store: store, q: q, tickLen: tick, epoch: epoch}
}

// tick runs one tick with n grants.
func (l *manualLeader) tick(n int) (queue.IssueResult, error) {
	grants, err := queue.Grants(n)
	if err != nil {
		l.t.Fatal(err)
	}
	res, err := l.store.Issue(context.Background(), l.q, queue.IssueRequest{Epoch: l.epoch, Tick: l.tickLen, Grants: grants})
	l.admitted += res.Issued
	return res, err
}

// admit ticks until upTo people hold tokens (the credit grows with Redis
// time), never more.
func (l *manualLeader) admit(upTo int) {
	l.t.Helper()
	testenv.WaitFor(l.t, 10*time.Second, fmt.Sprintf("%d admitted", upTo), func() bool {
		if _, err := l.tick(upTo - l.admitted); err != nil {
			l.t.Fatalf("issue before the migration: %v", err)
		}
		return l.admitted == upTo
	})
}

// checkStoppedAt checks that err names the script line holding want.
func checkStoppedAt(t *testing.T, err error, lines []string, want string) {
	t.Helper()
	m := scriptLine.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %v names no script line", err)
	}
	i, _ := strconv.Atoi(m[1])
	if i < 1 || i > len(lines) || !strings.Contains(lines[i-1], want) {
		t.Errorf("the script stopped at line %d, want the read %q", i, want)
		return
	}
	t.Logf("stopped at script line %d: %s", i, strings.TrimSpace(lines[i-1]))
}
