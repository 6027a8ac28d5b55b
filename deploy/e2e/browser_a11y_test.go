package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The accessibility audit: axe-core, as deploy/e2e/a11y's lock pins it
// (make test runs npm ci there), in the page of a state, at each of
// auditSizes and once more in the dark colour scheme. Its rules are WCAG
// 2.0, 2.1 and 2.2 A and AA and axe's best practices; a state passes with
// no violation at all.

// auditTags are the axe-core rule tags the audit runs.
var auditTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"}

// auditSize is a screen the page is audited on.
type auditSize struct {
	name          string
	width, height int64
	scale         float64
	mobile        bool
}

// auditSizes: a desktop, the narrowest phone WCAG's reflow asks for, and
// the desktop at 200 % zoom (its CSS viewport halves, its pixels double).
var auditSizes = []auditSize{
	{"1280px", 1280, 800, 1, false},
	{"320px", 320, 640, 1, true},
	{"1280px at 200%", 640, 400, 2, false},
}

// axeSource is axe.min.js, read once.
var axeSource = sync.OnceValues(func() (string, error) {
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "a11y/node_modules/axe-core/axe.min.js")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("the accessibility audit needs axe-core at %s (%v): make test installs it; by hand: (cd deploy/e2e/a11y && npm ci)", p, err)
	}
	return string(b), nil
})

// audited is every state audited in this run, each once: the page shows
// some states in several subtests.
var audited sync.Map

// auditRun runs axe in the page and answers its violations, each as
// "rule (impact): help; nodes".
const auditRun = `(async () => {
  const r = await axe.run(document, { runOnly: { type: 'tag', values: %s }, resultTypes: ['violations'] });
  return r.violations.map((v) => v.id + ' (' + v.impact + '): ' + v.help + '; ' +
    v.nodes.slice(0, 5).map((n) => n.target.join(' ') + ' [' + (n.failureSummary || '').replace(/\s+/g, ' ') + ']').join(', '));
})()`

// audit runs axe-core on the page as it stands, at every audit size and in
// the dark scheme; any violation fails the test. The tab goes back to the
// phone's screen after. state names the page's state; a state already
// audited in this run is not audited again.
func (tb *tab) audit(state string) {
	tb.t.Helper()
	if _, done := audited.LoadOrStore(state, true); done {
		return
	}
	src, err := axeSource()
	if err != nil {
		tb.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	run := func(where string) {
		tb.t.Helper()
		found, err := tb.axe(ctx, src)
		if err != nil {
			tb.t.Fatalf("%s: axe at %s in state %s: %v", tb.name, where, state, err)
		}
		if len(found) > 0 {
			tb.shot("a11y-" + strings.ReplaceAll(where, " ", "-"))
			tb.t.Errorf("%s: state %s at %s: %d accessibility violations:\n  %s", tb.name, state, where, len(found), strings.Join(found, "\n  "))
		}
		if st, err := tb.read(); err == nil && st.ScrollWidth > st.InnerWidth {
			tb.t.Errorf("%s: state %s at %s: the page is %d px wide in a %d px viewport (WCAG 1.4.10 asks for no horizontal scroll)", tb.name, state, where, st.ScrollWidth, st.InnerWidth)
		}
	}
	for _, sz := range auditSizes {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(sz.scale)}
		if sz.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		tb.do(chromedp.EmulateViewport(sz.width, sz.height, opts...))
		run(sz.name)
	}
	tb.colorScheme("dark")
	run("1280px at 200%, dark")
	tb.colorScheme("")
	tb.do(chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	tb.t.Logf("%s: state %s audited (axe-core, %s): at %d sizes and dark", tb.name, state, strings.Join(auditTags, " "), len(auditSizes))
}

// axe runs axe-core (src) in the tab's page and answers its violations.
func (tb *tab) axe(ctx context.Context, src string) ([]string, error) {
	// A reload or a navigation drops axe: inject it where it is missing.
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof axe === 'object'`)); err == nil && !ok {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](src+";0")); err != nil {
			return nil, fmt.Errorf("load axe-core: %w", err)
		}
	}
	tags, _ := json.Marshal(auditTags)
	return chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(auditRun, tags), chromedp.EvalAwaitPromise))
}

// browserAuditCanFail: the audit finds what it is there to find, on a
// page made to break three rules (no lang, an image without alt text, a
// button without a name), so that its silence on the waiting page means
// something.
func browserAuditCanFail(t *testing.T, browser context.Context) {
	src, err := axeSource()
	if err != nil {
		t.Fatal(err)
	}
	tb := openTab(t, browser, "broken", "data:text/html,<!doctype html><title>x</title><main><h1>x</h1><img src='data:,'><button></button></main>")
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	found, err := tb.axe(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, v := range found {
		rules = append(rules, strings.Fields(v)[0])
	}
	slices.Sort(rules)
	if want := []string{"button-name", "html-has-lang", "image-alt"}; !slices.Equal(rules, want) {
		t.Fatalf("axe-core on a page broken three ways found %v, want %v:\n%s", rules, want, strings.Join(found, "\n"))
	}
	t.Logf("the audit finds %v on a page broken to show it", rules)
}

// colorScheme emulates prefers-color-scheme (light, dark; empty: the
// system's).
func (tb *tab) colorScheme(scheme string) { tb.media("prefers-color-scheme", scheme) }

// media emulates one media feature; empty value drops the override.
func (tb *tab) media(feature, value string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	params := emulation.SetEmulatedMediaParams{}
	if value != "" {
		params.Features = []*emulation.MediaFeature{{Name: feature, Value: value}}
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, params); err != nil {
		tb.t.Fatalf("%s: emulate %s: %s: %v", tb.name, feature, value, err)
	}
}

// auditedStates are the states every full run of TestBrowserWaitingRoom
// audits; the test fails when one of them was not reached.
var auditedStates = []string{
	"sign-in", "waiting-paused", "order-form", "confirmed", "already-ordered",
	"link-question", "line-full", "expired", "order-failed", "pass-given-back",
	"challenge", "challenge-refused", "pre-queue", "drawn-place", "bypass", "arabic-rtl",
	"closed", "sold-out", "abandoned", "rate-limited", "alerts-offered", "push-offered",
}

// checkAudited fails t when a state of auditedStates was not audited.
func checkAudited(t *testing.T) {
	t.Helper()
	var missing []string
	for _, s := range auditedStates {
		if _, ok := audited.Load(s); !ok {
			missing = append(missing, s)
		}
	}
	n := 0
	audited.Range(func(any, any) bool { n++; return true })
	if len(missing) > 0 {
		t.Errorf("states never audited: %v", missing)
	}
	t.Logf("accessibility: %d states audited at %d sizes and dark, %d of them required", n, len(auditSizes), len(auditedStates)-len(missing))
}
