package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
)

// StatusClientClosedRequest is what a request whose client went away is
// counted as (nginx's 499): no answer is sent, and the request metrics keep
// it apart from the service's own failures.
const StatusClientClosedRequest = 499

// Problems is a service's mapping from errors to problem responses: the one
// place an error becomes a status code, and the one place it is logged. Its
// rules are tried in order and the first that matches answers. Every
// service gets the same answers around its rules: a cancelled request gets
// StatusClientClosedRequest and no body, a rule marked Unavailable logs the
// error at warn, and an error no rule matches is a 500 "internal error"
// logged at error; both log lines name the route.
type Problems struct {
	rules []Rule
}

// NewProblems returns the rules as a Problems, tried in the order given.
func NewProblems(rules ...Rule) *Problems {
	return &Problems{rules: rules}
}

// Rule matches an error and makes the problem that answers it. Build one
// with Is, IsFunc or As.
type Rule struct {
	// answer is the problem for err, or nil when the rule does not match.
	answer func(c *gin.Context, err error) *problem.Problem
	// warn, when set, is the message err is logged under at warn.
	warn string
}

// Is answers the errors that are target (errors.Is) with a copy of p, so
// one problem can serve every request.
func Is(target error, p *problem.Problem) Rule {
	return IsFunc(target, func(*gin.Context) *problem.Problem {
		cp := *p
		return &cp
	})
}

// IsFunc answers the errors that are target with the problem f makes for
// the request: for a detail that names the request, or a Retry-After drawn
// anew for each answer.
func IsFunc(target error, f func(c *gin.Context) *problem.Problem) Rule {
	return Rule{answer: func(c *gin.Context, err error) *problem.Problem {
		if !errors.Is(err, target) {
			return nil
		}
		return f(c)
	}}
}

// As answers the errors that have an E in their chain (errors.As) with the
// problem f makes from it: for problems that carry the error's fields, such
// as a Retry-After or field errors. A nil problem from f passes the error
// on to the next rule.
func As[E error](f func(e E) *problem.Problem) Rule {
	return Rule{answer: func(_ *gin.Context, err error) *problem.Problem {
		var e E
		if !errors.As(err, &e) {
			return nil
		}
		return f(e)
	}}
}

// Unavailable marks r's errors as a dependency being down, or too slow: an
// operator wants to see them, so each is logged at warn under msg.
func (r Rule) Unavailable(msg string) Rule {
	r.warn = msg
	return r
}

// Fail answers err and stops the handler chain, also for a cancelled
// request: a middleware that fails must not let the handlers after it run.
// That request is only given its status, as nobody reads the answer.
func (ps *Problems) Fail(c *gin.Context, log *slog.Logger, err error) {
	if errors.Is(err, context.Canceled) {
		c.Status(StatusClientClosedRequest)
	} else {
		problem.Write(c.Writer, c.Request, ps.Problem(c, log, err))
	}
	c.Abort()
}

// Problem is the problem for err, logged as Fail logs it, for a caller
// that sends (or stores) the answer itself.
func (ps *Problems) Problem(c *gin.Context, log *slog.Logger, err error) *problem.Problem {
	for _, r := range ps.rules {
		p := r.answer(c, err)
		if p == nil {
			continue
		}
		if r.warn != "" {
			log.WarnContext(c.Request.Context(), r.warn, "path", c.FullPath(), "err", err)
		}
		return p
	}
	log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
	return problem.New(http.StatusInternalServerError, problem.TypeInternal, "internal error")
}
