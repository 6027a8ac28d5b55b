package broker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

// recorder is a handler that counts deliveries per message id (probes
// apart) and keeps the first few problems an optional check finds.
type recorder struct {
	check func(broker.Delivery) error

	mu       sync.Mutex
	probes   int
	byID     map[string]int
	total    int
	problems []string
	nProblem int
}

func newRecorder(check func(broker.Delivery) error) *recorder {
	return &recorder{check: check, byID: map[string]int{}}
}

func (r *recorder) handle(_ context.Context, d broker.Delivery) broker.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if isProbe(d.MessageID) {
		r.probes++
		return broker.Ack
	}
	r.byID[d.MessageID]++
	r.total++
	if r.check != nil {
		if err := r.check(d); err != nil {
			r.nProblem++
			if len(r.problems) < 5 {
				r.problems = append(r.problems, err.Error())
			}
		}
	}
	return broker.Ack
}

func (r *recorder) probeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.probes
}

// counts returns distinct ids seen, deliveries, and problems found.
func (r *recorder) counts() (unique, total, problems int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID), r.total, r.nProblem
}

func (r *recorder) seen(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func (r *recorder) firstProblems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.problems...)
}

// logCounts counts log records by message, so tests can assert how often
// the Conn reconnected, and keeps the node it last connected to.
type logCounts struct {
	mu   sync.Mutex
	n    map[string]int
	addr string // of the last "broker: connected" or "reconnected"
}

// lastAddr is the host:port of the node the Conn last connected to.
func (c *logCounts) lastAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

func (c *logCounts) get(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

type countingHandler struct {
	slog.Handler
	c *logCounts
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.c.mu.Lock()
	h.c.n[r.Message]++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			h.c.addr = a.Value.String()
		}
		return true
	})
	h.c.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(as), c: h.c}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), c: h.c}
}

func itoa(i int) string { return strconv.Itoa(i) }

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}
