package wire

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/services/order-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// localLimits builds the routes' in-process limits from the configuration.
func localLimits(cfg Config) (httpapi.Limits, error) {
	l := httpapi.Limits{IPv6Prefix: cfg.ClientIPv6Prefix}
	var err error
	if l.Orders, err = cfg.LocalLimits.Limiter(cfg.OrderLocalRatePerUser, cfg.OrderLocalInFlightPerUser); err != nil {
		return l, err
	}
	if l.Lookups, err = cfg.LocalLimits.Limiter(cfg.OrderLookupRatePerUser, 0); err != nil {
		return l, err
	}
	if l.LookupsInFlight, err = cfg.LocalLimits.Limiter(0, cfg.OrderLookupMaxInFlight); err != nil {
		return l, err
	}
	if l.Public, err = cfg.LocalLimits.Limiter(cfg.PublicRatePerIP, 0); err != nil {
		return l, err
	}
	return l, nil
}

// lookupRepo counts the order lookups that reach the database
// (waitingroom_orders_lookups_total), what the lookup limits bound.
type lookupRepo struct {
	order.Repo
	n prometheus.Counter
}

func countLookups(r order.Repo, reg prometheus.Registerer) order.Repo {
	n := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "waitingroom", Subsystem: "orders", Name: "lookups_total",
		Help: "Order lookups (GET /api/v1/orders/{id}) that reached the database."})
	reg.MustRegister(n)
	return lookupRepo{Repo: r, n: n}
}

func (r lookupRepo) Order(ctx context.Context, id string) (order.Order, error) {
	r.n.Inc()
	return r.Repo.Order(ctx, id)
}
