package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestLogLinesCarryTheirSpan: a record logged with a span's context names
// the span's trace and span ids, also through With and WithGroup; one
// logged without carries neither.
func TestLogLinesCarryTheirSpan(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "svc", "info")
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	log.InfoContext(ctx, "in a span")
	log.With("k", "v").WithGroup("g").WarnContext(ctx, "grouped", "x", 1)
	log.Info("outside")

	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %s", len(lines), buf.String())
	}
	if lines[0]["trace_id"] != tid.String() || lines[0]["span_id"] != sid.String() || lines[0]["service"] != "svc" {
		t.Errorf("line 1 = %v, want trace_id %s span_id %s service svc", lines[0], tid, sid)
	}
	g, _ := lines[1]["g"].(map[string]any)
	if g == nil || g["trace_id"] != tid.String() || g["x"] != 1.0 || lines[1]["k"] != "v" {
		t.Errorf("line 2 = %v, want the ids inside group g beside x", lines[1])
	}
	if _, ok := lines[2]["trace_id"]; ok {
		t.Errorf("line 3 = %v: a record without a span carries a trace_id", lines[2])
	}
}
