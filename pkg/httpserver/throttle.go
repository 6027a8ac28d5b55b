package httpserver

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// Throttle is a route's in-process limit: the key of each request (its
// user, or its client's address) is charged to l before the handler runs.
// Beyond the limit the request is answered 429 problem+json `rate-limited`
// with Retry-After and detail, from memory: no Redis, no database, nothing
// changed. refused (nil: none) is told each refusal. An empty key, a
// request the route's own checks refuse anyway, passes uncharged.
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
