package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// MaxBodyBytes is the largest request body any endpoint accepts.
const MaxBodyBytes = 64 << 10

// EngineOptions configures NewEngine.
type EngineOptions struct {
	Service        string
	Log            *slog.Logger
	Registry       *prometheus.Registry
	Health         *Health
	TrustedProxies []string
	// CORSOrigins are the origins allowed to call this service from a
	// browser (the gateway's page); empty means same-origin only.
	CORSOrigins []string
}

// NewEngine returns a gin engine with recovery, request metrics (registered
// in o.Registry, served by the ops listener), a body size limit,
// problem+json for unknown routes and methods, and /healthz and /readyz.
func NewEngine(o EngineOptions) (*gin.Engine, error) {
	if o.Log == nil || o.Registry == nil || o.Health == nil {
		return nil, errors.New("httpserver: the engine needs a log, a registry and a health")
	}
	origins, err := CheckOrigins(o.CORSOrigins)
	if err != nil {
		return nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(o.TrustedProxies); err != nil {
		return nil, err
	}
	if len(o.TrustedProxies) > 0 {
		e.ForwardedByClientIP = true
	}

	// One engine a registry: a second one would mix two services' series.
	duration := newRequestDurations()
	if err := o.Registry.Register(duration); err != nil {
		return nil, fmt.Errorf("httpserver: request metrics: %w", err)
	}

	// Metrics outermost: a request whose handler panicked is counted too,
	// with the 500 recovery answered.
	//
	// With tracing on, a server span a request (the gin instrumentation)
	// comes first, so the metrics see its trace as their exemplar.
	tracing := telemetry.Enabled()
	if tracing {
		e.Use(otelgin.Middleware(o.Service, otelgin.WithFilter(traced)))
	}
	e.Use(metrics(o.Service, duration, tracing), recovery(o.Log), CORS(origins), limitBody(MaxBodyBytes))
	e.NoRoute(func(c *gin.Context) {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusNotFound, problem.TypeNotFound, "no such resource"))
	})
	e.NoMethod(func(c *gin.Context) {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusMethodNotAllowed, problem.TypeMethodNotAllowed, "method not allowed on this resource"))
	})

	// Load balancers in front of the API port may check it; Kubernetes
	// probes and Prometheus use the ops listener (NewOps), which is never
	// routed to the world. No /metrics here: it names every queue.
	e.GET("/healthz", gin.WrapF(o.Health.Healthz))
	e.GET("/readyz", gin.WrapF(o.Health.PublicReadyz))
	return e, nil
}

// RequestDurations is waitingroom_http_request_duration_seconds{service,
// route, method, code} on reg, the engine's series when NewEngine
// registered it there: a handler in front of the engine records its
// requests with the engine's.
func RequestDurations(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	duration := newRequestDurations()
	if err := reg.Register(duration); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if existing, ok := dup.ExistingCollector.(*prometheus.HistogramVec); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("httpserver: request metrics: %w", err)
	}
	return duration, nil
}

func recovery(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		log.Error("panic in handler", "path", c.Request.URL.Path, "panic", err)
		problem.Write(c.Writer, c.Request, problem.New(http.StatusInternalServerError, problem.TypeInternal, "internal error"))
		c.Abort()
	})
}

// metrics observes every request; with tracing on, a sampled one with its
// trace as exemplar (without, no request has a span to look for).
func metrics(service string, h *prometheus.HistogramVec, tracing bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		o := h.WithLabelValues(service, route, c.Request.Method, strconv.Itoa(c.Writer.Status()))
		if !tracing {
			o.Observe(time.Since(start).Seconds())
			return
		}
		observe(c.Request.Context(), o, time.Since(start))
	}
}

// observe records d, with the request's trace as the exemplar when it is
// sampled: a slow bucket in a panel leads to a trace of a slow request.
func observe(ctx context.Context, o prometheus.Observer, d time.Duration) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if e, ok := o.(prometheus.ExemplarObserver); ok {
			e.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(d.Seconds())
}

// traced leaves the probes out of the traces: a span every second from
// every kubelet and load balancer buries the requests worth reading.
func traced(r *http.Request) bool {
	return r.URL.Path != "/healthz" && r.URL.Path != "/readyz"
}

// limitBody refuses a declared oversized body at once with 413 and caps the
// reader for bodies of unknown length; decoders report the overflow through
// IsBodyTooLarge.
func limitBody(max int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > max {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusRequestEntityTooLarge, problem.TypeBodyTooLarge,
				"request body is larger than "+strconv.FormatInt(max, 10)+" bytes"))
			c.Abort()
			return
		}
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, max)
		}
		c.Next()
	}
}

// IsBodyTooLarge reports whether err came from reading past the body limit.
func IsBodyTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// BodyTooLarge is the problem for an oversized body.
func BodyTooLarge() *problem.Problem {
	return problem.New(http.StatusRequestEntityTooLarge, problem.TypeBodyTooLarge,
		"request body is larger than "+strconv.Itoa(MaxBodyBytes)+" bytes")
}

func newRequestDurations() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "waitingroom",
		Subsystem: "http",
		Name:      "request_duration_seconds",
		Help:      "HTTP request latency by route, method and status code.",
		Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"service", "route", "method", "code"})
}
