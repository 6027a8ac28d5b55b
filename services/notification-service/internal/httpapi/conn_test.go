package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"syscall"
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

// rig is a stream server with the options a test picks, its metrics in
// reg. Its clients are bare connections, which run no goroutine.
type rig struct {
	*server
	addr string
	reg  *prometheus.Registry
}

func newRig(t *testing.T, buffer int, o stream.Options) *rig {
	t.Helper()
	return newRigOn(t, buffer, o, nil)
}

// newRigOn is newRig whose listener is wrap's (nil: the plain one).
func newRigOn(t *testing.T, buffer int, o stream.Options, wrap func(net.Listener) net.Listener) *rig {
	t.Helper()
	ver, err := auth.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	h := hub.New(buffer, 0)
	pos := &positions{admitted: map[string]*queue.Token{}}
	svc := stream.New(h, pos, log, wire.NewMetrics(reg, h), o)
	api, err := httpapi.New(httpapi.Options{Service: svc, Verifier: ver, Log: log, Registry: reg, Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	t.Cleanup(func() { h.CloseAll(); srv.Close(); _ = api.Close() })
	return &rig{server: &server{url: srv.URL, svc: svc, hub: h, ver: ver, pos: pos}, addr: srv.Listener.Addr().String(), reg: reg}
}

// bare is one client's stream over a bare connection.
type bare struct {
	conn net.Conn
	res  *http.Response
	body *bufio.Reader
}

// open sends user's stream request on a fresh connection (dialled with d,
// if given) and reads the answer's head.
func (r *rig) open(t *testing.T, q, user string, d *net.Dialer) *bare {
	t.Helper()
	if d == nil {
		d = &net.Dialer{}
	}
	conn, err := d.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /api/v1/queues/%s/events?access_token=%s HTTP/1.1\r\nHost: x\r\n\r\n", q, r.token(t, user))
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	if err != nil {
		t.Fatalf("stream of %s: %v", user, err)
	}
	return &bare{conn: conn, res: res, body: bufio.NewReaderSize(res.Body, 512)}
}

// next reads the stream's next event (heartbeats and the retry hint are
// skipped) within d.
func (b *bare) next(d time.Duration) (string, error) {
	_ = b.conn.SetReadDeadline(time.Now().Add(d))
	name := ""
	for {
		line, err := b.body.ReadString('\n')
		if err != nil {
			return "", err
		}
		switch line = strings.TrimSuffix(line, "\n"); {
		case strings.HasPrefix(line, "event: "):
			name = line[7:]
		case line == "" && name != "":
			return name, nil
		}
	}
}

// counter reads a waitingroom_sse counter by its one label's value.
func (r *rig) counter(t *testing.T, name, value string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// waitLen waits up to d for the hub to hold n streams.
func (r *rig) waitLen(t *testing.T, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for r.hub.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("hub holds %d streams after %v, want %d", r.hub.Len(), d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two hundred open streams add no goroutine once open (no handler, no
// background read, no writer waits on a stream), and each still gets its
// admission.
func TestOpenStreamsHoldNoGoroutine(t *testing.T) {
	r := newRig(t, 8, stream.Options{Heartbeat: time.Hour, PositionEvery: time.Hour, WriteTimeout: 2 * time.Second})
	first := r.open(t, "q1", "u-first", nil)
	if ev, err := first.next(5 * time.Second); first.res.StatusCode != http.StatusOK || ev != "position" || err != nil {
		t.Fatalf("first stream: %d, %q %v", first.res.StatusCode, ev, err)
	}
	time.Sleep(100 * time.Millisecond) // the opener and the server's connection goroutine end
	base := runtime.NumGoroutine()

	const n = 200
	streams := make([]*bare, n)
	for i := range n {
		streams[i] = r.open(t, "q1", fmt.Sprint("u", i), nil)
		if ev, err := streams[i].next(5 * time.Second); ev != "position" || err != nil {
			t.Fatalf("stream %d opened with %q %v, want position", i, ev, err)
		}
	}
	r.waitLen(t, n+1, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	if grown := runtime.NumGoroutine() - base; grown > 10 {
		t.Fatalf("%d goroutines more with %d streams open, want at most 10 (none a stream)", grown, n)
	}
	for i := range n {
		r.svc.Admitted("q1", fmt.Sprint("u", i), fmt.Sprint("tok-", i), time.Now(), time.Now().Add(time.Minute), time.Now())
	}
	for i, s := range streams {
		if ev, err := s.next(5 * time.Second); ev != "admitted" || err != nil {
			t.Fatalf("stream %d: %q %v, want admitted", i, ev, err)
		}
	}
	// A writer counts a frame after its write returns, which may be after
	// the client read it.
	deadline := time.Now().Add(2 * time.Second)
	for r.counter(t, "waitingroom_sse_events_delivered_total", "admitted") != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if d := r.counter(t, "waitingroom_sse_events_delivered_total", "admitted"); d != n {
		t.Fatalf("delivered{admitted} = %v, want %d", d, n)
	}
}

// With heartbeats an hour apart, nothing is written to a stream whose
// client left; the watcher lets it go at once anyway, uncounted as a drop.
func TestAClientThatLeavesIsLetGoWithoutAWrite(t *testing.T) {
	t.Parallel()
	r := newRig(t, 8, stream.Options{Heartbeat: time.Hour, PositionEvery: time.Hour, WriteTimeout: 2 * time.Second})
	const n = 20
	streams := make([]*bare, n)
	for i := range n {
		streams[i] = r.open(t, "q1", fmt.Sprint("u", i), nil)
		if ev, err := streams[i].next(5 * time.Second); ev != "position" || err != nil {
			t.Fatalf("stream %d opened with %q %v", i, ev, err)
		}
	}
	r.waitLen(t, n, 5*time.Second)
	left := time.Now()
	for i := 0; i < n; i += 2 {
		streams[i].conn.Close()
	}
	r.waitLen(t, n/2, 2*time.Second)
	t.Logf("%d clients left; their streams were let go within %v", n/2, time.Since(left).Round(time.Millisecond))
	for _, reason := range []string{"write", "slow"} {
		if d := r.counter(t, "waitingroom_sse_clients_dropped_total", reason); d != 0 {
			t.Errorf("dropped{%s} = %v, want 0", reason, d)
		}
	}
	// The others are open and served.
	for i := 1; i < n; i += 2 {
		r.svc.Admitted("q1", fmt.Sprint("u", i), fmt.Sprint("tok-", i), time.Now(), time.Now().Add(time.Minute), time.Now())
		if ev, err := streams[i].next(5 * time.Second); ev != "admitted" || err != nil {
			t.Fatalf("stream %d: %q %v, want admitted", i, ev, err)
		}
	}
}

// A client whose socket takes nothing is dropped once a write has waited
// SSE_WRITE_TIMEOUT, counted "write", while the writers serve the others
// in the meantime.
func TestAStuckClientIsDroppedAtTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	r := newRig(t, 64, stream.Options{Heartbeat: time.Hour, PositionEvery: time.Hour, WriteTimeout: timeout})
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		_ = c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return serr
	}}
	r.open(t, "q1", "stuck", d) // reads nothing after the head
	fast := r.open(t, "q1", "fast", nil)
	if ev, err := fast.next(5 * time.Second); ev != "position" || err != nil {
		t.Fatalf("fast stream opened with %q %v", ev, err)
	}
	r.waitLen(t, 2, 5*time.Second)

	// 40 events of 256 KB: more than the sockets hold (a loopback
	// socket's send buffer grows to 4 MB), fewer than the buffer of 64.
	big := strings.Repeat("x", 256<<10)
	flooded := time.Now()
	for i := range 40 {
		r.svc.Admitted("q1", "stuck", fmt.Sprint("tok-", i, big), time.Now(), time.Now(), time.Now())
	}
	sent := time.Now()
	r.svc.Admitted("q1", "fast", "tok-fast", time.Now(), time.Now().Add(time.Minute), time.Now())
	if ev, err := fast.next(time.Second); ev != "admitted" || err != nil {
		t.Fatalf("fast stream: %q %v, want admitted", ev, err)
	}
	lag := time.Since(sent)

	r.waitLen(t, 1, timeout+3*time.Second)
	took := time.Since(flooded)
	if took < timeout {
		t.Fatalf("the stuck stream was dropped after %v, before the write timeout of %v", took, timeout)
	}
	if w, s := r.counter(t, "waitingroom_sse_clients_dropped_total", "write"), r.counter(t, "waitingroom_sse_clients_dropped_total", "slow"); w != 1 || s != 0 {
		t.Fatalf("dropped write %v slow %v, want 1 and 0", w, s)
	}
	t.Logf("the fast stream's admission took %v; the stuck one was dropped %v after the flood", lag.Round(time.Millisecond), took.Round(time.Millisecond))
}

// Shut ends every taken-over stream at once (the server's Shutdown does
// not see them), and a stream asked for afterwards is refused with 503 and
// Retry-After, written on the taken-over connection.
func TestShutEndsTheStreams(t *testing.T) {
	t.Parallel()
	r := newRig(t, 8, stream.Options{Heartbeat: time.Hour, PositionEvery: time.Hour, WriteTimeout: 2 * time.Second})
	const n = 10
	streams := make([]*bare, n)
	for i := range n {
		streams[i] = r.open(t, "q1", fmt.Sprint("u", i), nil)
		if ev, err := streams[i].next(5 * time.Second); ev != "position" || err != nil {
			t.Fatalf("stream %d opened with %q %v", i, ev, err)
		}
	}
	r.hub.Shut()
	if r.hub.Len() != 0 {
		t.Fatalf("hub holds %d after Shut", r.hub.Len())
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range streams {
		wg.Go(func() { _, errs[i] = s.next(time.Second) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != io.EOF {
			t.Errorf("stream %d after Shut: %v, want its end (EOF)", i, err)
		}
	}

	late := r.open(t, "q1", "late", nil)
	var p struct {
		Status int `json:"status"`
	}
	body, _ := io.ReadAll(late.res.Body)
	if late.res.StatusCode != http.StatusServiceUnavailable || late.res.Header.Get("Retry-After") == "" ||
		late.res.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Status != 503 {
		t.Fatalf("stream after Shut: %d Retry-After %q %q %s, want 503 problem+json with Retry-After",
			late.res.StatusCode, late.res.Header.Get("Retry-After"), late.res.Header.Get("Content-Type"), body)
	}
	if _, err := late.body.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want the connection closed", err)
	}
}

// opaque hides its connections' descriptors (no syscall.Conn), as a
// wrapping listener might.
type opaque struct{ net.Listener }

func (l opaque) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{c}, nil
}

// A connection whose descriptor the server cannot reach is served all the
// same: its frames are written by a goroutine that may wait, and a
// goroutine reading it notices the client leaving.
func TestAConnectionWithoutADescriptorIsServed(t *testing.T) {
	t.Parallel()
	r := newRigOn(t, 8, stream.Options{Heartbeat: 100 * time.Millisecond, PositionEvery: time.Hour, WriteTimeout: 2 * time.Second},
		func(l net.Listener) net.Listener { return opaque{l} })
	streams := make([]*bare, 3)
	for i := range streams {
		streams[i] = r.open(t, "q1", fmt.Sprint("u", i), nil)
		if ev, err := streams[i].next(5 * time.Second); ev != "position" || err != nil {
			t.Fatalf("stream %d opened with %q %v", i, ev, err)
		}
	}
	r.waitLen(t, 3, 5*time.Second)
	for i, s := range streams {
		r.svc.Admitted("q1", fmt.Sprint("u", i), fmt.Sprint("tok-", i), time.Now(), time.Now().Add(time.Minute), time.Now())
		if ev, err := s.next(5 * time.Second); ev != "admitted" || err != nil {
			t.Fatalf("stream %d: %q %v, want admitted", i, ev, err)
		}
	}
	// Heartbeats, every 100 ms.
	_ = streams[0].conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	beats := 0
	for beats < 3 {
		line, err := streams[0].body.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d heartbeats: %v", beats, err)
		}
		if line == ": heartbeat\n" {
			beats++
		}
	}
	streams[1].conn.Close()
	r.waitLen(t, 2, 2*time.Second)
	// The fallback reader sees the client leave; a heartbeat (every
	// 100 ms here) may fail on the closed socket first and count it as a
	// write drop. Either way it is let go once, and the other two stay.
	if d := r.counter(t, "waitingroom_sse_clients_dropped_total", "write"); d > 1 {
		t.Fatalf("dropped{write} = %v, want at most 1 (the one client that left)", d)
	}
}
