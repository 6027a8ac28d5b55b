package manifests

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// metricKind is how a registered series may be queried.
type metricKind int

const (
	plain     metricKind = iota // counter, gauge: the name itself
	histogram                   // _bucket, _sum, _count
	summary                     // the name (quantiles), _sum, _count
)

// registeredMetrics reads the Go sources of pkg/ and services/ and returns
// every waitingroom_* series they register: prometheus.*Opts literals
// (Namespace + Subsystem + Name, each a string literal or a local string
// variable) and prometheus.NewDesc with a literal full name.
func registeredMetrics(t *testing.T) map[string]metricKind {
	t.Helper()
	out := map[string]metricKind{}
	eachDecl(t, func(decl ast.Decl, strs map[string]string) { collectMetrics(decl, strs, out) })
	return out
}

// eachDecl calls f with every top-level declaration of the Go sources of
// pkg/ and services/ and the string values its identifiers have there:
// package-level consts and vars, and in a function its own
// `ns, sub := "waitingroom", "sse"`.
func eachDecl(t *testing.T, f func(decl ast.Decl, strs map[string]string)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, src := range goSources(t) {
		file, err := parser.ParseFile(fset, src.path, src.text, 0)
		if err != nil {
			t.Fatalf("%s: %v", src.path, err)
		}
		pkgStrs := stringIdents(file.Decls, nil)
		for _, decl := range file.Decls {
			strs := pkgStrs
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				strs = stringIdents([]ast.Decl{fn}, pkgStrs)
			}
			f(decl, strs)
		}
	}
}

// stringIdents maps identifiers to the string literals assigned to them in
// decls (const/var specs, := and = assignments), over the inherited ones.
func stringIdents(decls []ast.Decl, inherited map[string]string) map[string]string {
	strs := map[string]string{}
	for k, v := range inherited {
		strs[k] = v
	}
	for _, decl := range decls {
		if _, isFunc := decl.(*ast.FuncDecl); isFunc && inherited == nil {
			continue // package level only
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch v := n.(type) {
			case *ast.ValueSpec:
				for i, name := range v.Names {
					if i < len(v.Values) {
						if s, ok := stringValue(v.Values[i], strs); ok {
							strs[name.Name] = s
						}
					}
				}
			case *ast.AssignStmt:
				if len(v.Lhs) == len(v.Rhs) {
					for i, l := range v.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							if s, ok := stringValue(v.Rhs[i], strs); ok {
								strs[id.Name] = s
							}
						}
					}
				}
			}
			return true
		})
	}
	return strs
}

// stringValue is a string literal's value, or a known identifier's.
func stringValue(e ast.Expr, strs map[string]string) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			s, err := strconv.Unquote(v.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := strs[v.Name]
		return s, ok
	}
	return "", false
}

// collectMetrics adds the waitingroom_* series registered in node to out.
func collectMetrics(node ast.Node, strs map[string]string, out map[string]metricKind) {
	ast.Inspect(node, func(n ast.Node) bool {
		switch v := n.(type) {
		case *ast.CompositeLit:
			if name, kind, ok := optsName(v, strs); ok {
				out[name] = kind
			}
		case *ast.CallExpr:
			sel, ok := v.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "NewDesc" || len(v.Args) == 0 {
				return true
			}
			if s, ok := stringValue(v.Args[0], strs); ok && strings.HasPrefix(s, "waitingroom_") {
				out[s] = plain
			}
		}
		return true
	})
}

// optsName is the full name and kind of a waitingroom_* series a
// prometheus.*Opts literal declares (Namespace + Subsystem + Name).
func optsName(v *ast.CompositeLit, strs map[string]string) (string, metricKind, bool) {
	sel, ok := v.Type.(*ast.SelectorExpr)
	if !ok {
		return "", plain, false
	}
	kind := plain
	switch sel.Sel.Name {
	case "HistogramOpts":
		kind = histogram
	case "SummaryOpts":
		kind = summary
	case "CounterOpts", "GaugeOpts":
	default:
		return "", plain, false
	}
	parts := map[string]string{}
	for _, el := range v.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		k, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		if s, ok := stringValue(kv.Value, strs); ok {
			parts[k.Name] = s
		}
	}
	var name []string
	for _, p := range []string{parts["Namespace"], parts["Subsystem"], parts["Name"]} {
		if p != "" {
			name = append(name, p)
		}
	}
	full := strings.Join(name, "_")
	return full, kind, strings.HasPrefix(full, "waitingroom_")
}

// seriesNames are the names a registered metric may be queried by.
func seriesNames(reg map[string]metricKind) map[string]bool {
	out := map[string]bool{}
	for name, kind := range reg {
		switch kind {
		case plain:
			out[name] = true
		case histogram:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = true
			}
		case summary:
			for _, s := range []string{"", "_sum", "_count"} {
				out[name+s] = true
			}
		}
	}
	return out
}

type grafanaTarget struct {
	Expr       string          `json:"expr"`
	RefID      string          `json:"refId"`
	Datasource json.RawMessage `json:"datasource"`
}

type grafanaPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []grafanaTarget `json:"targets"`
	Panels  []grafanaPanel  `json:"panels"`
}

type grafanaDashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

// grafanaIntervals are Grafana's interval variables, as a duration PromQL
// parses.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")

func TestGrafanaDashboard(t *testing.T) {
	reg := registeredMetrics(t)
	// The scan must find what docs/API.md and docs/RUNBOOK.md name, or it proves nothing.
	for _, name := range []string{
		"waitingroom_queue_waiting", "waitingroom_sse_streams_open", "waitingroom_http_request_duration_seconds",
		"waitingroom_dispatcher_tokens_issued_total", "waitingroom_orders_transaction_duration_seconds",
		"waitingroom_gateway_enter_total", "waitingroom_orders_outbox_backlog",
	} {
		if _, ok := reg[name]; !ok {
			t.Errorf("the source scan did not find %s (found %v)", name, sortedKeys(reg))
		}
	}
	if reg["waitingroom_http_request_duration_seconds"] != histogram {
		t.Error("the source scan did not see waitingroom_http_request_duration_seconds as a histogram")
	}
	known := seriesNames(reg)
	recorded := recordedNames(t)

	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "waitingroom.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("waitingroom.json: %v", err)
	}
	if d.SchemaVersion != 39 || d.UID == "" || d.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q: want 39 and both set", d.SchemaVersion, d.UID, d.Title)
	}

	vars := map[string]string{}
	for _, v := range d.Templating.List {
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			_ = json.Unmarshal(v.Query, &obj)
			q = obj.Query
		}
		vars[v.Name] = v.Type + " " + q
	}
	if vars["datasource"] != "datasource prometheus" {
		t.Errorf("variable datasource = %q, want a Prometheus datasource variable", vars["datasource"])
	}
	if vars["queue"] != "query label_values(waitingroom_queue_waiting, queue)" {
		t.Errorf("variable queue = %q, want label_values(waitingroom_queue_waiting, queue)", vars["queue"])
	}

	var panels []grafanaPanel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...) // collapsed rows hold their panels
	}
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q does not use the datasource variable: %s", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			// Prometheus's parser, with Grafana's interval variables as
			// a duration ($queue stands inside strings).
			expr, err := promQL.ParseExpr(grafanaIntervals.Replace(tg.Expr))
			if err != nil {
				t.Errorf("panel %q target %s: %v: %s", p.Title, tg.RefID, err, tg.Expr)
				continue
			}
			sels := selectors(expr)
			if len(sels) == 0 {
				t.Errorf("panel %q target %s queries no metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, sel := range sels {
				used[sel.Name] = true
				if !known[sel.Name] && !recorded[sel.Name] {
					t.Errorf("panel %q queries %s, which no service registers and the PrometheusRule does not record", p.Title, sel.Name)
				}
				// An SLO panel shows every SLO, one series each.
				if recorded[sel.Name] && slices.ContainsFunc(sel.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == "slo" }) {
					t.Errorf("panel %q: %s picks SLOs; show them all", p.Title, sel)
				}
			}
		}
	}
	// The SLO row: each SLO's remaining budget and its burn rate over the
	// page and ticket windows, from the recording rules.
	sloRow := -1
	for _, p := range d.Panels {
		if p.Type == "row" && p.Title == "SLOs / error budget" {
			sloRow = p.GridPos.Y
		}
	}
	if sloRow < 0 {
		t.Error(`no row "SLOs / error budget"`)
	}
	for _, p := range panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "slo:") && p.GridPos.Y <= sloRow {
				t.Errorf("panel %q shows SLOs outside their row", p.Title)
			}
		}
	}
	for _, n := range []string{
		"slo:error_budget_remaining:ratio30d", "slo:objective:ratio",
		"slo:sli_error:ratio_rate5m", "slo:sli_error:ratio_rate30m", "slo:sli_error:ratio_rate1h",
		"slo:sli_error:ratio_rate6h", "slo:sli_error:ratio_rate1d", "slo:sli_error:ratio_rate3d",
	} {
		if !recorded[n] {
			t.Errorf("the PrometheusRule records no %s", n)
		}
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
	// The panels the dashboard is for.
	for _, n := range []string{
		"waitingroom_queue_waiting",
		"waitingroom_dispatcher_tokens_issued_total",
		"waitingroom_dispatcher_leader",
		"waitingroom_dispatcher_tokens_expired_total",
		"waitingroom_dispatcher_tokens_restored_total",
		"waitingroom_orders_requests_total",
		"waitingroom_orders_transaction_duration_seconds_bucket",
		"waitingroom_dispatcher_outbox_backlog",
		"waitingroom_orders_outbox_backlog",
		"waitingroom_dispatcher_admission_held",
		"waitingroom_dispatcher_admission_rate_per_second",
		"waitingroom_dispatcher_rate_decisions_total",
		"waitingroom_orders_health_reports_total",
		"waitingroom_dispatcher_draw_placed_total",
		"waitingroom_dispatcher_draw_duration_seconds_bucket",
		"waitingroom_sse_streams_open",
		"waitingroom_sse_delivery_lag_seconds_bucket",
		"waitingroom_gateway_enter_total",
		"waitingroom_http_request_duration_seconds_bucket",
	} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
	// Histograms only through histogram_quantile over their buckets here.
	for _, p := range panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "_bucket") && !strings.Contains(tg.Expr, "histogram_quantile(") {
				t.Errorf("panel %q: raw buckets without histogram_quantile: %s", p.Title, tg.Expr)
			}
		}
	}
}
