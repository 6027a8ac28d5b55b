// Package httpapi is the queue-gateway's HTTP port: routes, JSON views and the
// one place where errors become problem+json responses.
package httpapi

import (
	_ "embed"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/web"
)

// Options are the handler's dependencies.
type Options struct {
	Service  *app.Service
	Verifier *auth.Verifier
	Log      *slog.Logger
	Registry *prometheus.Registry
	Health   *httpserver.Health
	// ClientIPv6Prefix is the prefix length an IPv6 client is limited by
	// (clientkey.Of); 0 means clientkey.DefaultIPv6Prefix.
	ClientIPv6Prefix int
	// DevMode enables POST /api/v1/dev/token.
	DevMode        bool
	TrustedProxies []string
	// Limits are the in-process limits in front of the routes.
	Limits Limits
	// Page configures the waiting-room page (/, /q/{queueId}, /config.json,
	// /static/); nil serves no page. Its DevMode is taken from DevMode.
	Page *web.Config
}

type handler struct {
	svc    *app.Service
	ver    *auth.Verifier
	log    *slog.Logger
	v6bits int
}

// New returns the gateway's routes.
func New(o Options) (http.Handler, error) {
	if o.Service == nil || o.Verifier == nil || o.Log == nil || o.Registry == nil || o.Health == nil {
		return nil, errors.New("httpapi: service, verifier, log, registry and health are required")
	}
	e, err := httpserver.NewEngine(httpserver.EngineOptions{
		Service:        "queue-gateway",
		Log:            o.Log,
		Registry:       o.Registry,
		Health:         o.Health,
		TrustedProxies: o.TrustedProxies,
	})
	if err != nil {
		return nil, err
	}
	h := &handler{svc: o.Service, ver: o.Verifier, log: o.Log, v6bits: o.ClientIPv6Prefix}

	refused, err := httpserver.NewThrottled(o.Registry)
	if err != nil {
		return nil, err
	}
	lim := newThrottles(o.Limits, o.ClientIPv6Prefix, refused)
	user := o.Verifier.Middleware(false)
	api := e.Group("/api/v1")
	api.GET("/queues/:queueId", lim.public, h.publicQueue)
	api.POST("/queues/:queueId/enter", h.limitEnter, user, h.enter)
	api.POST("/queues/:queueId/challenge", h.limitChallenge, user, h.challenge)
	api.GET("/queues/:queueId/position", user, lim.position, h.position)
	api.DELETE("/queues/:queueId/position", user, lim.position, h.leave)
	if o.DevMode {
		api.POST("/dev/token", h.devToken)
	}

	admin := e.Group("/admin/v1", user, auth.RequireAdmin())
	admin.GET("/queues", h.listQueues)
	admin.GET("/overview", h.overview)
	admin.PUT("/queues/:queueId", h.putQueue)
	admin.GET("/queues/:queueId", h.getQueue)
	admin.DELETE("/queues/:queueId", h.deleteQueue)

	if o.Page != nil {
		cfg := *o.Page
		cfg.DevMode = o.DevMode
		page, err := web.New(cfg)
		if err != nil {
			return nil, err
		}
		texts := textsRoutes{h: h, page: page}
		api.GET("/queues/:queueId/texts/:lang", lim.public, texts.forPage)
		admin.GET("/queues/:queueId/texts", texts.list)
		admin.PUT("/queues/:queueId/texts/:lang", texts.put)
		admin.DELETE("/queues/:queueId/texts/:lang", texts.remove)
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			e.Handle(m, "/", gin.WrapF(page.Page))
			e.Handle(m, "/q/:queueId", h.queuePage(page))
			e.Handle(m, "/config.json", gin.WrapF(page.Config))
			e.Handle(m, "/console", gin.WrapF(page.Console))
			e.Handle(m, "/static/*file", gin.WrapF(page.Static))
		}
	}
	httpserver.ServeOpenAPI(e, OpenAPI)
	duration, err := httpserver.RequestDurations(o.Registry)
	if err != nil {
		return nil, err
	}
	return newFastPolls(e, o.Service, o.Verifier, o.Log, duration), nil
}

// OpenAPI is the gateway's OpenAPI 3.1 document, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// queuePage serves the page for a queue named in the path; a name that can
// be no queue's is refused here rather than by the page's first call.
func (h *handler) queuePage(page *web.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !queue.ValidID(c.Param("queueId")) {
			h.fail(c, app.ErrInvalidQueueID)
			return
		}
		page.Page(c.Writer, c.Request)
	}
}
