package httpserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// wantUp is the exposition the collector must give for redis and
// postgres up or down.
func wantUp(redis, postgres string) string {
	return `
# HELP waitingroom_dependency_up 1 while the readiness check of the dependency passes, 0 while it fails (checked at scrape time, cached for a second).
# TYPE waitingroom_dependency_up gauge
waitingroom_dependency_up{dependency="postgres",service="order-service"} ` + postgres + `
waitingroom_dependency_up{dependency="redis",service="order-service"} ` + redis + `
`
}

func TestDependencyUpFollowsTheReadinessChecks(t *testing.T) {
	redis, postgres := &fakeCheck{}, &fakeCheck{}
	postgres.fail(errors.New("dial tcp 10.0.0.7:5432: connect: connection refused"))
	h := NewHealth(map[string]Check{"redis": redis.check, "postgres": postgres.check})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(h.Collector("order-service")); err != nil {
		t.Fatal(err)
	}

	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantUp("1", "0")), "waitingroom_dependency_up"); err != nil {
		t.Fatalf("postgres down: %v", err)
	}
	// The scrape filled the cache /readyz reads, and the other way round:
	// a probe and a scrape within the second run each check once.
	if a := probe(context.Background(), h.Readyz); a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "connection refused") {
		t.Errorf("readyz after the scrape: %d %s, want 503 naming postgres", a.status, a.body)
	}
	if r, p := redis.calls.Load(), postgres.calls.Load(); r != 1 || p != 1 {
		t.Errorf("checks ran redis %d, postgres %d times; want once each for a scrape and a probe within the cache's second", r, p)
	}

	// Postgres back, redis gone: within the second the cached answer
	// stands; after it, the scrape says what the checks say now.
	postgres.fail(nil)
	redis.fail(errors.New("i/o timeout"))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantUp("1", "0")), "waitingroom_dependency_up"); err != nil {
		t.Errorf("within the cache's second: %v", err)
	}
	h.mu.Lock()
	h.checked = h.checked.Add(-h.ttl) // the second has passed
	h.mu.Unlock()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantUp("0", "1")), "waitingroom_dependency_up"); err != nil {
		t.Errorf("after the second: %v", err)
	}
	if r, p := redis.calls.Load(), postgres.calls.Load(); r != 2 || p != 2 {
		t.Errorf("checks ran redis %d, postgres %d times; want twice each", r, p)
	}
}

func TestDependencyUpWithoutChecksIsEmpty(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewHealth(nil).Collector("admission-dispatcher"))
	if n, err := testutil.GatherAndCount(reg, "waitingroom_dependency_up"); err != nil || n != 0 {
		t.Errorf("%d series (%v), want none: a service without dependencies has nothing to report", n, err)
	}
}
