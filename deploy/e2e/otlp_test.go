package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// span is one received span, flattened: the service that sent it and the
// ids as hex, as a trace viewer shows them.
type span struct {
	Service, Name         string
	Kind                  tracepb.Span_SpanKind
	TraceID, ID, ParentID string
	Attrs                 map[string]string
	Links                 []string // trace ids linked to
	Error                 bool
}

func (s span) String() string {
	return fmt.Sprintf("%s %q (%s) %s parent %s", s.Service, s.Name, s.Kind, s.ID, s.ParentID)
}

// otlpReceiver is an OTLP trace receiver over HTTP (/v1/traces,
// protobuf) and gRPC, keeping every span it is sent.
type otlpReceiver struct {
	HTTPURL, GRPCAddr string

	mu    sync.Mutex
	spans []span
	collector.UnimplementedTraceServiceServer
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in collector.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.keep(&in)
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.HTTPURL = srv.URL

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	collector.RegisterTraceServiceServer(g, r)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	r.GRPCAddr = ln.Addr().String()
	return r
}

// Export is the gRPC side.
func (r *otlpReceiver) Export(_ context.Context, in *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	r.keep(in)
	return &collector.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) keep(in *collector.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{Service: service, Name: s.GetName(), Kind: s.GetKind(),
					TraceID: hex.EncodeToString(s.GetTraceId()), ID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Attrs: attrs(s.GetAttributes()),
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId()))
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		default:
			m[kv.GetKey()] = strings.Trim(fmt.Sprint(v.GetValue()), "&{}")
		}
	}
	return m
}

// trace returns the spans of one trace.
func (r *otlpReceiver) trace(id string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// all returns every span so far.
func (r *otlpReceiver) all() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span(nil), r.spans...)
}

// tree renders spans as an indented tree under their roots (a parent not
// among them makes a span a root), children in name order.
func tree(spans []span) string {
	byID := map[string]bool{}
	kids := map[string][]span{}
	for _, s := range spans {
		byID[s.ID] = true
	}
	var roots []span
	for _, s := range spans {
		if s.ParentID == "" || !byID[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		kids[s.ParentID] = append(kids[s.ParentID], s)
	}
	var b strings.Builder
	var walk func(s span, depth int)
	walk = func(s span, depth int) {
		fmt.Fprintf(&b, "%s%s: %s [%s]", strings.Repeat("  ", depth), s.Service, s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"))
		if fn := s.Attrs["code.function"]; fn != "" {
			fmt.Fprintf(&b, " (%s)", fn[strings.LastIndex(fn, "/")+1:])
		}
		if s.Error {
			b.WriteString(" ERROR")
		}
		b.WriteString("\n")
		ks := kids[s.ID]
		sort.SliceStable(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
		for _, k := range ks {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
