package manifests

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/token"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// runbookBase is where every alert's runbook_url points; the anchor is the
// alert's name in lower case, a heading of docs/RUNBOOK.md.
const runbookBase = "https://github.com/waitingroom/waitingroom/blob/main/docs/RUNBOOK.md#"

// foreignSeries are the series the rules may read that no service of ours
// registers, with who exports them. Every entry must be used by a rule.
var foreignSeries = map[string]string{
	// kube-state-metrics: PodRestarting.
	"kube_pod_container_status_restarts_total": "kube-state-metrics",
	// RabbitMQ's own exporter (the rabbitmq_prometheus plugin, per-object
	// metrics): the depth of the OrderFailed dead-letter queue. The services
	// register no dead-letter metric: a message is dead-lettered by the
	// broker (x-delivery-limit) without the consumer seeing it.
	"rabbitmq_queue_messages_ready": "rabbitmq_prometheus (per-object)",
}

// The SLOs the issue asks for, and the recording windows each has.
var (
	sloNames   = []string{"position-availability", "position-latency", "enter-availability", "enter-latency", "admission-punctuality", "order-availability"}
	sloWindows = []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"}
)

// burn is one side of a burn-rate condition: the error ratio over window
// above threshold.
type burn struct {
	window    string
	threshold float64
}

func (b burn) String() string { return fmt.Sprintf("%s > %.6g", b.window, b.threshold) }

// burnPolicy is the Google SRE workbook's multi-window, multi-burn-rate
// alerting: per severity two (long, short) window pairs and the factor of
// the error budget both windows must burn above.
var burnPolicy = map[string][]struct {
	long, short string
	factor      float64
}{
	"page":   {{"1h", "5m", 14.4}, {"6h", "30m", 6}},
	"ticket": {{"1d", "2h", 3}, {"3d", "6h", 1}},
}

// ruleEnv is what the rule checks compare the rules with.
type ruleEnv struct {
	// series are the names the services' metrics are queried by
	// (seriesNames of registeredMetrics).
	series map[string]bool
	// buckets are the literal bucket bounds of the services' histograms, by
	// the histogram's name; nil where they are not a literal list.
	buckets map[string][]float64
	// foreign are the allowed series no service registers.
	foreign map[string]string
	// runbook is docs/RUNBOOK.md's sections, by anchor.
	runbook map[string]string
}

// promQL parses with the default options, as Prometheus does.
var promQL = parser.NewParser(parser.Options{})

// checkRules parses content, a Prometheus rules file, with Prometheus's own
// rule and PromQL parsers and returns its groups and every problem: what
// rulefmt refuses (a bad expression, template, name or field), a metric
// that is neither recorded here, registered by a service nor allowed, a
// histogram bucket that is not one of the histogram's bounds, and an alert
// without severity page or ticket, `for`, summary, description, or a
// runbook_url whose section exists and tells what it means, how to confirm,
// what to do and how to know it is fixed.
func checkRules(content []byte, env ruleEnv) (*rulefmt.RuleGroups, []string) {
	groups, errs := rulefmt.Parse(content, false, model.LegacyValidation, promQL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var problems []string
	for _, err := range errs {
		problems = append(problems, err.Error())
	}
	if groups == nil {
		return nil, problems
	}
	recorded := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			expr, err := promQL.ParseExpr(r.Expr)
			if err != nil {
				continue // rulefmt said so already
			}
			for _, sel := range selectors(expr) {
				problems = append(problems, checkSelector(g.Name, name, sel, recorded, env)...)
			}
			if r.Alert != "" {
				problems = append(problems, checkAlert(g.Name, r, env)...)
			}
		}
	}
	return groups, problems
}

// selectors are the vector selectors of expr, those inside range
// selectors and subqueries too.
func selectors(expr parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

func checkSelector(group, rule string, sel *parser.VectorSelector, recorded map[string]bool, env ruleEnv) []string {
	at := fmt.Sprintf("group %s, rule %s", group, rule)
	name := sel.Name
	if name == "" {
		return []string{fmt.Sprintf("%s: %s selects no metric by name", at, sel)}
	}
	switch {
	case recorded[name], env.series[name]:
	case env.foreign[name] != "":
		return nil
	default:
		return []string{fmt.Sprintf("%s reads %s, which no service registers, no rule here records and is not on the allow-list", at, name)}
	}
	hist, isBucket := strings.CutSuffix(name, "_bucket")
	if !isBucket {
		return nil
	}
	var problems []string
	for _, m := range sel.LabelMatchers {
		if m.Name != "le" {
			continue
		}
		bounds, known := env.buckets[hist]
		le, err := strconv.ParseFloat(m.Value, 64)
		switch {
		case m.Type != labels.MatchEqual || err != nil:
			problems = append(problems, fmt.Sprintf("%s: %s: want le=\"<a bucket bound>\", got %s", at, name, m))
		case !known || bounds == nil:
			problems = append(problems, fmt.Sprintf("%s: %s: the bounds of %s are no literal list in the source, le=%q cannot be checked", at, name, hist, m.Value))
		case !slices.Contains(bounds, le):
			problems = append(problems, fmt.Sprintf("%s: %s: le=%q is no bucket bound of %s %v: it selects nothing, every event would count as bad", at, name, m.Value, hist, bounds))
		case m.Value != strconv.FormatFloat(le, 'f', -1, 64) || !strings.Contains(m.Value, "."):
			// Prometheus 3 writes whole bounds as "1.0" where the client
			// library writes "1": only a bound with a fraction reads the
			// same on both.
			problems = append(problems, fmt.Sprintf("%s: %s: le=%q is spelled differently by Prometheus 2 and 3; use a bound with a fraction", at, name, m.Value))
		}
	}
	return problems
}

// runbookParts are what every alert's runbook section says.
var runbookParts = []string{"**What it means.**", "**Confirm.**", "**Do.**", "**Fixed when.**"}

func checkAlert(group string, r rulefmt.Rule, env ruleEnv) []string {
	at := fmt.Sprintf("group %s, alert %s", group, r.Alert)
	var problems []string
	if s := r.Labels["severity"]; s != "page" && s != "ticket" {
		problems = append(problems, fmt.Sprintf("%s: severity %q, want page or ticket", at, s))
	}
	if r.For <= 0 {
		problems = append(problems, at+": no `for`: one bad evaluation would fire it")
	}
	for _, k := range []string{"summary", "description"} {
		if strings.TrimSpace(r.Annotations[k]) == "" {
			problems = append(problems, fmt.Sprintf("%s: no %s annotation", at, k))
		}
	}
	anchor := strings.ToLower(r.Alert)
	if got, want := r.Annotations["runbook_url"], runbookBase+anchor; got != want {
		problems = append(problems, fmt.Sprintf("%s: runbook_url %q, want %q", at, got, want))
	}
	section, ok := env.runbook[anchor]
	if !ok {
		return append(problems, fmt.Sprintf("%s: docs/RUNBOOK.md has no section #%s", at, anchor))
	}
	for _, part := range runbookParts {
		if !strings.Contains(section, part) {
			problems = append(problems, fmt.Sprintf("%s: its runbook section #%s lacks %s", at, anchor, part))
		}
	}
	return problems
}

// runbookSections reads a markdown document into its sections, by the
// anchor GitHub gives each heading; a section runs to the next heading of
// any level.
func runbookSections(t *testing.T, doc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var anchor string
	var body strings.Builder
	flush := func() {
		if anchor != "" {
			if _, dup := out[anchor]; dup {
				t.Errorf("docs/RUNBOOK.md: two headings with the anchor #%s", anchor)
			}
			out[anchor] = body.String()
		}
		body.Reset()
	}
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			flush()
			anchor = githubAnchor(strings.TrimLeft(line, "#"))
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return out
}

var notInAnchor = regexp.MustCompile(`[^a-z0-9 _-]`)

// githubAnchor is the id GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func githubAnchor(heading string) string {
	s := notInAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), "")
	return strings.ReplaceAll(s, " ", "-")
}

// histogramBuckets reads the literal Buckets of every waitingroom_*
// histogram the services register: nil where they are not a literal list
// (prometheus.ExponentialBuckets), prometheus.DefBuckets where none are set.
func histogramBuckets(t *testing.T) map[string][]float64 {
	t.Helper()
	defBuckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	out := map[string][]float64{}
	eachDecl(t, func(decl ast.Decl, strs map[string]string) {
		ast.Inspect(decl, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			name, kind, ok := optsName(lit, strs)
			if !ok || kind != histogram {
				return true
			}
			out[name] = defBuckets
			for _, el := range lit.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Buckets") {
					out[name] = floatList(kv.Value)
				}
			}
			return true
		})
	})
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// floatList is the value of a []float64{...} literal of numbers, or nil.
func floatList(e ast.Expr) []float64 {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []float64
	for _, el := range lit.Elts {
		b, ok := el.(*ast.BasicLit)
		if !ok || (b.Kind != token.FLOAT && b.Kind != token.INT) {
			return nil
		}
		v, err := strconv.ParseFloat(b.Value, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// realRuleEnv is the environment of the repository: the services'
// metrics and docs/RUNBOOK.md.
func realRuleEnv(t *testing.T) ruleEnv {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "RUNBOOK.md"))
	if err != nil {
		t.Fatal(err)
	}
	return ruleEnv{
		series:  seriesNames(registeredMetrics(t)),
		buckets: histogramBuckets(t),
		foreign: foreignSeries,
		runbook: runbookSections(t, string(doc)),
	}
}

// renderedRules is the PrometheusRule every kustomization renders, decoded
// strictly into the operator's type, and its groups as a rules file.
func renderedRules(t *testing.T, dir string) (*monitoringv1.PrometheusRule, []byte) {
	t.Helper()
	r := render(t, dir)
	if len(r.rules) != 1 {
		t.Fatalf("k8s/%s: %d PrometheusRules, want 1", dir, len(r.rules))
	}
	var pr *monitoringv1.PrometheusRule
	for _, v := range r.rules {
		pr = v
	}
	// The operator hands Prometheus spec as a rules file: the same fields.
	content, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return pr, content
}

// recordedNames are the recording rules' names of the base's
// PrometheusRule.
func recordedNames(t *testing.T) map[string]bool {
	t.Helper()
	pr, _ := renderedRules(t, "base")
	out := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = true
			}
		}
	}
	return out
}

func TestPrometheusRule(t *testing.T) {
	env := realRuleEnv(t)
	pr, content := renderedRules(t, "base")
	if pr.Labels[partOf] != "waitingroom" {
		t.Errorf("PrometheusRule %s: labels %v, want %s=waitingroom", pr.Name, pr.Labels, partOf)
	}
	groups, problems := checkRules(content, env)
	for _, p := range problems {
		t.Error(p)
	}
	if groups == nil {
		t.FailNow()
	}

	// Every allowed foreign series is read by some rule.
	read := map[string]bool{}
	var alerts []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := promQL.ParseExpr(r.Expr)
			if err != nil {
				continue
			}
			for _, sel := range selectors(expr) {
				read[sel.Name] = true
			}
			if r.Alert != "" {
				alerts = append(alerts, r)
			}
		}
	}
	for _, name := range sortedKeys(foreignSeries) {
		if !read[name] {
			t.Errorf("%s is on the allow-list but no rule reads it", name)
		}
	}

	// The alerts the issue asks for, each with its runbook section; and no
	// runbook section under "Alerts" without its alert.
	names := map[string]bool{}
	for _, a := range alerts {
		names[a.Alert] = true
	}
	for _, want := range []string{
		"QueueWithoutLeader", "QueueNotAdmitting", "AdmissionRateOffTarget",
		"DispatcherOutboxBacklogGrowing", "OrderOutboxBacklogGrowing", "OrderFailedDeadLettered", "QueueChangesDeadLettered",
		"OrderErrorRatioHigh", "SSEDeliveryLagHigh",
		"RedisUnreachable", "RabbitMQUnreachable", "PostgresUnreachable", "PodRestarting",
	} {
		if !names[want] {
			t.Errorf("no alert %s", want)
		}
	}
	for anchor, section := range env.runbook {
		if strings.Contains(section, runbookParts[0]) && !slices.ContainsFunc(sortedKeys(names), func(n string) bool { return strings.ToLower(n) == anchor }) {
			t.Errorf("docs/RUNBOOK.md: section #%s reads like an alert's, but there is no such alert", anchor)
		}
	}

	checkSLOs(t, groups)
	checkDeadLetterQueue(t, groups)
}

// checkSLOs: every SLO has its recording windows, an objective, and a page
// and a ticket burn-rate alert that follow the workbook with that
// objective's budget.
func checkSLOs(t *testing.T, groups *rulefmt.RuleGroups) {
	t.Helper()
	recorded := map[string]map[string]bool{} // slo -> record names
	objective := map[string]float64{}
	alerts := map[string][]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			slo := r.Labels["slo"]
			switch {
			case r.Record == "slo:objective:ratio":
				v, ok := vectorOf(r.Expr)
				if !ok || v <= 0.9 || v >= 1 {
					t.Errorf("SLO %s: objective %q, want vector(x) with 0.9 < x < 1", slo, r.Expr)
				}
				objective[slo] = v
			case r.Record != "" && slo != "":
				if recorded[slo] == nil {
					recorded[slo] = map[string]bool{}
				}
				recorded[slo][r.Record] = true
			case r.Alert != "" && slo != "":
				alerts[slo] = append(alerts[slo], r)
			}
		}
	}
	if got := sortedKeys(objective); !slices.Equal(got, sortedCopy(sloNames)) {
		t.Errorf("SLOs with an objective: %v, want %v", got, sortedCopy(sloNames))
	}
	for _, slo := range sloNames {
		want := []string{"slo:sli_errors:rate5m", "slo:sli_requests:rate5m"}
		for _, w := range sloWindows {
			want = append(want, "slo:sli_error:ratio_rate"+w)
		}
		for _, rec := range want {
			if !recorded[slo][rec] {
				t.Errorf("SLO %s: no recording rule %s{slo=%q}", slo, rec, slo)
			}
		}
		budget := 1 - objective[slo]
		severities := map[string]bool{}
		for _, a := range alerts[slo] {
			sev := a.Labels["severity"]
			severities[sev] = true
			if a.Alert != alerts[slo][0].Alert {
				t.Errorf("SLO %s: alerts %s and %s; want one name, a page and a ticket rule", slo, a.Alert, alerts[slo][0].Alert)
			}
			got, err := burnPairs(a.Expr, slo)
			if err != nil {
				t.Errorf("SLO %s, %s alert: %v", slo, sev, err)
				continue
			}
			var wantPairs [][2]burn
			for _, p := range burnPolicy[sev] {
				wantPairs = append(wantPairs, [2]burn{{p.long, p.factor * budget}, {p.short, p.factor * budget}})
			}
			if !samePairs(got, wantPairs) {
				t.Errorf("SLO %s, %s alert: burns %v, want %v (budget %g)", slo, sev, got, wantPairs, budget)
			}
		}
		if len(alerts[slo]) != 2 || !severities["page"] || !severities["ticket"] {
			t.Errorf("SLO %s: %d burn-rate alerts with severities %v, want a page and a ticket", slo, len(alerts[slo]), sortedKeys(severities))
		}
	}
}

// vectorOf reads `vector(<number>)`.
func vectorOf(expr string) (float64, bool) {
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		return 0, false
	}
	call, ok := e.(*parser.Call)
	if !ok || call.Func.Name != "vector" || len(call.Args) != 1 {
		return 0, false
	}
	return constant(call.Args[0])
}

// constant evaluates an expression of numbers and + - * /.
func constant(e parser.Expr) (float64, bool) {
	switch v := e.(type) {
	case *parser.NumberLiteral:
		return v.Val, true
	case *parser.ParenExpr:
		return constant(v.Expr)
	case *parser.BinaryExpr:
		l, okl := constant(v.LHS)
		r, okr := constant(v.RHS)
		if !okl || !okr {
			return 0, false
		}
		switch v.Op {
		case parser.ADD:
			return l + r, true
		case parser.SUB:
			return l - r, true
		case parser.MUL:
			return l * r, true
		case parser.DIV:
			return l / r, true
		}
	}
	return 0, false
}

// burnPairs reads a burn-rate alert's expression, an `or` of `and`s of two
// comparisons `slo:sli_error:ratio_rate<window>{slo="<slo>"} > <number>`,
// into its window pairs.
func burnPairs(expr, slo string) ([][2]burn, error) {
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var pairs [][2]burn
	var walk func(parser.Expr) error
	walk = func(e parser.Expr) error {
		e = unparen(e)
		b, ok := e.(*parser.BinaryExpr)
		if !ok {
			return fmt.Errorf("%s: want (long > x and short > x) or ...", e)
		}
		switch b.Op {
		case parser.LOR:
			if err := walk(b.LHS); err != nil {
				return err
			}
			return walk(b.RHS)
		case parser.LAND:
			l, err := burnOf(b.LHS, slo)
			if err != nil {
				return err
			}
			r, err := burnOf(b.RHS, slo)
			if err != nil {
				return err
			}
			pairs = append(pairs, [2]burn{l, r})
			return nil
		}
		return fmt.Errorf("%s: want or / and, got %s", b, b.Op)
	}
	return pairs, walk(e)
}

// unparen is e without the parentheses around it.
func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

func burnOf(e parser.Expr, slo string) (burn, error) {
	e = unparen(e)
	b, ok := e.(*parser.BinaryExpr)
	if !ok || b.Op != parser.GTR || b.ReturnBool {
		return burn{}, fmt.Errorf("%s: want ratio > threshold", e)
	}
	vs, ok := b.LHS.(*parser.VectorSelector)
	window, isRatio := strings.CutPrefix(vs.Name, "slo:sli_error:ratio_rate")
	if !ok || !isRatio {
		return burn{}, fmt.Errorf("%s: want slo:sli_error:ratio_rate<window> on the left", b.LHS)
	}
	if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
		return m.Name == "slo" && m.Type == labels.MatchEqual && m.Value == slo
	}) {
		return burn{}, fmt.Errorf("%s: does not select slo=%q", vs, slo)
	}
	th, ok := constant(b.RHS)
	if !ok {
		return burn{}, fmt.Errorf("%s: the threshold is no number", b.RHS)
	}
	return burn{window, th}, nil
}

func samePairs(a, b [][2]burn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		for j := range 2 {
			if a[i][j].window != b[i][j].window || math.Abs(a[i][j].threshold-b[i][j].threshold) > 1e-12 {
				return false
			}
		}
	}
	return true
}

// checkDeadLetterQueue: the dead-letter alerts watch the queues pkg/broker
// declares for the ORDER_FAILED_QUEUE and QUEUE_CHANGES_QUEUE the manifests
// configure, each of them, and nothing else.
func checkDeadLetterQueue(t *testing.T, groups *rulefmt.RuleGroups) {
	t.Helper()
	data := theConfigMap(t, render(t, "base")).Data
	dlqs := map[string]int{data["ORDER_FAILED_QUEUE"] + ".dlq": 0, data["QUEUE_CHANGES_QUEUE"] + ".dlq": 0}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			e, err := promQL.ParseExpr(r.Expr)
			if err != nil {
				continue
			}
			for _, sel := range selectors(e) {
				if sel.Name != "rabbitmq_queue_messages_ready" {
					continue
				}
				i := slices.IndexFunc(sel.LabelMatchers, func(m *labels.Matcher) bool {
					_, known := dlqs[m.Value]
					return m.Name == "queue" && m.Type == labels.MatchEqual && known
				})
				if i < 0 {
					t.Errorf("%s: %s selects none of the dead-letter queues %v (ORDER_FAILED_QUEUE, QUEUE_CHANGES_QUEUE + \".dlq\")", r.Alert, sel, sortedKeys(dlqs))
					continue
				}
				dlqs[sel.LabelMatchers[i].Value]++
			}
		}
	}
	for q, n := range dlqs {
		if n == 0 {
			t.Errorf("no rule watches the dead-letter queue %s", q)
		}
	}
}

// TestCheckRulesCatchesBrokenRules feeds the checks deliberate breakage:
// each case is one rule beside a good one, and must be refused for its
// reason, while the good rule alone passes.
func TestCheckRulesCatchesBrokenRules(t *testing.T) {
	env := realRuleEnv(t)
	env.runbook = map[string]string{
		"queuewithoutleader": "**What it means.** **Confirm.** **Do.** **Fixed when.**",
		"halfwritten":        "**What it means.** **Confirm.**",
	}
	const good = `
      - alert: QueueWithoutLeader
        expr: max by (queue) (waitingroom_queue_waiting) > 0 unless on (queue) max by (queue) (waitingroom_dispatcher_leader) > 0
        for: 1m
        labels: {severity: page}
        annotations:
          summary: s
          description: d
          runbook_url: ` + runbookBase + `queuewithoutleader
      - record: slo:test:ratio
        expr: sum(rate(waitingroom_http_request_duration_seconds_bucket{le="0.25"}[5m]))
`
	file := func(rule string) []byte {
		return []byte("groups:\n  - name: test\n    rules:" + good + rule)
	}
	if _, problems := checkRules(file(""), env); len(problems) != 0 {
		t.Fatalf("the good rules were refused: %q", problems)
	}
	alert := func(name, expr, extra string) string {
		return `
      - alert: ` + name + `
        expr: ` + expr + `
        for: 5m
        labels: {severity: ticket}
        annotations:
          summary: s
          description: d
          runbook_url: ` + runbookBase + strings.ToLower(name) + extra
	}
	for _, c := range []struct {
		name, rule, want string
	}{
		{"unknown metric", alert("QueueWithoutLeader", "waitingroom_dispatcher_leaders > 0", ""),
			"reads waitingroom_dispatcher_leaders, which no service registers"},
		{"histogram read by its bare name", alert("QueueWithoutLeader", "waitingroom_http_request_duration_seconds > 1", ""),
			"reads waitingroom_http_request_duration_seconds, which no service registers"},
		{"recording rule that is not here", alert("QueueWithoutLeader", "slo:sli_error:ratio_rate1h > 0.01", ""),
			"reads slo:sli_error:ratio_rate1h, which no service registers"},
		{"bad PromQL", alert("QueueWithoutLeader", "sum(rate(waitingroom_dispatcher_leader[5m])", ""),
			"could not parse expression"},
		{"bad template", alert("QueueWithoutLeader", "up == 0", "\n          extra: '{{ $labels.queue '"),
			`annotation "extra"`},
		{"no runbook section", alert("LeaderLost", "waitingroom_dispatcher_leader == 0", ""),
			"docs/RUNBOOK.md has no section #leaderlost"},
		{"runbook section missing parts", alert("HalfWritten", "waitingroom_dispatcher_leader == 0", ""),
			"lacks **Do.**"},
		{"runbook_url to another section", strings.Replace(alert("HalfWritten", "waitingroom_dispatcher_leader == 0", ""), "#halfwritten", "#queuewithoutleader", 1),
			`want "` + runbookBase + `halfwritten"`},
		{"le that is no bucket bound", "\n      - record: slo:bad:ratio\n        expr: sum(rate(waitingroom_http_request_duration_seconds_bucket{le=\"0.2\"}[5m]))",
			`le="0.2" is no bucket bound`},
		{"le spelled as Prometheus 3 does not", "\n      - record: slo:bad:ratio\n        expr: sum(rate(waitingroom_http_request_duration_seconds_bucket{le=\"1\"}[5m]))",
			"spelled differently by Prometheus 2 and 3"},
		{"no severity", strings.Replace(alert("QueueWithoutLeader", "waitingroom_dispatcher_leader == 0", ""), "{severity: ticket}", "{team: ops}", 1),
			`severity "", want page or ticket`},
		{"no for", strings.Replace(alert("QueueWithoutLeader", "waitingroom_dispatcher_leader == 0", ""), "for: 5m", "for: 0s", 1),
			"no `for`"},
		{"unknown field", "\n      - record: slo:bad:ratio\n        expr: vector(1)\n        fro: 5m",
			"field fro not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, problems := checkRules(file(c.rule), env)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("want a problem containing %q, got %q", c.want, problems)
			}
		})
	}
}

// TestBurnPairsReadsTheWorkbookShape: the SLO check tells a right burn-rate
// alert from wrong windows, factors and selectors.
func TestBurnPairsReadsTheWorkbookShape(t *testing.T) {
	const slo = "x"
	page := [][2]burn{{{"1h", 14.4 * 0.001}, {"5m", 14.4 * 0.001}}, {{"6h", 6 * 0.001}, {"30m", 6 * 0.001}}}
	for _, c := range []struct {
		name, expr string
		ok         bool
	}{
		{"right", `(slo:sli_error:ratio_rate1h{slo="x"} > (14.4 * 0.001) and slo:sli_error:ratio_rate5m{slo="x"} > (14.4 * 0.001))
			or (slo:sli_error:ratio_rate6h{slo="x"} > (6 * 0.001) and slo:sli_error:ratio_rate30m{slo="x"} > 0.006)`, true},
		{"short window swapped", `(slo:sli_error:ratio_rate1h{slo="x"} > (14.4 * 0.001) and slo:sli_error:ratio_rate30m{slo="x"} > (14.4 * 0.001))
			or (slo:sli_error:ratio_rate6h{slo="x"} > (6 * 0.001) and slo:sli_error:ratio_rate5m{slo="x"} > (6 * 0.001))`, false},
		{"factor of another budget", `(slo:sli_error:ratio_rate1h{slo="x"} > (14.4 * 0.01) and slo:sli_error:ratio_rate5m{slo="x"} > (14.4 * 0.01))
			or (slo:sli_error:ratio_rate6h{slo="x"} > (6 * 0.001) and slo:sli_error:ratio_rate30m{slo="x"} > (6 * 0.001))`, false},
		{"one pair only", `slo:sli_error:ratio_rate1h{slo="x"} > (14.4 * 0.001) and slo:sli_error:ratio_rate5m{slo="x"} > (14.4 * 0.001)`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := burnPairs(c.expr, slo)
			if err != nil {
				t.Fatal(err)
			}
			if samePairs(got, page) != c.ok {
				t.Errorf("%v: same as the page policy %v: %v, want %v", got, page, !c.ok, c.ok)
			}
		})
	}
	for _, bad := range []string{
		`slo:sli_error:ratio_rate1h{slo="y"} > 0.0144 and slo:sli_error:ratio_rate5m{slo="y"} > 0.0144`, // another SLO
		`slo:sli_error:ratio_rate1h{slo="x"} > 0.0144 unless slo:sli_error:ratio_rate5m{slo="x"} > 0.0144`,
		`slo:sli_error:ratio_rate1h{slo="x"} > bool 0.0144 and slo:sli_error:ratio_rate5m{slo="x"} > 0.0144`,
		`slo:sli_errors:rate5m{slo="x"} > 0.0144 and slo:sli_error:ratio_rate5m{slo="x"} > 0.0144`,
	} {
		if got, err := burnPairs(bad, slo); err == nil {
			t.Errorf("%s: read as %v, want an error", bad, got)
		}
	}
}

// TestRunbookAnchors: headings become GitHub's anchors, code blocks are no
// headings.
func TestRunbookAnchors(t *testing.T) {
	doc := "# Runbook\nintro\n## QueueWithoutLeader\nbody\n```sh\n# not a heading\n```\n### Service-level objectives (SLOs)\nslo text\n"
	got := runbookSections(t, doc)
	want := map[string]string{
		"runbook":                       "intro\n",
		"queuewithoutleader":            "body\n```sh\n# not a heading\n```\n",
		"service-level-objectives-slos": "slo text\n",
	}
	if len(got) != len(want) {
		t.Errorf("sections %q, want %q", sortedKeys(got), sortedKeys(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("#%s: %q, want %q", k, got[k], v)
		}
	}
	if got := githubAnchor(" SSEDeliveryLagHigh "); got != "ssedeliverylaghigh" {
		t.Errorf("githubAnchor(SSEDeliveryLagHigh) = %q", got)
	}
}
