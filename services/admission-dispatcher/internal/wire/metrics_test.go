package wire

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// scrape is every series of reg, one line each: name{labels} value, sorted.
func scrape(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out = append(out, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(labels, ","), v))
		}
	}
	slices.Sort(out)
	return out
}

// The series the dashboards (deploy/grafana) and alerts read: their names,
// labels and help texts are a contract, and each method of the Metrics
// port moves the series it stands for.
func TestMetricsKeepTheirNamesLabelsAndHelp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.Leading("a")
	m.Admitted("a", 7, 2)
	m.Held("a", queue.HeldOutboxBacklog)
	m.Backlog("a", 5)
	m.Ticked(3 * time.Millisecond)
	m.Published([]queue.Event{{Type: queue.EventTokenIssued}, {Type: queue.EventTokenIssued}})
	m.Restored("a", queue.Restored)
	m.Drew("a", 300, 40*time.Millisecond)
	m.Rate("a", 122.5)
	m.RateDecided("a", "DECREASE")

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := map[string]string{}
	for _, mf := range mfs {
		help[mf.GetName()] = mf.GetType().String() + " " + mf.GetHelp()
	}
	want := map[string]string{
		"waitingroom_dispatcher_tokens_issued_total":       "COUNTER Entry tokens issued.",
		"waitingroom_dispatcher_tokens_expired_total":      "COUNTER Slots pruned because their token went unused (no-shows).",
		"waitingroom_dispatcher_tokens_restored_total":     "COUNTER OrderFailed events handled, by outcome (RESTORED, EXPIRED, FREED, DUPLICATE).",
		"waitingroom_dispatcher_events_published_total":    "COUNTER Outbox events confirmed by the broker, by type.",
		"waitingroom_dispatcher_tick_duration_seconds":     "HISTOGRAM Duration of one admission tick (the issue script round trip, pool wait included).",
		"waitingroom_dispatcher_admission_held":            "GAUGE 1 while an open queue admits nobody, by reason (OUTBOX_BACKLOG: the outbox is at OUTBOX_MAX_BACKLOG; DRAW: the pre-queue is being drawn at the start time).",
		"waitingroom_dispatcher_draw_placed_total":         "COUNTER Pre-queued people given a place by the draw at a queue's start time.",
		"waitingroom_dispatcher_draw_duration_seconds":     "HISTOGRAM Duration of one pre-queue draw by this replica (admission is held meanwhile).",
		"waitingroom_dispatcher_rate_decisions_total":      "COUNTER Decisions of an ADAPTIVE queue's rate controller on a new order-service health report (INCREASE, AT_MAX, DECREASE, AT_MIN, COOLDOWN, HOLD_STALE).",
		"waitingroom_dispatcher_admission_rate_per_second": "GAUGE The rate the queue admits at now, on the queues this replica leads: the configured one, or an ADAPTIVE queue's effective one.",
		"waitingroom_dispatcher_leader":                    "GAUGE 1 while this replica leads the queue.",
		"waitingroom_dispatcher_outbox_backlog":            "GAUGE Events in the queue's outbox not yet confirmed by the broker.",
	}
	for name, w := range want {
		if help[name] != w {
			t.Errorf("%s: %q, want %q", name, help[name], w)
		}
	}
	if len(help) != len(want) {
		t.Errorf("%d metric families registered, want %d", len(help), len(want))
	}
	wantSeries := []string{
		"waitingroom_dispatcher_admission_held{queue=a,reason=OUTBOX_BACKLOG} 1",
		"waitingroom_dispatcher_admission_rate_per_second{queue=a} 122.5",
		"waitingroom_dispatcher_draw_duration_seconds{} 1",
		"waitingroom_dispatcher_draw_placed_total{queue=a} 300",
		"waitingroom_dispatcher_events_published_total{type=TokenIssued} 2",
		"waitingroom_dispatcher_leader{queue=a} 1",
		"waitingroom_dispatcher_outbox_backlog{queue=a} 5",
		"waitingroom_dispatcher_rate_decisions_total{decision=DECREASE,queue=a} 1",
		"waitingroom_dispatcher_tick_duration_seconds{} 1",
		"waitingroom_dispatcher_tokens_expired_total{queue=a} 2",
		"waitingroom_dispatcher_tokens_issued_total{queue=a} 7",
		"waitingroom_dispatcher_tokens_restored_total{outcome=RESTORED,queue=a} 1",
	}
	if got := scrape(t, reg); !slices.Equal(got, wantSeries) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantSeries, "\n"))
	}
}

// Stepping down zeroes the leader gauge and drops the queue's held series;
// no longer relaying drops its backlog; forgetting a deleted queue drops
// every series labelled with it, and only those.
func TestMetricsDropAQueuesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	for _, q := range []string{"a", "b"} {
		m.Leading(q)
		m.Admitted(q, 1, 1)
		m.Held(q, queue.HeldOutboxBacklog)
		m.Backlog(q, 3)
		m.Restored(q, queue.Restored)
		m.Drew(q, 5, time.Millisecond)
	}
	m.SteppedDown("a")
	m.StoppedRelaying("a")
	got := scrape(t, reg)
	for _, s := range []string{"waitingroom_dispatcher_leader{queue=a} 0", "waitingroom_dispatcher_leader{queue=b} 1"} {
		if !slices.Contains(got, s) {
			t.Errorf("after a stepped down: no %q in\n%s", s, strings.Join(got, "\n"))
		}
	}
	for _, s := range got {
		if strings.Contains(s, "queue=a") && (strings.Contains(s, "_admission_held") || strings.Contains(s, "_outbox_backlog")) {
			t.Errorf("after a stepped down: %s left", s)
		}
	}

	m.Forget("a")
	var left []string
	for _, s := range scrape(t, reg) {
		if strings.Contains(s, "queue=") {
			left = append(left, s)
		}
	}
	want := []string{
		"waitingroom_dispatcher_admission_held{queue=b,reason=OUTBOX_BACKLOG} 1",
		"waitingroom_dispatcher_draw_placed_total{queue=b} 5",
		"waitingroom_dispatcher_leader{queue=b} 1",
		"waitingroom_dispatcher_outbox_backlog{queue=b} 3",
		"waitingroom_dispatcher_tokens_expired_total{queue=b} 1",
		"waitingroom_dispatcher_tokens_issued_total{queue=b} 1",
		"waitingroom_dispatcher_tokens_restored_total{outcome=RESTORED,queue=b} 1",
	}
	if !slices.Equal(left, want) {
		t.Errorf("after forgetting a:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(want, "\n"))
	}
}
