package httpserver

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// OpsOptions configure NewOps.
type OpsOptions struct {
	// Registry holds the service's metrics; the Go runtime and process
	// collectors are added to it.
	Registry *prometheus.Registry
	Health   *Health
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof    bool
	Log      *slog.Logger
	Timeouts config.HTTP
}

// maxScrapesInFlight bounds concurrent /metrics requests: a gauge may read
// Redis, and a scrape storm must not become a Redis storm.
const maxScrapesInFlight = 4

// NewOps binds a service's ops listener on addr: /metrics, /healthz, /readyz
// (with the failed checks' reasons) and, with o.Pprof, /debug/pprof/. It is
// for Prometheus, kubelet probes and operators, never routed to the world:
// /metrics names every queue, an unannounced sale's too.
func NewOps(addr string, o OpsOptions) (*Server, error) {
	if o.Registry == nil || o.Health == nil || o.Log == nil {
		return nil, errors.New("httpserver: ops: registry, health and logger are required")
	}
	if err := o.Registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := o.Registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{
		Registry:            o.Registry,
		MaxRequestsInFlight: maxScrapesInFlight,
		// Exemplars (a trace id next to a histogram bucket) exist only in
		// the OpenMetrics format, which Prometheus asks for when its
		// exemplar storage is on; others get the text format as before.
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /healthz", o.Health.Healthz)
	mux.HandleFunc("GET /readyz", o.Health.Readyz)
	t := o.Timeouts
	if o.Pprof {
		mux.Handle("/debug/pprof/", Pprof())
		// A CPU profile or trace streams for its ?seconds= (30 by
		// default), and net/http/pprof refuses one that a write timeout
		// would cut.
		t.WriteTimeout = 0
	}
	return New(addr, mux, o.Log, Options{Name: "ops", Timeouts: t})
}

// Pprof serves net/http/pprof's profiles under /debug/pprof/.
func Pprof() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
