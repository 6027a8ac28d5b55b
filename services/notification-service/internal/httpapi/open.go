package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// openTimeout bounds a subscription's read of the user's standing, which
// the client's leaving no longer cancels (the streams' close does).
const openTimeout = 5 * time.Second

// opening is a stream request whose connection the handler took over. An
// opener subscribes it, then writes the stream's head and opening frames,
// or the refusal, on the connection.
type opening struct {
	h   *streams
	nc  net.Conn
	r   *http.Request // read no more; a refusal names its path
	hdr http.Header   // the middleware's (CORS)
	req stream.Request
}

// run subscribes o and answers it; buf is scratch space, returned for the
// next opening.
func (o *opening) run(buf []byte) []byte {
	ctx, cancel := context.WithTimeout(o.h.ctx, openTimeout)
	sub, err := o.h.svc.Subscribe(ctx, o.req)
	cancel()
	if err != nil {
		if errors.Is(err, context.Canceled) && o.h.ctx.Err() != nil {
			err = hub.ErrShut // the streams closed while it waited: the replica is stopping
		}
		return o.refuse(buf, err)
	}
	setStreamHeaders(o.hdr)
	buf = o.h.appendOpening(appendHead(buf[:0], o.r, http.StatusOK, o.hdr), sub)
	sub.First = nil // written: the stream need not keep them
	c := newConn(o.h, o.nc, sub)
	if _, err := c.writeWait(buf); err != nil {
		sub.Close()
		_ = o.nc.Close()
		return buf
	}
	c.start()
	return buf
}

// refuse answers the request as fail would have (the table's problem),
// then closes the connection.
func (o *opening) refuse(buf []byte, err error) []byte {
	w := &answer{header: o.hdr}
	// The table's rules see the request; the log line of an error it does
	// not list names no route.
	problem.Write(w, o.r, problems.Problem(&gin.Context{Request: o.r}, slog.Default(), err))
	w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	buf = append(appendHead(buf[:0], o.r, w.status, w.header), w.body.Bytes()...)
	_ = o.nc.SetWriteDeadline(time.Now().Add(o.h.o.WriteTimeout))
	_, _ = o.nc.Write(buf)
	_ = o.nc.Close()
	return buf
}

// appendHead appends a response's status line and headers. The
// connection closes after the response, which ends a stream's body.
func appendHead(b []byte, r *http.Request, status int, hdr http.Header) []byte {
	if r.ProtoAtLeast(1, 1) {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\n"...)
	hdr.Set("Connection", "close")
	hdr.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	out := bytes.NewBuffer(b)
	_ = hdr.Write(out) // a bytes.Buffer takes every write
	out.WriteString("\r\n")
	return out.Bytes()
}

// answer is an http.ResponseWriter that keeps what is written, for a
// response written on a connection taken over.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}
