package wire

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const healthEvery = 200 * time.Millisecond

// healthOf decodes the order.health reports on the test's queue q so far,
// checking what every report must carry.
func (s *stack) healthOf(q string) []queue.OrderHealth {
	s.t.Helper()
	var out []queue.OrderHealth
	for _, d := range s.health.Of(events.TypeName(&waitingroomv1.OrderHealth{})) {
		var m waitingroomv1.OrderHealth
		if err := proto.Unmarshal(d.Body, &m); err != nil {
			s.t.Fatalf("OrderHealth body: %v", err)
		}
		if d.RoutingKey != events.RoutingKeyOrderHealth || d.MessageID != m.GetEventId() || m.GetUserId() != "" {
			s.t.Fatalf("report %v delivered with key %q, id %q", &m, d.RoutingKey, d.MessageID)
		}
		if m.GetQueueId() == q {
			out = append(out, events.HealthFrom(&m))
		}
	}
	return out
}

// healthSum adds up reports.
type healthSum struct {
	reports                               int
	orders, created, unavailable, withP95 int64
	sources                               map[string]bool
}

func sumHealth(rs []queue.OrderHealth) healthSum {
	sum := healthSum{reports: len(rs), sources: map[string]bool{}}
	for _, r := range rs {
		sum.orders += r.Orders
		sum.created += r.Created
		sum.unavailable += r.Unavailable
		if r.P95 > 0 {
			sum.withP95++
		}
		sum.sources[r.Source] = true
	}
	return sum
}

// Orders placed through the running service are reported on order.health
// within a few seconds: every attempt once, with a duration, from one named
// replica; then the queue goes on reporting, at zero.
func TestHealthReportsTheOrders(t *testing.T) {
	// Not parallel: it counts every report published in time, which the
	// package's floods running beside it could delay past the interval.
	const n = 12
	s := newStack(t, stackOptions{health: healthEvery})
	s.product("p1", 100)
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("healthy-%02d", i)
	}
	secrets := s.admit(users...)
	var wg sync.WaitGroup
	res := make([]response, n)
	for i, u := range users {
		wg.Go(func() { res[i] = s.order(u, secrets[u], "p1", 1) })
	}
	wg.Wait()
	for i, r := range res {
		if r.status != http.StatusCreated {
			t.Fatalf("order %d: %d %s", i, r.status, r.body)
		}
	}

	testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("reports adding up to %d orders", n), func() bool {
		return sumHealth(s.healthOf(s.q)).orders >= n
	})
	sum := sumHealth(s.healthOf(s.q))
	if sum.orders != n || sum.created != n || sum.unavailable != 0 || sum.withP95 == 0 || len(sum.sources) != 1 || sum.sources[""] {
		t.Fatalf("reports sum to %d orders, %d created, %d unavailable, %d with a P95, sources %v; want %d, %d, 0, some, one named",
			sum.orders, sum.created, sum.unavailable, sum.withP95, sum.sources, n, n)
	}
	var last queue.OrderHealth
	// In the order they were made: two reports published a moment apart
	// (one whose confirm was slow) may arrive the other way round.
	reports := s.healthOf(s.q)
	slices.SortFunc(reports, func(a, b queue.OrderHealth) int { return a.At.Compare(b.At) })
	for _, r := range reports {
		// A P95 without orders is an interval that ended while an attempt
		// was still being answered: its age is sampled (health.go), so a
		// report can show a P95 with 0 orders, never orders without one.
		if r.Interval < healthEvery/2 || r.Interval > 10*healthEvery || (r.Orders > 0 && r.P95 == 0) || r.P95 > 5*time.Second ||
			r.OutboxBacklog < 0 || r.OutboxBacklog > n || r.Created > r.Orders || !r.At.After(last.At) {
			t.Fatalf("report %+v after %+v: want an interval near %v, a P95 where there are orders, at most %d events waiting, later than the last", r, last, healthEvery, n)
		}
		last = r
	}
	// Idle, the queue is still reported on, with nothing.
	testenv.WaitFor(t, 5*time.Second, "a report of an idle interval", func() bool {
		rs := s.healthOf(s.q)
		return len(rs) > sum.reports && rs[len(rs)-1].Orders == 0
	})
	rs := s.healthOf(s.q)
	// Every report received was counted: published (confirmed before it
	// could be delivered), or dropped, when its confirm did not come in
	// time, which a busy machine's broker can make happen though the
	// message went through. A dropped report is never sent again.
	var published, dropped int
	for _, line := range strings.Split(string(s.getOps("/metrics").body), "\n") {
		_, _ = fmt.Sscanf(line, `waitingroom_orders_health_reports_total{result="published"} %d`, &published)
		_, _ = fmt.Sscanf(line, `waitingroom_orders_health_reports_total{result="dropped"} %d`, &dropped)
	}
	if published+dropped < len(rs) || published == 0 {
		t.Fatalf("/metrics: %d reports published, %d dropped; want at least the %d received counted, some published", published, dropped, len(rs))
	}
	t.Logf("%d orders: %d reports, the busiest %+v; then idle %+v", n, sum.reports, busiest(rs), rs[len(rs)-1])
}

func busiest(rs []queue.OrderHealth) queue.OrderHealth {
	var b queue.OrderHealth
	for _, r := range rs {
		if r.Orders > b.Orders {
			b = r
		}
	}
	return b
}

// With the order database cut, every attempt is reported unavailable
// (the reports go straight to the broker, not through the database);
// once it is back, orders are created again.
func TestHealthReportsTheDatabaseDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{pgProxy: true, health: healthEvery})
	s.restorer()
	s.product("p1", 10)
	secrets := s.admit("cut-1", "cut-2", "cut-3", "after")

	s.pgProxy.Cut()
	for _, u := range []string{"cut-1", "cut-2", "cut-3"} {
		if r := s.order(u, secrets[u], "p1", 1); r.status != http.StatusServiceUnavailable {
			t.Fatalf("order by %s with the database cut: %d %s", u, r.status, r.body)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "reports of 3 unavailable attempts", func() bool {
		return sumHealth(s.healthOf(s.q)).unavailable >= 3
	})
	sum := sumHealth(s.healthOf(s.q))
	if sum.orders != 3 || sum.created != 0 || sum.unavailable != 3 || sum.withP95 == 0 {
		t.Fatalf("with the database cut: %d orders, %d created, %d unavailable, %d with a P95; want 3, 0, 3, some",
			sum.orders, sum.created, sum.unavailable, sum.withP95)
	}

	s.pgProxy.Restore()
	testenv.WaitFor(t, 30*time.Second, "an order once the database is back", func() bool {
		return s.order("after", secrets["after"], "p1", 1).status == http.StatusCreated
	})
	testenv.WaitFor(t, 5*time.Second, "a report of the created order", func() bool {
		return sumHealth(s.healthOf(s.q)).created == 1
	})
	after := sumHealth(s.healthOf(s.q))
	// The retries while the database came back may add unavailable attempts;
	// what was reported before stays.
	if after.created != 1 || after.orders < 4 || after.unavailable < 3 || after.orders-after.created != after.unavailable {
		t.Fatalf("after the database came back: %d orders, %d created, %d unavailable; want 1 created, every other attempt unavailable",
			after.orders, after.created, after.unavailable)
	}
	t.Logf("database cut: 3 attempts reported unavailable; back: %d orders, %d created, %d unavailable", after.orders, after.created, after.unavailable)
}
