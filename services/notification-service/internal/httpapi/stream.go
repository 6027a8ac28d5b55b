package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// streams serves GET /api/v1/queues/{queueId}/events. It runs after the
// auth middleware (which accepts ?access_token=, as EventSource cannot send
// headers).
type streams struct {
	svc *stream.Service
	o   stream.Options
}

func (h *streams) handle(c *gin.Context) {
	p, _ := auth.FromContext(c)
	sub, err := h.svc.Subscribe(c, stream.Request{Queue: c.Param("queueId"), User: p.UserID, ForUser: c.Query("userId"), ClientIP: c.ClientIP()})
	if err != nil {
		fail(c, err)
		return
	}
	defer sub.Close()

	hdr := c.Writer.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	c.Status(http.StatusOK)
	// The server's timeouts must not end the stream. HTTP_WRITE_TIMEOUT
	// does not: every frame below sets its own write deadline, which
	// replaces the server's. HTTP_READ_TIMEOUT does not either: net/http
	// lifts the read deadline once the request is read, to watch for the
	// client leaving. Setting one here would cancel the request when it
	// passed (golang/go#70834), so the stream leaves it alone.
	w := &writer{rc: http.NewResponseController(c.Writer), w: c.Writer, timeout: h.o.WriteTimeout}
	if err := w.raw(fmt.Sprintf("retry: %d\n\n", h.o.Retry.Milliseconds())); err != nil {
		return
	}
	for _, m := range sub.First {
		if w.send(m) != nil {
			return
		}
	}

	beat := time.NewTicker(h.o.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-c.Request.Context().Done():
			return
		case <-sub.Gone:
			return
		case m := <-sub.C:
			if err := w.send(m); err != nil {
				sub.WriteFailed()
				return
			}
			sub.Delivered(m)
		case <-beat.C:
			if w.raw(": heartbeat\n\n") != nil {
				sub.WriteFailed()
				return
			}
		}
	}
}

// writer writes SSE frames, each with a deadline: a client whose socket
// takes nothing for that long is gone.
type writer struct {
	rc      *http.ResponseController
	w       http.ResponseWriter
	timeout time.Duration
}

func (w *writer) raw(s string) error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	if _, err := w.w.Write([]byte(s)); err != nil {
		return err
	}
	return w.rc.Flush()
}

func (w *writer) send(m hub.Message) error {
	frame := "event: " + m.Event + "\n"
	if m.ID != "" {
		frame += "id: " + m.ID + "\n"
	}
	return w.raw(frame + "data: " + string(m.Data) + "\n\n")
}
