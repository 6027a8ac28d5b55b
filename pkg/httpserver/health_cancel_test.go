package httpserver

import (
	"context"
	"testing"
	"time"
)

// TestAGoneProberDoesNotFailReadinessForOthers: the cached answer is shared
// by every prober (load balancer on the API port, kubelet on ops); a probe
// whose client went away must not cache "context canceled" as a failed
// dependency for the next second.
func TestAGoneProberDoesNotFailReadinessForOthers(t *testing.T) {
	redis := &fakeCheck{}
	h := NewHealth(map[string]Check{"redis": func(ctx context.Context) error {
		redis.calls.Add(1)
		return ctx.Err() // a healthy dependency: fails only when the caller gave up
	}})
	h.ttl = time.Hour

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	probe(gone, h.PublicReadyz)

	if got := probe(context.Background(), h.Readyz); got != (answer{200, `{"status":"ready"}`, ""}) {
		t.Errorf("kubelet's probe after a load balancer gave up: %+v, want 200 ready", got)
	}
}
