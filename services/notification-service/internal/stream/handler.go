package stream

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
)

// Handle serves GET /api/v1/queues/{queueId}/events. It runs after the auth
// middleware (which accepts ?access_token=, as EventSource cannot send
// headers).
func (s *Service) Handle(c *gin.Context) {
	p, _ := auth.FromContext(c)
	q := c.Param("queueId")
	if !queue.ValidID(q) {
		s.reject(c, "invalid", problem.New(http.StatusBadRequest, "invalid-queue-id", "not a valid queue id"))
		return
	}
	if u := c.Query("userId"); u != "" && u != p.UserID {
		s.reject(c, "foreign", problem.New(http.StatusForbidden, problem.TypeForbidden, "a stream can only be opened for the token's own user"))
		return
	}
	// The current state first: it decides 404 / 503 before the stream opens,
	// and a reconnecting client (Last-Event-ID) learns of an admission it
	// missed while away.
	st, err := s.pos.Position(c, q, p.UserID)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		s.reject(c, "not_found", problem.New(http.StatusNotFound, "queue-not-found", "no queue with this id"))
		return
	case err != nil:
		s.reject(c, "unavailable", problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
			"the waiting room's store is not answering").WithRetryAfter(2*time.Second))
		return
	}
	stream, err := s.hub.Open(q, p.UserID, c.ClientIP())
	switch {
	case errors.Is(err, hub.ErrShut):
		s.reject(c, "shutting_down", problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
			"this replica is stopping; connect again").WithRetryAfter(time.Second))
		return
	case errors.Is(err, hub.ErrUserCap):
		s.reject(c, "user_cap", problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many open streams for this user").WithRetryAfter(10*time.Second))
		return
	case err != nil:
		s.reject(c, "ip_cap", problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many open streams from this address").WithRetryAfter(10*time.Second))
		return
	}
	defer s.hub.Close(stream)

	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	c.Status(http.StatusOK)
	// The server's timeouts must not end the stream. HTTP_WRITE_TIMEOUT
	// does not: every frame below sets its own write deadline, which
	// replaces the server's. HTTP_READ_TIMEOUT does not either: net/http
	// lifts the read deadline once the request is read, to watch for the
	// client leaving. Setting one here would cancel the request when it
	// passed (golang/go#70834), so the stream leaves it alone.
	w := &writer{rc: http.NewResponseController(c.Writer), w: c.Writer, timeout: s.o.WriteTimeout}
	if err := w.raw(fmt.Sprintf("retry: %d\n\n", s.o.Retry.Milliseconds())); err != nil {
		return
	}
	now := time.Now()
	if st.State == queue.Admitted && st.Token != nil && stream.MarkAdmitted(st.Token.ID) {
		if w.send(admittedMessage(q, st.Token.ID, st.Token.ActivateAt, st.Token.ExpiresAt, now)) != nil {
			return
		}
	}
	v, _ := queue.NewView(st, false)
	if w.json("position", v) != nil {
		return
	}

	beat := time.NewTicker(s.o.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-c.Request.Context().Done():
			return
		case <-stream.Gone:
			return
		case m := <-stream.C:
			if err := w.send(m); err != nil {
				s.m.dropped.WithLabelValues("write").Inc()
				return
			}
			s.m.delivered.WithLabelValues(m.Event).Inc()
			if !m.At.IsZero() {
				s.m.lag.WithLabelValues(m.Event).Observe(time.Since(m.At).Seconds())
			}
		case <-beat.C:
			if w.raw(": heartbeat\n\n") != nil {
				s.m.dropped.WithLabelValues("write").Inc()
				return
			}
		}
	}
}

func (s *Service) reject(c *gin.Context, reason string, p *problem.Problem) {
	s.m.rejected.WithLabelValues(reason).Inc()
	problem.Write(c.Writer, c.Request, p)
	c.Abort()
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

func (w *writer) json(event string, v any) error {
	b, err := jsonMarshal(v)
	if err != nil {
		return err
	}
	return w.send(hub.Message{Event: event, Data: b})
}
