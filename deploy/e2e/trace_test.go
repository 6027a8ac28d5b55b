package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// newTraceparent is a sampled W3C traceparent of a fresh trace, and its
// trace and span ids: the caller's span, which the request continues.
func newTraceparent(t *testing.T) (tp, traceID, spanID string) {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	traceID, spanID = hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	return "00-" + traceID + "-" + spanID + "-01", traceID, spanID
}

// TestOneTraceFollowsARestoredOrderAcrossTheBroker runs the three services
// as processes with tracing on, exporting to a receiver in the test (the
// gateway and order-service over OTLP/HTTP, the dispatcher over OTLP/gRPC).
// An order for a product that does not exist fails restorably after its
// token was consumed; the trace the caller started must then hold, under
// one trace id and with each parent link exact:
//
//	order-service  POST /api/v1/orders [SERVER]        (parent: the caller)
//	  order-service  evalsha (Consume) [CLIENT]
//	  order-service  a Postgres statement [CLIENT]
//	  ...
//	    order-service  publish order.failed [PRODUCER]   (from the outbox row)
//	      admission-dispatcher  process order.failed [CONSUMER]
//	        admission-dispatcher  evalsha (Restore) [CLIENT]
//	        admission-dispatcher  publish token.restored [PRODUCER]  (from the Redis outbox)
//
// The second time the order-service's connection to the broker is cut
// before the order and restored 3 s later: OrderFailed waits in the outbox
// meanwhile, and the trace still continues across it. A publish attempt
// during the cut is an error span of its own; when its message reached the
// broker after all (only the confirm was lost), the consumer continues that
// attempt's span, so the process span's parent must be one of the
// attempts, each under the server span. The log lines of the
// failure and the restore carry the trace id. The enter is traced too: the
// admission tick that admitted the person links to its trace.
func TestOneTraceFollowsARestoredOrderAcrossTheBroker(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	id := testenv.ID(t)
	s := newSystemWith(t, systemOptions{id: id, queues: []string{id}, cutOrderBroker: true,
		env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.HTTPURL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "parentbased_always_on",
		},
		dispatcherEnv: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + rcv.GRPCAddr, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_INSECURE": "true",
		}})
	s.setup(5)

	for _, cut := range []bool{false, true} {
		user := map[bool]string{false: "gil", true: "hal"}[cut]
		enterTP, enterTrace, _ := newTraceparent(t)
		st, v, err := s.request(http.MethodPost, s.gateway.URL+"/api/v1/queues/"+s.q+"/enter", user, "", "", nil, 0,
			"traceparent", enterTP)
		if err != nil || st != http.StatusOK {
			t.Fatalf("enter %s: %d %v %v", user, st, v, err)
		}
		adm := s.waitAdmitted(user)
		token := adm["token"].(string)
		failedBefore := s.count("order.failed")

		if cut {
			s.orderBroker.Cut()
		}
		orderTP, orderTrace, callerSpan := newTraceparent(t)
		st, v, err = s.request(http.MethodPost, s.order.URL+"/api/v1/orders", user, "", token,
			map[string]any{"queueId": s.q, "productId": "no-such-tee", "quantity": 1}, 0, "traceparent", orderTP)
		if err != nil || st != http.StatusBadRequest || v["type"] == nil || !strings.HasSuffix(v["type"].(string), "product-not-found") {
			t.Fatalf("order of a missing product: %d %v %v, want 400 product-not-found", st, v, err)
		}
		if cut {
			time.Sleep(3 * time.Second)
			if n := s.count("order.failed"); n != failedBefore {
				t.Fatalf("%d OrderFailed published while the order-service's broker was cut", n-failedBefore)
			}
			s.orderBroker.Restore()
		}
		again := s.waitAdmitted(user)
		if again["token"] != token {
			t.Fatalf("%s after the failed order: token %v, want %s back", user, again["token"], token)
		}

		// The trace is complete once both publishes have been exported: the
		// services export in their own batches, so the dispatcher's
		// TokenRestored span can arrive before the order-service's
		// OrderFailed one (which ends only on the broker's confirm).
		var spans []span
		testenv.WaitFor(t, 20*time.Second, "the trace's OrderFailed and TokenRestored publish spans", func() bool {
			spans = rcv.trace(orderTrace)
			return slices.ContainsFunc(spans, func(s span) bool {
				return s.Service == "order-service" && s.Name == "publish order.failed" && !s.Error
			}) &&
				find(spans, "admission-dispatcher", "publish token.restored", tracepb.Span_SPAN_KIND_PRODUCER) != nil
		})
		t.Logf("broker cut: %v; trace %s:\n%s", cut, orderTrace, tree(spans))
		checkRestoreTrace(t, spans, callerSpan)
		// The log lines written inside those spans name the trace.
		for _, l := range []struct {
			svc *testenv.Service
			msg string
		}{{s.order, "order failed"}, {s.dispatcher, "order failure handled"}} {
			if !logged(l.svc.Tail(), l.msg, orderTrace) {
				t.Errorf("no %q log line with trace_id %s in:\n%s", l.msg, orderTrace, l.svc.Tail())
			}
		}

		// The tick that admitted the person links to the enter's trace.
		testenv.WaitFor(t, 10*time.Second, "an admission tick linking to the enter's trace", func() bool {
			for _, sp := range rcv.all() {
				if sp.Service == "admission-dispatcher" && sp.Name == "admission tick" && contains(sp.Links, enterTrace) {
					return true
				}
			}
			return false
		})
		if server := find(rcv.trace(enterTrace), "queue-gateway", "POST /api/v1/queues/:queueId/enter", tracepb.Span_SPAN_KIND_SERVER); server == nil {
			t.Errorf("no gateway server span in the enter's trace %s", enterTrace)
		}
	}
}

// checkRestoreTrace checks the spans of one restored order's trace: every
// expected span once where it must be, each parent exact.
func checkRestoreTrace(t *testing.T, spans []span, callerSpan string) {
	t.Helper()
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.ID] = s
	}
	under := func(s span, ancestor string) bool {
		for p, ok := s, true; ok; p, ok = byID[p.ParentID] {
			if p.ParentID == ancestor {
				return true
			}
		}
		return false
	}
	server := find(spans, "order-service", "POST /api/v1/orders", tracepb.Span_SPAN_KIND_SERVER)
	if server == nil {
		t.Fatal("no order-service server span")
	}
	if server.ParentID != callerSpan {
		t.Errorf("server span's parent %s, want the caller's span %s", server.ParentID, callerSpan)
	}
	var consume, statements int
	for _, s := range spans {
		if s.Service != "order-service" || !under(s, server.ID) {
			continue
		}
		if s.Name == "evalsha" && strings.Contains(s.Attrs["code.function"], "Consume") {
			consume++
		}
		if s.Attrs["db.system"] == "postgresql" || s.Attrs["db.system.name"] == "postgresql" {
			statements++
		}
	}
	if consume != 1 || statements < 2 {
		t.Errorf("under the server span: %d consume scripts (want 1), %d Postgres statements (want >= 2: the failed order, its outbox row)",
			consume, statements)
	}
	// Each attempt to publish OrderFailed is a span under the server span;
	// at least one succeeded. An attempt during the cut is an error span,
	// yet its message may still have reached the broker (the confirm was
	// what got lost): the relay then publishes again, and the consumer's
	// parent is whichever attempt's message it took first.
	publishes := map[string]bool{}
	succeeded := 0
	for _, s := range spans {
		if s.Service != "order-service" || s.Name != "publish order.failed" || s.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
			continue
		}
		if !under(s, server.ID) {
			t.Errorf("publish attempt %s is not under the server span", s)
		}
		publishes[s.ID] = true
		if !s.Error {
			succeeded++
		}
	}
	if succeeded == 0 {
		t.Fatalf("no successful publish of order.failed among %d attempts", len(publishes))
	}
	processes := map[string]bool{}
	for _, s := range spans {
		if s.Service == "admission-dispatcher" && s.Name == "process order.failed" && s.Kind == tracepb.Span_SPAN_KIND_CONSUMER {
			if !publishes[s.ParentID] {
				t.Errorf("process span %s: its parent is none of the %d publish attempts", s, len(publishes))
			}
			processes[s.ID] = true
		}
	}
	if len(processes) == 0 {
		t.Fatal("no process order.failed span")
	}
	restores, restored := 0, 0
	for _, s := range spans {
		switch {
		case s.Service == "admission-dispatcher" && s.Name == "evalsha" && strings.Contains(s.Attrs["code.function"], "Restore"):
			restores++
		case s.Service == "admission-dispatcher" && s.Name == "publish token.restored" && s.Kind == tracepb.Span_SPAN_KIND_PRODUCER:
			restored++
		default:
			continue
		}
		if !processes[s.ParentID] {
			t.Errorf("%s: its parent is not a process span", s)
		}
	}
	if restores == 0 || restored != 1 {
		t.Errorf("%d restore script spans (want >= 1), %d TokenRestored publishes (want 1)", restores, restored)
	}
}

// find returns the one span of service with name and kind; nil if there is
// none, and the first if several.
func find(spans []span, service, name string, kind tracepb.Span_SpanKind) *span {
	for i, s := range spans {
		if s.Service == service && s.Name == name && s.Kind == kind {
			return &spans[i]
		}
	}
	return nil
}

// logged reports whether a JSON log line with msg carries trace_id.
func logged(log, msg, traceID string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"trace_id":"`+traceID+`"`) {
			return true
		}
	}
	return false
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
