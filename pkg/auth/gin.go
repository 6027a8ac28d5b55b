package auth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
)

const principalKey = "waitingroom.principal"

// Middleware authenticates the request's bearer token. With allowQuery the
// access_token query parameter is accepted too (EventSource cannot send headers).
func (v *Verifier) Middleware(allowQuery bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		raw := bearer(c.GetHeader("Authorization"))
		if raw == "" && allowQuery {
			raw = c.Query("access_token")
		}
		p, err := v.Verify(raw)
		if err != nil {
			detail := "a valid bearer token is required"
			if !errors.Is(err, ErrMissingToken) {
				detail = "the bearer token is invalid or expired"
			}
			c.Header("WWW-Authenticate", `Bearer realm="waitingroom"`)
			problem.Write(c.Writer, c.Request, problem.New(http.StatusUnauthorized, problem.TypeUnauthorized, detail))
			c.Abort()
			return
		}
		c.Set(principalKey, p)
		c.Next()
	}
}

// RequireAdmin refuses callers without the admin role. It runs after Middleware.
func RequireAdmin() gin.HandlerFunc {
	return func(c *gin.Context) {
		if p, ok := FromContext(c); !ok || !p.IsAdmin() {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusForbidden, problem.TypeForbidden, "this route needs the admin role"))
			c.Abort()
			return
		}
		c.Next()
	}
}

// FromContext returns the principal Middleware stored.
func FromContext(c *gin.Context) (Principal, bool) {
	v, ok := c.Get(principalKey)
	if !ok {
		return Principal{}, false
	}
	p, ok := v.(Principal)
	return p, ok
}

// Bearer is the token of an Authorization header value ("Bearer <token>",
// the scheme in any case), or "" when it carries none.
func Bearer(h string) string { return bearer(h) }

func bearer(h string) string {
	const prefix = "bearer "
	if len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		return strings.TrimSpace(h[len(prefix):])
	}
	return ""
}
