package httpserver

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"

	"github.com/waitingroom/waitingroom/pkg/problem"
)

// MaxHeaderBytes is the most a request line and its header fields may
// take, the empty line that ends them included: a longer head is answered
// 431 headers-too-large and the connection is closed.
//
// Two checks hold it. net/http counts the bytes it reads for a head from
// the moment it starts reading one, and refuses past MaxHeaderBytes + its
// slack: exact for a connection's first request, but on a kept-alive
// connection it has already read up to 4 KiB of the next request while
// waiting for it (a 4-byte Peek that fills its buffer), uncounted. So every
// request is also measured as it arrived (limitHead), the way a client
// writes it; what only extra whitespace around header values could still
// slip past that is bounded by net/http's count.
const MaxHeaderBytes = 16 << 10

// netHTTPReadSlack is what net/http adds to http.Server.MaxHeaderBytes
// before it stops reading a request's head ("bufio slop" in its
// initialReadLimitSize): configured alone, 16 KiB would let 20 KiB in.
const netHTTPReadSlack = 4096

// netHTTPHeadersTooLarge is, byte for byte, what net/http writes to the
// connection itself when a head is over the limit: no handler runs, so
// this is the only place its plain-text answer can become a problem.
const netHTTPHeadersTooLarge = "HTTP/1.1 431 Request Header Fields Too Large" +
	"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
	"431 Request Header Fields Too Large"

// headersTooLarge is the problem+json answer written in its place.
var headersTooLarge = func() []byte {
	p := problem.New(http.StatusRequestHeaderFieldsTooLarge, problem.TypeHeadersTooLarge, headersTooLargeDetail)
	body, err := json.Marshal(p)
	if err != nil {
		panic(err) // a fixed struct of strings and an int always encodes
	}
	body = append(body, '\n')
	head := "HTTP/1.1 431 Request Header Fields Too Large\r\n" +
		"Content-Type: " + problem.ContentType + "\r\n" +
		"Cache-Control: no-store\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(head), body...)
}()

// headSize is the size of r's request line and header fields as a client
// writes them ("Name: value" lines ending in CRLF, the empty line that ends
// them): net/http keeps each value as it was sent, without the spaces
// around it, and the Host header as r.Host. It stops counting once past
// limit.
func headSize(r *http.Request, limit int) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if n += len(k) + 2 + len(v) + 2; n > limit {
				return n
			}
		}
	}
	return n
}

// limitHead answers a request whose head is over MaxHeaderBytes with the
// problem net/http's own refusal is turned into, and closes the
// connection; other requests go to next.
func limitHead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headSize(r, MaxHeaderBytes) <= MaxHeaderBytes {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		problem.Write(w, r, problem.New(http.StatusRequestHeaderFieldsTooLarge, problem.TypeHeadersTooLarge, headersTooLargeDetail))
	})
}

// headersTooLargeDetail is the refusal's detail, both ways.
var headersTooLargeDetail = "the request line and headers are larger than " + strconv.Itoa(MaxHeaderBytes) + " bytes"

// headerLimitListener hands out connections that answer an oversized head
// with problem+json.
type headerLimitListener struct {
	*net.TCPListener
}

// Accept is net.Listener's.
func (l headerLimitListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return headerLimitConn{c}, nil
}

// headerLimitConn is a TCP connection whose one difference is the answer
// to an oversized head. Embedding *net.TCPConn keeps everything else the
// server and the handlers rely on: CloseWrite (net/http's lingering close),
// ReadFrom (sendfile) and SyscallConn (the event stream's writes that do
// not wait, and its epoll watcher).
type headerLimitConn struct {
	*net.TCPConn
}

// Write is net.Conn's. A handler's answer never equals net/http's fixed
// bytes (they carry no Date, and a handler's 431 would), so only
// net/http's own refusal is replaced.
func (c headerLimitConn) Write(p []byte) (int, error) {
	if string(p) != netHTTPHeadersTooLarge {
		return c.TCPConn.Write(p)
	}
	if _, err := c.TCPConn.Write(headersTooLarge); err != nil {
		return 0, err
	}
	return len(p), nil
}
