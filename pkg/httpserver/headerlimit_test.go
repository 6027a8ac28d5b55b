package httpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
)

// head is a request line and headers of exactly size bytes, the empty line
// that ends them included, followed by body.
func head(t *testing.T, method string, size int, body string) string {
	t.Helper()
	start := method + " /h HTTP/1.1\r\nHost: t\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nX-Pad: "
	const end = "\r\n\r\n"
	pad := size - len(start) - len(end)
	if pad < 1 {
		t.Fatalf("a head of %d bytes has no room for padding", size)
	}
	return start + strings.Repeat("a", pad) + end + body
}

// exchange sends request on conn (read through br) and returns the answer's
// status and body.
func exchange(t *testing.T, conn net.Conn, br *bufio.Reader, request string) (int, []byte, http.Header) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body, res.Header
}

// TestHeadersAreCappedAtSixteenKiB: net/http lets MaxHeaderBytes + 4096
// bytes through, so 16 KiB configured as such let about 20 KiB in, on a
// connection's first request and on every later one. The server refuses
// exactly what is documented, either way, with a problem, and closes the
// connection.
func TestHeadersAreCappedAtSixteenKiB(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	addr := serve(t, h, config.HTTP{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: time.Minute})
	const limit = httpserver.MaxHeaderBytes
	if limit != 16384 {
		t.Fatalf("MaxHeaderBytes = %d, the documented limit is 16384", limit)
	}
	tests := []struct {
		name    string
		request string
		// keptAlive sends the request second on a connection, after a
		// small one.
		keptAlive bool
		want      int
	}{
		{"16 KiB less 100 bytes", head(t, "GET", limit-100, ""), false, http.StatusNoContent},
		{"exactly 16 KiB", head(t, "GET", limit, ""), false, http.StatusNoContent},
		{"exactly 16 KiB and a body", head(t, "POST", limit, strings.Repeat("b", 5000)), false, http.StatusNoContent},
		{"one byte over", head(t, "GET", limit+1, ""), false, http.StatusRequestHeaderFieldsTooLarge},
		{"100 bytes over", head(t, "GET", limit+100, ""), false, http.StatusRequestHeaderFieldsTooLarge},
		{"4 KiB over (what got through before)", head(t, "GET", limit+4000, ""), false, http.StatusRequestHeaderFieldsTooLarge},
		{"kept alive: exactly 16 KiB", head(t, "GET", limit, ""), true, http.StatusNoContent},
		{"kept alive: one byte over", head(t, "GET", limit+1, ""), true, http.StatusRequestHeaderFieldsTooLarge},
		{"kept alive: 4 KiB over", head(t, "GET", limit+4000, ""), true, http.StatusRequestHeaderFieldsTooLarge},
	}
	accepted, refused := 0, 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			if tc.keptAlive {
				if status, body, _ := exchange(t, conn, br, head(t, "GET", 200, "")); status != http.StatusNoContent {
					t.Fatalf("the first request: %d %q", status, body)
				}
				// net/http is now waiting for the next request.
				time.Sleep(20 * time.Millisecond)
			}
			status, body, header := exchange(t, conn, br, tc.request)
			if status != tc.want {
				t.Fatalf("status %d, want %d (body %q)", status, tc.want, body)
			}
			if status == http.StatusNoContent {
				accepted++
				return
			}
			refused++
			if ct := header.Get("Content-Type"); ct != problem.ContentType {
				t.Errorf("Content-Type %q, want %q", ct, problem.ContentType)
			}
			var p problem.Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if p.Type != problem.TypeHeadersTooLarge || p.Status != 431 || p.Title != "Request Header Fields Too Large" ||
				p.Detail != "the request line and headers are larger than 16384 bytes" {
				t.Errorf("problem %+v", p)
			}
			// The server closes the connection after the refusal.
			if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("after the 431: read %d bytes, %v; want the connection closed", n, err)
			}
		})
	}
	if accepted != 4 || refused != 5 {
		t.Fatalf("%d accepted and %d refused, want 4 and 5", accepted, refused)
	}
}
