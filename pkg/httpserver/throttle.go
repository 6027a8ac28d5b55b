package httpserver

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// Throttle is a route's in-process limit: the key of each request (its
// user, or its client's address) is charged to l before the handler runs.
// Beyond the limit the request is answered 429 problem+json `rate-limited`
// with Retry-After and detail, from memory: no Redis, no database, nothing
// changed. refused (nil: none) is told each refusal. A request whose key
// is empty has nothing to be charged to and passes.
func Throttle(l *throttle.Limiter, key func(*gin.Context) string, detail string, refused func()) gin.HandlerFunc {
	return func(c *gin.Context) {
		if l == nil {
			return
		}
		k := key(c)
		if k == "" {
			return
		}
		ok, retry := l.Acquire(k)
		if !ok {
			if refused != nil {
				refused()
			}
			problem.Write(c.Writer, c.Request, problem.New(http.StatusTooManyRequests, problem.TypeRateLimited, detail).WithRetryAfter(retry))
			c.Abort()
			return
		}
		defer l.Release(k)
		c.Next()
	}
}

// NewThrottled registers waitingroom_http_throttled_total{limit}: the
// requests a Throttle refused, by the limit's name.
func NewThrottled(reg prometheus.Registerer) (*Throttled, error) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "waitingroom", Subsystem: "http", Name: "throttled_total",
		Help: "Requests refused 429 by an in-process limit (no Redis or database call), by limit."}, []string{"limit"})
	if err := reg.Register(v); err != nil {
		return nil, err
	}
	return &Throttled{v: v}, nil
}

// Throttled counts refusals by limit.
type Throttled struct{ v *prometheus.CounterVec }

// By is the refusal counter of the limit named name, for Throttle.
func (t *Throttled) By(name string) func() {
	c := t.v.WithLabelValues(name)
	return c.Inc
}
