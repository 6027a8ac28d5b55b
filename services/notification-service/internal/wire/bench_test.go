package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// BenchmarkStreams opens STREAMS (default 10,000) event streams on one
// notification-service process, then admits every user at once, and reports
// the server's memory per open stream (RSS growth / streams) and the p50 /
// p99 delivery lag from the event's time to its arrival at the client.
// Run with -benchtime 1x; the figures are per run, not per op.
func BenchmarkStreams(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("STREAMS")); err == nil && v > 0 {
		n = v
	}
	exchange := "bench." + testenv.ID(b)
	b.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(b), exchange) })
	q := newQueue(b)
	bin := filepath.Join(b.TempDir(), "notification-service")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	port, pprofPort := testenv.FreePort(b), testenv.FreePort(b)
	cmd := exec.Command(bin)
	cfg := testConfig(b, exchange)
	cmd.Env = append(os.Environ(), "HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port), "OPS_ADDR=127.0.0.1:0", "AUTH_JWT_SECRET="+secret,
		"REDIS_URL="+cfg.Redis.URL, "AMQP_URL="+cfg.AMQP.URL, "AMQP_EXCHANGE="+exchange,
		"SSE_MAX_STREAMS_PER_IP=0", "SSE_POSITION_INTERVAL=1h", "SSE_HEARTBEAT=1m", "LOG_LEVEL=warn",
		"PPROF_ADDR=127.0.0.1:"+strconv.Itoa(pprofPort))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitReady(b, "http://"+addr)
	time.Sleep(500 * time.Millisecond)
	before := rss(b, cmd.Process.Pid)

	ver, _ := auth.NewVerifier(secret)
	arrivals, created := make([]time.Time, n), make([]time.Time, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ready := make(chan struct{}, n)
	sem := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			<-sem
			if err != nil {
				b.Error(err)
				ready <- struct{}{}
				return
			}
			go func() { <-ctx.Done(); conn.Close() }()
			tok, _ := ver.Mint(fmt.Sprintf("u%05d", i), "", time.Hour)
			fmt.Fprintf(conn, "GET /api/v1/queues/%s/events?access_token=%s HTTP/1.1\r\nHost: x\r\n\r\n", q, tok)
			r := bufio.NewReaderSize(conn, 512)
			signalled := false
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					if !signalled {
						ready <- struct{}{}
					}
					return
				}
				if !signalled && strings.HasPrefix(line, "event: position") {
					signalled = true
					ready <- struct{}{}
				}
				if strings.HasPrefix(line, "event: admitted") {
					mu.Lock()
					arrivals[i] = time.Now()
					mu.Unlock()
					return
				}
			}
		})
	}
	for range n {
		<-ready
	}
	time.Sleep(time.Second)
	after := rss(b, cmd.Process.Pid)
	mem := memBreakdown(b, "http://127.0.0.1:"+strconv.Itoa(pprofPort))

	pubConn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: exchange, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer pubConn.Close()
	b.ResetTimer()
	start := time.Now()
	for lo := 0; lo < n; lo += 1000 {
		batch := make([]broker.Event, 0, 1000)
		mu.Lock()
		for i := lo; i < min(lo+1000, n); i++ {
			created[i] = time.Now()
			batch = append(batch, issued(q, fmt.Sprintf("u%05d", i), fmt.Sprintf("t%05d", i), created[i]))
		}
		mu.Unlock()
		if err := pubConn.Publisher().Publish(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	published := time.Since(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatal("not every stream got its admission within 60s")
	}
	b.StopTimer()
	lags := make([]time.Duration, 0, n)
	mu.Lock()
	for i, a := range arrivals {
		if !a.IsZero() {
			lags = append(lags, a.Sub(created[i]))
		}
	}
	mu.Unlock()
	if len(lags) != n {
		b.Fatalf("%d of %d streams got their admission", len(lags), n)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	b.ReportMetric(float64(n), "streams")
	b.ReportMetric(float64(after-before)/float64(n), "rss-bytes/stream")
	b.ReportMetric(float64(mem.heapInuse)/float64(n), "heap-bytes/stream")
	b.ReportMetric(float64(mem.stackInuse)/float64(n), "stack-bytes/stream")
	b.ReportMetric(float64(mem.goroutines)/float64(n), "goroutines/stream")
	b.ReportMetric(float64(lags[len(lags)/2].Milliseconds()), "p50-lag-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Milliseconds()), "p99-lag-ms")
	b.Logf("%d streams: RSS %d -> %d KiB; publishing all admissions took %v; lag from each event's creation (publish with confirm, broker, fan-out, SSE write, client read): p50 %v p99 %v max %v",
		n, before/1024, after/1024, published, lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
}

// memory is where a process's memory is, as its pprof endpoint tells.
type memory struct {
	heapInuse, stackInuse, goroutines int64
}

// memBreakdown reads the heap's and the stacks' in-use bytes (the MemStats
// at the end of the heap profile's text form) and the goroutine count from
// the process's pprof listener. With SSE_PROFILE_DIR set, the heap profile
// is also saved there (go tool pprof -top -sample_index=inuse_space).
func memBreakdown(b *testing.B, base string) memory {
	b.Helper()
	get := func(path string) string {
		res, err := http.Get(base + path)
		if err != nil {
			b.Fatalf("pprof %s: %v", path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	var m memory
	field := func(text, name string) int64 {
		i := strings.Index(text, "# "+name+" = ")
		if i < 0 {
			b.Fatalf("pprof heap: no %s", name)
		}
		v, _ := strconv.ParseInt(strings.Fields(text[i+len(name)+5:])[0], 10, 64)
		return v
	}
	heap := get("/debug/pprof/heap?debug=1")
	m.heapInuse, m.stackInuse = field(heap, "HeapInuse"), field(heap, "Stack") // "# Stack = inuse / sys"
	g := get("/debug/pprof/goroutine?debug=1")
	if _, err := fmt.Sscanf(g, "goroutine profile: total %d", &m.goroutines); err != nil {
		b.Fatalf("pprof goroutine: %v", err)
	}
	if dir := os.Getenv("SSE_PROFILE_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "sse-heap.pb.gz"), []byte(get("/debug/pprof/heap")), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

func waitReady(b *testing.B, url string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
		if err == nil {
			fmt.Fprintf(c, "GET /readyz HTTP/1.0\r\n\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.Contains(line, "200") {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("service not ready within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rss is a process's resident set size in bytes, from /proc.
func rss(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
