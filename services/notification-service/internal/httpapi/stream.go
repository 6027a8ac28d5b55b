package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// streams serves GET /api/v1/queues/{queueId}/events. It runs after the
// auth middleware (which accepts ?access_token=, as EventSource cannot send
// headers).
//
// The handler takes the connection over from net/http at once, which lets
// go of its per-connection buffers, its background read and the handler's
// goroutine, and leaves the rest to shared goroutines: an opener
// subscribes and writes the answer (open.go), the writers write live
// frames and heartbeats (conn.go), and the watcher notices clients
// leaving (watch.go). An open stream holds no goroutine and no buffer of its own,
// and a crowd that connects at once waits as small records, not as
// handlers holding their buffers while the store answers. A connection
// that cannot be taken over (HTTP/2, TLS, a test's recorder) is served by
// its handler goroutine through net/http (serveHere).
//
// streams owns those shared goroutines, through the pools, the watcher and
// tasks; close stops them all and waits for them.
type streams struct {
	svc *stream.Service
	o   stream.Options

	// ctx ends at close: an opening still reading the user's standing
	// gives up.
	ctx  context.Context
	stop context.CancelFunc

	openers *pool[*opening]
	writers *pool[*conn]
	watch   watcher
	// tasks counts the goroutines a conn starts outside the pools: a write
	// the socket did not take at once, and the heartbeat timer's callback.
	tasks sync.WaitGroup
}

func newStreams(svc *stream.Service) *streams {
	ctx, stop := context.WithCancel(context.Background())
	return &streams{svc: svc, o: svc.Options(), ctx: ctx, stop: stop, openers: newOpeners(), writers: newWriters()}
}

// close ends every stream whose connection was taken over and returns once
// each goroutine serving them has returned. A stream asked for afterwards
// is refused as on a hub that was shut. The order matters: the openings
// finish first (they start conns), then the watcher closes every conn
// (which ends their writes and stops their timers), then the writers end,
// and last the tasks, which only the openers and the writers add to.
func (h *streams) close() {
	h.stop()
	h.openers.close()
	h.watch.close()
	h.writers.close()
	h.tasks.Wait()
}

func (h *streams) handle(c *gin.Context) {
	p, _ := auth.FromContext(c)
	req := stream.Request{Queue: c.Param("queueId"), User: p.UserID, ForUser: c.Query("userId"), ClientIP: c.ClientIP(), Ticket: c.Query("ticket")}
	if !hijackable(c) {
		h.serveHere(c, req)
		return
	}
	hdr := c.Writer.Header().Clone() // the middleware's (CORS)
	nc, _, err := c.Writer.Hijack()
	if err != nil {
		fail(c, fmt.Errorf("httpapi: take the stream's connection over: %w", err))
		return
	}
	o := &opening{h: h, nc: nc, r: c.Request, hdr: hdr, req: req}
	if !h.openers.push(o) {
		o.refuse(nil, hub.ErrShut) // closed: the service is stopping
	}
}

// hijackable tells whether the request's connection can be taken over:
// HTTP/1 without TLS, on a net/http connection (gin's own Hijack assumes
// one).
func hijackable(c *gin.Context) bool {
	if c.Request.ProtoMajor != 1 || c.Request.TLS != nil {
		return false
	}
	u, ok := c.Writer.(interface{ Unwrap() http.ResponseWriter })
	if !ok {
		return false
	}
	_, ok = u.Unwrap().(http.Hijacker)
	return ok
}

// setStreamHeaders sets the headers of a 200 event stream.
func setStreamHeaders(hdr http.Header) {
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
}

// appendOpening appends the stream's first frames: the reconnect delay
// for EventSource, then the opening frames.
func (h *streams) appendOpening(b []byte, sub *stream.Subscription) []byte {
	b = append(b, "retry: "...)
	b = strconv.AppendInt(b, h.o.Retry.Milliseconds(), 10)
	b = append(b, "\n\n"...)
	for _, m := range sub.First {
		b = appendFrame(b, m)
	}
	return b
}

// appendFrame appends m as an SSE frame.
func appendFrame(b []byte, m hub.Message) []byte {
	b = append(b, "event: "...)
	b = append(b, m.Event...)
	b = append(b, '\n')
	if m.ID != "" {
		b = append(b, "id: "...)
		b = append(b, m.ID...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, m.Data...)
	return append(b, "\n\n"...)
}

// heartbeat is the comment that keeps proxies from closing an idle stream.
const heartbeat = ": heartbeat\n\n"

// serveHere serves a stream from its handler goroutine through net/http,
// each frame flushed with its own write deadline. The server's timeouts do
// not end the stream: the per-frame deadline replaces HTTP_WRITE_TIMEOUT,
// and net/http lifts the read deadline once the request is read, to watch
// for the client leaving (setting one here would cancel the request when
// it passed, golang/go#70834).
func (h *streams) serveHere(c *gin.Context, req stream.Request) {
	sub, err := h.svc.Subscribe(c, req)
	if err != nil {
		fail(c, err)
		return
	}
	defer sub.Close()
	setStreamHeaders(c.Writer.Header())
	c.Header("Connection", "keep-alive")
	c.Status(http.StatusOK)
	rc := http.NewResponseController(c.Writer)
	write := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(h.o.WriteTimeout))
		if _, err := c.Writer.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if write(h.appendOpening(nil, sub)) != nil {
		return
	}
	s := &inHandler{ready: make(chan struct{}, 1), gone: make(chan struct{})}
	sub.Attach(s)
	beat := time.NewTicker(h.o.Heartbeat)
	defer beat.Stop()
	var buf []byte
	for {
		select {
		case <-c.Request.Context().Done():
			return
		case <-s.gone:
			return
		case <-s.ready:
			msgs := sub.Take()
			buf = buf[:0]
			for _, m := range msgs {
				buf = appendFrame(buf, m)
			}
			if len(buf) == 0 {
				continue
			}
			if err := write(buf); err != nil {
				sub.WriteFailed()
				return
			}
			for _, m := range msgs {
				sub.Delivered(m)
			}
		case <-beat.C:
			if write([]byte(heartbeat)) != nil {
				sub.WriteFailed()
				return
			}
		}
	}
}

// inHandler is the hub.Sink of a stream its handler goroutine serves.
type inHandler struct {
	ready chan struct{} // one pending wake-up is enough: Take takes all
	gone  chan struct{}
	once  sync.Once
}

func (s *inHandler) Ready() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *inHandler) Closed() { s.once.Do(func() { close(s.gone) }) }
