package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// edgeEnv is what every service of an edge test needs: its own exchange and
// OrderFailed queue, the shared Redis and a private database, the test's
// secret, and short HTTP timeouts.
func edgeEnv(t *testing.T, readTimeout time.Duration, extra map[string]string) map[string]string {
	t.Helper()
	exchange := "e2e." + testenv.ID(t)
	amqpURL := testenv.AMQPURL(t)
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(amqpURL, exchange, exchange+".order-failed", exchange+".order-failed.dlq", exchange+".queue-changes", exchange+".queue-changes.dlq")
	})
	env := map[string]string{
		"REDIS_URL": testenv.RedisURL(t), "AMQP_URL": amqpURL, "AMQP_EXCHANGE": exchange, "AUTH_JWT_SECRET": secret,
		"ORDER_FAILED_QUEUE": exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": exchange + ".queue-changes", "DATABASE_URL": testenv.PostgresURL(t),
		"DISPATCH_QUEUES":   testenv.ID(t),
		"HTTP_READ_TIMEOUT": readTimeout.String(), "HTTP_WRITE_TIMEOUT": (2 * readTimeout).String(),
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// slowPost sends a POST announcing a 60 kB body and then one byte every 4 s,
// with no credentials, as a client pinning connections would. It returns
// how long after the headers the server closed the connection, and the
// status line it answered (if any); it gives up giving bytes at giveUp.
func slowPost(t *testing.T, addr, path string, giveUp time.Duration) (time.Duration, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{", path, addr); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(4 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(start.Add(giveUp))
	r := bufio.NewReader(conn)
	status, _ := r.ReadString('\n')
	_, err = io.Copy(io.Discard, r)
	elapsed := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("POST %s: the connection was still open %v after the headers (status line %q)", path, giveUp, strings.TrimSpace(status))
	}
	return elapsed, strings.TrimSpace(status)
}

// A client trickling a body in, with no credentials, is cut off at
// HTTP_READ_TIMEOUT, on every listener: the three API ports and an ops
// listener (the dispatcher's, its only one).
func TestSlowBodyIsCutAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	tests := []struct {
		service, path, want string
		ops                 bool
	}{
		// 401 (no credentials) once the body has been given up on.
		{"queue-gateway", "/api/v1/queues/demo/enter", "HTTP/1.1 401 Unauthorized", false},
		{"order-service", "/api/v1/orders", "HTTP/1.1 401 Unauthorized", false},
		// The stream only takes GET.
		{"notification-service", "/api/v1/queues/demo/events", "HTTP/1.1 405 Method Not Allowed", false},
		{"admission-dispatcher", "/metrics", "HTTP/1.1 405 Method Not Allowed", true},
	}
	for _, tc := range tests {
		t.Run(tc.service, func(t *testing.T) {
			t.Parallel()
			s := start(t, tc.service, edgeEnv(t, timeout, map[string]string{"ENTER_RATE_LIMIT_PER_IP": "0"}))
			url := s.URL
			if tc.ops {
				url = s.OpsURL
			}
			elapsed, status := slowPost(t, strings.TrimPrefix(url, "http://"), tc.path, timeout+5*time.Second)
			if elapsed < timeout-500*time.Millisecond || elapsed > timeout+time.Second {
				t.Errorf("closed %v after the headers, want within %v..%v (HTTP_READ_TIMEOUT %v)", elapsed.Round(time.Millisecond),
					timeout-500*time.Millisecond, timeout+time.Second, timeout)
			}
			if status != tc.want {
				t.Errorf("answered %q, want %q", status, tc.want)
			}
			if !s.Alive() {
				t.Fatalf("%s exited; log:\n%s", tc.service, s.Tail())
			}
			t.Logf("%s: %q, connection closed %v after the headers (HTTP_READ_TIMEOUT %v)", tc.path, status, elapsed.Round(time.Millisecond), timeout)
		})
	}
}

// get is a GET's status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res.StatusCode, string(b)
}

// Every service serves /metrics, /healthz and /readyz on its ops listener
// and no /metrics on its API port; pprof answers there only when
// PPROF_ENABLED is on.
func TestOpsListenerOfEveryService(t *testing.T) {
	t.Parallel()
	tests := []struct {
		service string
		pprof   bool
		// api is a request on the API port the service counts in
		// waitingroom_http_request_duration_seconds; "" for the
		// dispatcher, which has no API port.
		api, route, sample string
	}{
		{"queue-gateway", true, "/api/v1/queues/no-such-queue", "/api/v1/queues/:queueId", "waitingroom_http_request_duration_seconds_count"},
		{"order-service", false, "/api/v1/products?queueId=no-such-queue", "/api/v1/products", "waitingroom_orders_outbox_backlog"},
		{"notification-service", false, "/api/v1/queues/no-such-queue/events", "/api/v1/queues/:queueId/events", "waitingroom_sse_streams_open"},
		{"admission-dispatcher", true, "", "", "waitingroom_dispatcher_tick_duration_seconds_count"},
	}
	for _, tc := range tests {
		t.Run(tc.service, func(t *testing.T) {
			t.Parallel()
			s := start(t, tc.service, edgeEnv(t, 10*time.Second, map[string]string{"PPROF_ENABLED": fmt.Sprint(tc.pprof)}))

			if tc.api != "" {
				if code, body := get(t, s.URL+"/metrics"); code != http.StatusNotFound {
					t.Errorf("API port /metrics: %d, want 404; body %.200q", code, body)
				}
				// The API port keeps /readyz for load balancers, status only.
				if code, body := get(t, s.URL+"/readyz"); code != http.StatusOK || body != `{"status":"ready"}` {
					t.Errorf("API port /readyz: %d %q", code, body)
				}
				for range 3 {
					get(t, s.URL+tc.api)
				}
			}
			code, metrics := get(t, s.OpsURL+"/metrics")
			if code != http.StatusOK || !strings.Contains(metrics, tc.sample) || !strings.Contains(metrics, "\ngo_goroutines ") {
				t.Fatalf("ops /metrics: %d, want 200 with %s and go_goroutines; body %.300q", code, tc.sample, metrics)
			}
			if tc.api != "" {
				prefix := `waitingroom_http_request_duration_seconds_count{code="`
				n := 0
				for _, line := range strings.Split(metrics, "\n") {
					if strings.HasPrefix(line, prefix) && strings.Contains(line, `route="`+tc.route+`"`) {
						var v int
						if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
							t.Fatal(err)
						}
						n += v
					}
				}
				if n != 3 {
					t.Errorf("ops /metrics counts %d requests to %s, want 3", n, tc.route)
				}
			}
			if code, body := get(t, s.OpsURL+"/healthz"); code != http.StatusOK || body != `{"status":"ok"}` {
				t.Errorf("ops /healthz: %d %q", code, body)
			}
			if code, body := get(t, s.OpsURL+"/readyz"); code != http.StatusOK || body != `{"status":"ready"}` {
				t.Errorf("ops /readyz: %d %q", code, body)
			}
			code, body := get(t, s.OpsURL+"/debug/pprof/goroutine?debug=1")
			switch {
			case tc.pprof && (code != http.StatusOK || !strings.Contains(body, "goroutine profile: total")):
				t.Errorf("PPROF_ENABLED=true: /debug/pprof/goroutine %d %.100q", code, body)
			case !tc.pprof && code != http.StatusNotFound:
				t.Errorf("PPROF_ENABLED=false: /debug/pprof/goroutine %d, want 404", code)
			}
			if tc.api != "" {
				if code, _ := get(t, s.URL+"/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
					t.Errorf("API port /debug/pprof/: %d, want 404", code)
				}
			}
		})
	}
}
