package manifests

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// The rules evaluated by Prometheus's own rule engine over made-up series:
// a healthy sale fires nothing, and each failure fires exactly its alerts.

// evalMinutes is how long each scenario is evaluated, every evalStep (the
// series have a sample a minute, and a few more than that).
const (
	evalMinutes = 120
	evalStep    = 5 * time.Minute
)

// seriesSet is one scenario's series in promqltest's `load 1m` notation:
// a value per minute, by series.
type seriesSet map[string]string

// perMinute is a counter growing by n a minute.
func perMinute(n float64) string { return fmt.Sprintf("0+%gx%d", n, evalMinutes+10) }

// steady is a gauge at v.
func steady(v float64) string { return fmt.Sprintf("%g+0x%d", v, evalMinutes+10) }

const (
	positionHTTP = `service="queue-gateway",route="/api/v1/queues/:queueId/position",method="GET",code="200"`
	enterHTTP    = `service="queue-gateway",route="/api/v1/queues/:queueId/enter",method="POST",code="200"`
	dlqSeries    = `rabbitmq_queue_messages_ready{vhost="/",queue="admission-dispatcher.order-failed.dlq"}`
)

// healthySale: 100 polls/s, 0.05 % unavailable and 0.17 % slower than
// 100 ms; 20 enters/s, half of them refused as full (no error); 10
// admission intervals/s, 0.17 % late; orders without errors; a queue
// admitting at its rate; every dependency up.
func healthySale() seriesSet {
	s := seriesSet{
		`waitingroom_gateway_position_requests_total{state="waiting"}`:                    perMinute(6000),
		`waitingroom_gateway_position_requests_total{state="unavailable"}`:                perMinute(3),
		`waitingroom_gateway_position_requests_total{state="error"}`:                      perMinute(0),
		`waitingroom_http_request_duration_seconds_count{` + positionHTTP + `}`:           perMinute(6000),
		`waitingroom_http_request_duration_seconds_bucket{` + positionHTTP + `,le="0.1"}`: perMinute(5990),
		`waitingroom_gateway_enter_total{outcome="waiting"}`:                              perMinute(600),
		`waitingroom_gateway_enter_total{outcome="full"}`:                                 perMinute(600),
		`waitingroom_http_request_duration_seconds_count{` + enterHTTP + `}`:              perMinute(1200),
		`waitingroom_http_request_duration_seconds_bucket{` + enterHTTP + `,le="0.25"}`:   perMinute(1199),
		`waitingroom_dispatcher_admission_interval_seconds_count{queue="sale"}`:           perMinute(600),
		`waitingroom_dispatcher_admission_interval_seconds_bucket{queue="sale",le="0.2"}`: perMinute(599),
		`waitingroom_orders_requests_total{outcome="created"}`:                            perMinute(60),
		`waitingroom_orders_requests_total{outcome="sold_out"}`:                           perMinute(60),
		`waitingroom_orders_outbox_backlog{pod="o1"}`:                                     steady(0),
		`kube_pod_container_status_restarts_total{pod="gw-1",container="queue-gateway"}`:  steady(2),
		dlqSeries: steady(0),
		`rabbitmq_queue_messages_ready{vhost="/",queue="admission-dispatcher.order-failed"}`:   steady(500),
		`waitingroom_dependency_up{service="queue-gateway",dependency="redis"}`:                steady(1),
		`waitingroom_dependency_up{service="order-service",dependency="postgres"}`:             steady(1),
		`waitingroom_dependency_up{service="admission-dispatcher",dependency="rabbitmq"}`:      steady(1),
		`waitingroom_dispatcher_admission_held{queue="sale",reason="OUTBOX_BACKLOG",pod="d1"}`: steady(0),
	}
	for _, le := range []string{"0.25", "0.5", "1", "2.5", "5", "+Inf"} {
		s[`waitingroom_sse_delivery_lag_seconds_bucket{event="admitted",le="`+le+`"}`] = perMinute(600)
	}
	for _, q := range []string{"sale", "slow"} {
		s[`waitingroom_queue_waiting{queue="`+q+`",pod="gw-1"}`] = steady(5000)
		s[`waitingroom_dispatcher_leader{queue="`+q+`",pod="d1"}`] = steady(1)
		s[`waitingroom_dispatcher_tokens_issued_total{queue="`+q+`",pod="d1"}`] = perMinute(6000)
		s[`waitingroom_dispatcher_admission_rate_per_second{queue="`+q+`",pod="d1"}`] = steady(100)
		s[`waitingroom_dispatcher_outbox_backlog{queue="`+q+`",pod="d1"}`] = steady(10)
	}
	return s
}

func (s seriesSet) with(changes seriesSet) seriesSet {
	out := seriesSet{}
	for k, v := range s {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

// evalAlerts evaluates every group of the rules file in its order every
// evalStep over the series, as Prometheus would, and returns the alerts
// active at the end: "Name/severity label=value" (the queue, service or
// event label), with the firing ones in firing and the pending ones in
// pending. A rule that fails to evaluate, or an annotation whose template
// fails, is a test error.
func evalAlerts(t *testing.T, content []byte, series seriesSet) (firing, pending []string, budget map[string]float64) {
	t.Helper()
	groups, problems := checkRules(content, ruleEnv{series: map[string]bool{}, foreign: map[string]string{}})
	if groups == nil {
		t.Fatalf("rules do not load: %q", problems)
	}
	var load strings.Builder
	load.WriteString("load 1m\n")
	for _, k := range sortedKeys(series) {
		fmt.Fprintf(&load, "  %s %s\n", k, series[k])
	}
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		t.Fatal(err)
	}
	defer suite.Close()
	file := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(file, content, 0o600); err != nil {
		t.Fatal(err)
	}
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
	})
	loaded, errs := m.LoadGroups(time.Minute, labels.EmptyLabels(), "", nil, false, file)
	if len(errs) > 0 {
		t.Fatalf("load: %v", errs)
	}
	var ordered []*rules.Group
	for _, g := range groups.Groups {
		lg := loaded[rules.GroupKey(file, g.Name)]
		if lg == nil {
			t.Fatalf("group %s not loaded", g.Name)
		}
		for _, r := range lg.AlertingRules() {
			r.SetRestored(true)
		}
		ordered = append(ordered, lg)
	}
	start := time.Unix(0, 0).UTC()
	for ts := start; !ts.After(start.Add(evalMinutes * time.Minute)); ts = ts.Add(evalStep) {
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range ordered {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if err := r.LastError(); err != nil {
						t.Errorf("%s at %s: %v", r.Name(), ts.Sub(start), err)
					}
				}
			}
		})
	}
	for _, g := range ordered {
		for _, r := range g.AlertingRules() {
			for _, a := range r.ActiveAlerts() {
				id := r.Name() + "/" + a.Labels.Get("severity")
				for _, l := range []string{"queue", "service", "event"} {
					if v := a.Labels.Get(l); v != "" {
						id += " " + l + "=" + v
					}
				}
				a.Annotations.Range(func(l labels.Label) {
					if strings.Contains(l.Value, "error expanding") || strings.Contains(l.Value, "<no value>") {
						t.Errorf("%s: annotation %s: %s", id, l.Name, l.Value)
					}
				})
				if a.State == rules.StateFiring {
					firing = append(firing, id)
				} else {
					pending = append(pending, id)
				}
			}
		}
	}
	// What the dashboard's budget panel shows at the end.
	end := start.Add(evalMinutes * time.Minute)
	q, err := suite.QueryEngine().NewInstantQuery(suite.Context(), suite.Storage(), nil, "slo:error_budget_remaining:ratio30d", end)
	if err != nil {
		t.Fatal(err)
	}
	vec, err := q.Exec(suite.Context()).Vector()
	if err != nil {
		t.Fatal(err)
	}
	budget = map[string]float64{}
	for _, smp := range vec {
		budget[smp.Metric.Get("slo")] = smp.F
	}
	slices.Sort(firing)
	slices.Sort(pending)
	return slices.Compact(firing), slices.Compact(pending), budget
}

func TestAlertsFireOnlyForTheirFailure(t *testing.T) {
	_, content := renderedRules(t, "base")
	healthy := healthySale()
	for _, c := range []struct {
		name   string
		series seriesSet
		want   []string
	}{
		{"a healthy sale", healthy, nil},
		{"the front breaks", healthy.with(seriesSet{
			// 2.9 % of polls unavailable: 29x the budget.
			`waitingroom_gateway_position_requests_total{state="unavailable"}`: perMinute(180),
			// Nobody leads the queue "sale" and it admits nobody.
			`waitingroom_dispatcher_leader{queue="sale",pod="d1"}`:              steady(0),
			`waitingroom_dispatcher_tokens_issued_total{queue="sale",pod="d1"}`: steady(1e6),
			dlqSeries: steady(2),
			`waitingroom_dependency_up{service="queue-gateway",dependency="redis"}`: steady(0),
			// 20 % of orders unavailable at 2.5 orders/s.
			`waitingroom_orders_requests_total{outcome="unavailable"}`: perMinute(30),
		}), []string{
			"OrderAvailabilityBudgetBurn/page", "OrderAvailabilityBudgetBurn/ticket",
			"OrderErrorRatioHigh/page",
			"OrderFailedDeadLettered/ticket queue=admission-dispatcher.order-failed.dlq",
			"PositionAvailabilityBudgetBurn/page", "PositionAvailabilityBudgetBurn/ticket",
			"QueueWithoutLeader/page queue=sale",
			"RedisUnreachable/page service=queue-gateway",
		}},
		{"the back slows down", healthy.with(seriesSet{
			// 10 % of polls, 8 % of enters and 10 % of admission
			// intervals late: above 6x their budget, below 14.4x for
			// polls and intervals.
			`waitingroom_http_request_duration_seconds_bucket{` + positionHTTP + `,le="0.1"}`: perMinute(5400),
			`waitingroom_http_request_duration_seconds_bucket{` + enterHTTP + `,le="0.25"}`:   perMinute(1100),
			`waitingroom_dispatcher_admission_interval_seconds_bucket{queue="sale",le="0.2"}`: perMinute(540),
			`waitingroom_gateway_enter_total{outcome="unavailable"}`:                          perMinute(60),
			// "sale" is led and admits nobody, its outbox grows; "slow"
			// admits at half its rate with a long line.
			`waitingroom_dispatcher_tokens_issued_total{queue="sale",pod="d1"}`:               steady(1e6),
			`waitingroom_dispatcher_outbox_backlog{queue="sale",pod="d1"}`:                    perMinute(100),
			`waitingroom_dispatcher_tokens_issued_total{queue="slow",pod="d1"}`:               perMinute(3000),
			`waitingroom_orders_outbox_backlog{pod="o1"}`:                                     perMinute(50),
			`kube_pod_container_status_restarts_total{pod="gw-1",container="queue-gateway"}`:  perMinute(1),
			`waitingroom_dependency_up{service="order-service",dependency="postgres"}`:        steady(0),
			`waitingroom_dependency_up{service="admission-dispatcher",dependency="rabbitmq"}`: steady(0),
		}).with(sseLagAbove(2.5)), []string{
			"AdmissionPunctualityBudgetBurn/page", "AdmissionPunctualityBudgetBurn/ticket",
			"AdmissionRateOffTarget/ticket queue=slow",
			"DispatcherOutboxBacklogGrowing/page queue=sale",
			"EnterAvailabilityBudgetBurn/page", "EnterAvailabilityBudgetBurn/ticket",
			"EnterLatencyBudgetBurn/page", "EnterLatencyBudgetBurn/ticket",
			"OrderOutboxBacklogGrowing/page",
			"PodRestarting/page",
			"PositionLatencyBudgetBurn/page", "PositionLatencyBudgetBurn/ticket",
			"PostgresUnreachable/page service=order-service",
			"QueueNotAdmitting/page queue=sale",
			"RabbitMQUnreachable/page service=admission-dispatcher",
			"SSEDeliveryLagHigh/ticket event=admitted",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			firing, pending, _ := evalAlerts(t, content, c.series)
			if !slices.Equal(firing, c.want) {
				t.Errorf("firing after %d minutes:\n  %q\nwant\n  %q", evalMinutes, firing, c.want)
			}
			if len(pending) != 0 {
				t.Errorf("pending after %d minutes: %q", evalMinutes, pending)
			}
		})
	}
}

// sseLagAbove puts every admitted event's delivery lag above bound.
func sseLagAbove(bound float64) seriesSet {
	s := seriesSet{}
	for _, le := range []string{"0.25", "0.5", "1", "2.5", "5", "+Inf"} {
		v, _ := strconv.ParseFloat(le, 64)
		n := 600.0
		if v <= bound {
			n = 0
		}
		s[`waitingroom_sse_delivery_lag_seconds_bucket{event="admitted",le="`+le+`"}`] = perMinute(n)
	}
	return s
}

// TestErrorBudgetRemaining: the budget the dashboard shows is the share of
// the 30-day budget the traffic-weighted error ratio leaves, for every SLO.
func TestErrorBudgetRemaining(t *testing.T) {
	_, content := renderedRules(t, "base")
	_, _, got := evalAlerts(t, content, healthySale())
	want := map[string]float64{
		"position-availability": 1 - (3.0/6003)/0.001, // 3 of 6,003 polls a minute unavailable
		"position-latency":      1 - (10.0/6000)/0.01, // 10 of 6,000 slower than 100 ms
		"enter-availability":    1,                    // no enter unavailable: no error series at all
		"enter-latency":         1 - (1.0/1200)/0.01,
		"admission-punctuality": 1 - (1.0/600)/0.01,
		"order-availability":    1,
	}
	if len(got) != len(want) {
		t.Errorf("budgets for %v, want %v", sortedKeys(got), sortedKeys(want))
	}
	for slo, w := range want {
		if g, ok := got[slo]; !ok || math.Abs(g-w) > 1e-6 {
			t.Errorf("%s: %.6f of the budget left, want %.6f", slo, g, w)
		}
	}
}
