package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// spanCtx is a context inside a remote span of trace n, sampled or not.
func spanCtx(n int, sampled bool) (context.Context, string) {
	tid, _ := trace.TraceIDFromHex(fmt.Sprintf("%032x", n+1))
	sid, _ := trace.SpanIDFromHex(fmt.Sprintf("%016x", n+1))
	flags := trace.TraceFlags(0)
	if sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return trace.ContextWithSpanContext(context.Background(), sc), fmt.Sprintf("00-%s-%s-%s", tid, sid, flags)
}

// TestTraceContextTravelsThroughTheQueue: a sampled enter keeps its
// traceparent until the person is admitted (handed to the tick once, then
// dropped) or leaves; an unsampled one keeps nothing; the events a traced
// tick or restore writes carry their traceparent and tracestate; each
// tick reports the interval since the last admitting tick.
func TestTraceContextTravelsThroughTheQueue(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.AdmissionRatePerSec = 50 })
	ctx := context.Background()
	k := redisstore.KeysFor(q)

	// Six people: 0, 2, 4 sampled, 1, 3, 5 not; 4 leaves.
	want := map[string]string{}
	for i := range 6 {
		ectx, tp := spanCtx(i, i%2 == 0)
		u := fmt.Sprintf("u%d", i)
		if _, err := s.Enter(ectx, q, u); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			want[u] = tp
		}
	}
	if n := rdb.HLen(ctx, k.Traces()).Val(); n != 3 {
		t.Fatalf("%d traces kept, want 3 (the sampled enters)", n)
	}
	if _, err := s.Leave(ctx, q, "u4"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.HLen(ctx, k.Traces()).Val(); n != 2 {
		t.Fatalf("%d traces kept after a leave, want 2", n)
	}

	epoch := lead(t, s, q, "me")
	// A first tick only starts the credit: interval 0, nobody admitted.
	r0, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 5)})
	if err != nil || r0.Issued != 0 || r0.Interval != 0 {
		t.Fatalf("first tick: issued %d interval %v err %v, want 0, 0", r0.Issued, r0.Interval, err)
	}
	time.Sleep(150 * time.Millisecond)
	_, tickTP := spanCtx(100, true)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 5),
		TraceParent: tickTP, TraceState: "vendor=1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Issued != 5 {
		t.Fatalf("issued %d, want 5", r.Issued)
	}
	if len(r.Traces) != 2 || r.Traces[0] != want["u0"] || r.Traces[1] != want["u2"] {
		t.Fatalf("tick traces %q, want u0's and u2's %q %q", r.Traces, want["u0"], want["u2"])
	}
	if r.Interval < 150*time.Millisecond || r.Interval > 2*time.Second {
		t.Errorf("interval %v after a 150 ms pause, want the Redis-clock gap", r.Interval)
	}
	if n := rdb.Exists(ctx, k.Traces()).Val(); n != 0 {
		t.Fatalf("traces left after everyone was admitted: %d keys", n)
	}
	issued := 0
	for _, m := range outbox(t, rdb, q) {
		if m.Values["type"] == "TokenIssued" {
			issued++
			if m.Values["tp"] != tickTP || m.Values["ts"] != "vendor=1" {
				t.Errorf("TokenIssued %v: tp/ts %v %v, want the tick's %s vendor=1", m.Values["eid"], m.Values["tp"], m.Values["ts"], tickTP)
			}
		}
	}
	if issued != 5 {
		t.Fatalf("%d TokenIssued, want 5", issued)
	}

	// The next tick, untraced: its interval counts from the last one.
	time.Sleep(20 * time.Millisecond)
	r2, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 5)})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Interval < 20*time.Millisecond || r2.Interval > r.Interval+time.Second || len(r2.Traces) != 0 {
		t.Fatalf("third tick: interval %v (want >= 20ms), traces %q (want none)", r2.Interval, r2.Traces)
	}

	// A traced restore writes its trace into TokenRestored.
	grantToken(t, rdb, q, "buyer", "sec", "tid-1", time.Minute)
	rdb.ZAdd(ctx, k.Active(), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "buyer"})
	c, err := s.Consume(ctx, q, "buyer", "sec", "order-1", 30*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rctx, restoreTP := spanCtx(200, true)
	if o, err := s.Restore(rctx, q, "buyer", c.TokenID, "order-1", true); err != nil || o != queue.Restored {
		t.Fatalf("restore: %s %v", o, err)
	}
	var restored []redis.XMessage
	for _, m := range outbox(t, rdb, q) {
		if m.Values["type"] == "TokenRestored" {
			restored = append(restored, m)
		}
	}
	if len(restored) != 1 || restored[0].Values["tp"] != restoreTP {
		t.Fatalf("TokenRestored entries %v, want one with tp %s", restored, restoreTP)
	}
}
