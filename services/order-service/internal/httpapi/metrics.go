package httpapi

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

type metrics struct {
	orders *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{orders: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "waitingroom", Subsystem: "orders", Name: "requests_total",
		Help: "Order requests by outcome (created, sold_out, conflict, invalid_token, not_active, rate_limited, invalid, unavailable, replayed, error).",
	}, []string{"outcome"})}
	reg.MustRegister(m.orders)
	return m
}

func (m *metrics) order(outcome string) { m.orders.WithLabelValues(outcome).Inc() }

func (m *metrics) orderResult(status int, err error) {
	switch status {
	case http.StatusCreated:
		m.order("created")
	case http.StatusConflict:
		if errors.Is(err, order.ErrSoldOut) {
			m.order("sold_out")
		} else {
			m.order("conflict")
		}
	case http.StatusForbidden:
		m.order("invalid_token")
	case http.StatusTooEarly:
		m.order("not_active")
	case http.StatusTooManyRequests:
		m.order("rate_limited")
	case http.StatusBadRequest:
		m.order("invalid")
	case http.StatusServiceUnavailable:
		m.order("unavailable")
	default:
		m.order("error")
	}
}
