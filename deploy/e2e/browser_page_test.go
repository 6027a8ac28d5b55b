package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium; the browser test needs no other browser.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts headless chromium with a fresh profile; it is stopped at
// cleanup. Each tab then gets its own browser context (no shared storage).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser test drives Debian's chromium at %s, which is missing (%v): apt-get install -y chromium", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp's own complaints (unknown protocol events of a newer browser)
	// must not reach t.Logf, which panics after the test ends.
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(string, ...any) {}))
	t.Cleanup(func() { bcancel(); acancel() })
	// The first Do starts the browser; its context must have no deadline, as
	// the browser lives as long as it.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return bctx
}

// tab is one page in its own browser context, on a phone-sized screen.
type tab struct {
	t     *testing.T
	ctx   context.Context
	name  string
	dir   string
	shots int

	mu       sync.Mutex
	problems []string // uncaught exceptions and CSP violations
}

// phone is the screen the page must fit without horizontal scrolling.
const phoneWidth, phoneHeight = 360, 740

// openTab is newTab at url.
func openTab(t *testing.T, browser context.Context, name, url string) *tab {
	t.Helper()
	tb := newTab(t, browser, name)
	tb.navigate(url)
	return tb
}

// newTab opens an empty tab, to be told what to record before its first load.
func newTab(t *testing.T, browser context.Context, name string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, name: name, dir: screenshotDir(t)}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				tb.mu.Lock()
				tb.problems = append(tb.problems, m.String())
				tb.mu.Unlock()
			}
		}
	}()
	tb.do(chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	t.Cleanup(func() {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.problems) > 0 {
			t.Errorf("%s: the page reported problems:\n%s", name, strings.Join(tb.problems, "\n"))
		}
	})
	return tb
}

// navigate loads url in the tab, a new document unless only the fragment changes.
func (tb *tab) navigate(url string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(url))
}

// sentRequest is one request the tab sent, as the browser saw it.
type sentRequest struct {
	method, url string
	headers     map[string]string // names in lower case
	at          time.Time         // when the browser sent it (recordRequests)
}

// sent is the request as sentRequest.
func sent(req *network.Request) sentRequest {
	r := sentRequest{method: req.Method, url: req.URL, headers: map[string]string{}}
	for k, v := range req.Headers {
		r.headers[strings.ToLower(k)] = fmt.Sprint(v)
	}
	return r
}

// requestLog holds every request a tab sent since recordRequests.
type requestLog struct {
	mu   sync.Mutex
	reqs []sentRequest
}

// recordRequests starts recording the tab's requests (the browser's network
// events: the page's fetches, the stream, the worker script).
func (tb *tab) recordRequests() *requestLog {
	tb.t.Helper()
	l := &requestLog{}
	events := chromedp.Events(tb.ctx, network.RequestWillBeSent)
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		tb.t.Fatalf("%s: enable network events: %v", tb.name, err)
	}
	// Ends when the tab's context does.
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			r := sent(ev.Request)
			r.at = time.UnixMicro(int64(ev.WallTime.Float64() * 1e6))
			l.mu.Lock()
			l.reqs = append(l.reqs, r)
			l.mu.Unlock()
		}
	}()
	return l
}

// count is the number of recorded requests that match.
func (l *requestLog) count(match func(sentRequest) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reqs {
		if match(r) {
			n++
		}
	}
	return n
}

// matching returns the recorded requests that match.
func (l *requestLog) matching(match func(sentRequest) bool) []sentRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sentRequest
	for _, r := range l.reqs {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// carrying matches a request that sends jwt: as its bearer token, or in its
// URL (the stream's access_token).
func carrying(jwt string) func(sentRequest) bool {
	return func(r sentRequest) bool {
		return r.headers["authorization"] == "Bearer "+jwt || strings.Contains(r.url, jwt)
	}
}

// holdRequests pauses each request of the tab to a URL that matches pattern
// (the Fetch domain's wildcards) and lets it go on when hold returns. hold
// runs on another goroutine: it must not call t.Fatal.
func (tb *tab) holdRequests(pattern string, hold func(sentRequest)) {
	tb.t.Helper()
	tb.intercept(pattern, func(ev fetch.EventRequestPaused) {
		hold(sent(ev.Request))
		_, _ = chromedp.Call(tb.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
	})
}

// intercept pauses each request of the tab to a URL that matches pattern
// (the Fetch domain's wildcards) and hands it to handle, which must let it
// go on or answer it. handle runs on another goroutine, until the tab's
// context ends: it must not call t.Fatal.
func (tb *tab) intercept(pattern string, handle func(fetch.EventRequestPaused)) {
	tb.t.Helper()
	events := chromedp.Events(tb.ctx, fetch.RequestPaused)
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}}); err != nil {
		tb.t.Fatalf("%s: enable request interception: %v", tb.name, err)
	}
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			handle(ev)
		}
	}()
}

// recordNotes keeps, from the tab's next load on, every text the browser
// check's note shows, in window.checkNotes: the note may show for less time
// than one look at the page takes.
func (tb *tab) recordNotes() {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordNotes}); err != nil {
		tb.t.Fatalf("%s: add the note recorder: %v", tb.name, err)
	}
}

const recordNotes = `window.checkNotes = [];
document.addEventListener('DOMContentLoaded', () => {
  const note = document.getElementById('check-note');
  if (!note) return;
  new MutationObserver(() => {
    const text = note.textContent, seen = window.checkNotes;
    if (text && seen[seen.length - 1] !== text) seen.push(text);
  }).observe(note, { childList: true, characterData: true, subtree: true });
});`

// eval evaluates expr in tb's page; a failure is fatal.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("%s: evaluate %s: %v", tb.name, expr, err)
	}
	return v
}

// screenshotDir is t.TempDir(), or E2E_SCREENSHOT_DIR to keep them.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("E2E_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// do runs actions with a deadline; a failure is fatal, with a screenshot.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.shot("failed")
		tb.t.Fatalf("%s: %v", tb.name, err)
	}
}

func (tb *tab) click(id string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.ID(id), chromedp.NodeVisible))
}

// signIn types a name into the dev sign-in form, after checking the
// suggested one, and waits for the Enter button.
func (tb *tab) signIn(user string) pageState {
	tb.t.Helper()
	tb.signInOnly(user)
	return tb.waitFor("the Enter button", 10*time.Second, func(p pageState) bool {
		return p.Shown["enter"] && !p.EnterDisabled && !p.Shown["identity"]
	})
}

// signInOnly is signIn without waiting for what the page shows next.
func (tb *tab) signInOnly(user string) {
	tb.t.Helper()
	st := tb.waitFor("the sign-in form", 15*time.Second, func(p pageState) bool { return p.Shown["dev-login"] })
	if !strings.HasPrefix(st.Name, "guest-") || len(st.Name) != len("guest-")+4 {
		tb.t.Fatalf("%s: suggested name %q, want guest-xxxx", tb.name, st.Name)
	}
	tb.shot("sign-in")
	tb.audit("sign-in")
	tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('name').value = ''`),
		chromedp.SendKeys(chromedp.ID("name"), user),
		chromedp.Click(chromedp.CSS("#dev-login button"), chromedp.NodeVisible))
}

// shot saves a screenshot as <dir>/<tab>-<nn>-<step>.png, logs its path, and
// checks that the page still fits the phone's width.
func (tb *tab) shot(step string) {
	tb.t.Helper()
	tb.shots++
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Errorf("%s: screenshot %s: %v", tb.name, step, err)
		return
	}
	path := filepath.Join(tb.dir, fmt.Sprintf("%s-%02d-%s.png", tb.name, tb.shots, step))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Errorf("write %s: %v", path, err)
		return
	}
	tb.t.Logf("screenshot %s", path)
	if step == "failed" {
		return
	}
	if st, err := tb.read(); err == nil && st.ScrollWidth > st.InnerWidth {
		tb.t.Errorf("%s at %s: the page is %d px wide on a %d px screen (horizontal scroll)", tb.name, step, st.ScrollWidth, st.InnerWidth)
	}
}

// pageState is what a person sees on the page, read in one evaluation.
type pageState struct {
	Status        string          `json:"status"`
	Kind          string          `json:"kind"`
	Name          string          `json:"name"`
	Position      string          `json:"position"`
	Ahead         string          `json:"ahead"`
	ETA           string          `json:"eta"`
	QueueState    string          `json:"queueState"`
	Progress      int             `json:"progress"`
	Countdown     string          `json:"countdown"`
	Expiry        string          `json:"expiry"`
	OrderID       string          `json:"orderId"`
	FormNote      string          `json:"formNote"`
	Products      []string        `json:"products"`
	Quantities    []string        `json:"quantities"`
	LinkUser      string          `json:"linkUser"`
	CurrentUser   string          `json:"currentUser"`
	UseLink       string          `json:"useLink"`
	KeepIdentity  string          `json:"keepIdentity"`
	CheckNote     string          `json:"checkNote"`
	StartsIn      string          `json:"startsIn"`
	PreQueued     string          `json:"preQueued"`
	DrawNote      string          `json:"drawNote"`
	Shown         map[string]bool `json:"shown"`
	EnterDisabled bool            `json:"enterDisabled"`
	OrderDisabled bool            `json:"orderDisabled"`
	ScrollWidth   int             `json:"scrollWidth"`
	InnerWidth    int             `json:"innerWidth"`
}

func (p pageState) String() string {
	var shown []string
	for id, on := range p.Shown {
		if on {
			shown = append(shown, id)
		}
	}
	return fmt.Sprintf("status %q (%s), position %q, ahead %q, eta %q, line %q, progress %d, countdown %q, expiry %q, order %q, form note %q, products %q, link user %q, current user %q, check note %q, starts in %q, pre-queued %q, shown %v",
		p.Status, p.Kind, p.Position, p.Ahead, p.ETA, p.QueueState, p.Progress, p.Countdown, p.Expiry, p.OrderID, p.FormNote, p.Products,
		p.LinkUser, p.CurrentUser, p.CheckNote, p.StartsIn, p.PreQueued, shown)
}

const readPage = `(() => {
  const $ = (id) => document.getElementById(id);
  const text = (id) => ($(id) ? $(id).textContent.trim() : '');
  const shown = (id) => !!$(id) && $(id).checkVisibility();
  const ids = ['identity', 'dev-login', 'signin-required', 'line', 'figures', 'enter', 'enter-again',
    'turn', 'countdown', 'order-form', 'result', 'switch', 'current-note', 'check', 'prequeue',
    'bypass-note', 'expiry'];
  return {
    status: text('status-text'), kind: $('status') ? $('status').dataset.kind : '',
    name: $('name') ? $('name').value : '',
    position: text('position'), ahead: text('ahead'), eta: text('eta'), queueState: text('queue-state'),
    progress: $('progress') ? Number($('progress').value) : -1,
    linkUser: text('link-user'), currentUser: text('current-user'), useLink: text('use-link'),
    keepIdentity: text('keep-identity'), checkNote: text('check-note'),
    startsIn: text('starts-in'), preQueued: text('pre-queued'), drawNote: text('draw-note'),
    countdown: text('countdown'), expiry: text('expiry'), orderId: text('order-id'), formNote: text('form-note'),
    products: Array.from($('product') ? $('product').options : [], (o) => o.text),
    quantities: Array.from($('quantity') ? $('quantity').options : [], (o) => o.value),
    shown: Object.fromEntries(ids.map((id) => [id, shown(id)])),
    enterDisabled: !!($('enter') && $('enter').disabled), orderDisabled: !!($('order') && $('order').disabled),
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  };
})()`

func (tb *tab) read() (pageState, error) {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](readPage))
	if err != nil {
		return pageState{}, err
	}
	var st pageState
	err = json.Unmarshal(raw, &st)
	return st, err
}

// waitFor reads the page every 50 ms until cond holds; past the deadline the
// test fails with what the page showed last and a screenshot.
func (tb *tab) waitFor(what string, timeout time.Duration, cond func(pageState) bool) pageState {
	tb.t.Helper()
	deadline := time.Now().Add(timeout)
	var last pageState
	var lastErr error
	for {
		st, err := tb.read()
		if err == nil {
			if cond(st) {
				return st
			}
			last = st
		}
		lastErr = err
		if time.Now().After(deadline) {
			tb.shot("timeout")
			tb.t.Fatalf("%s: no %s within %s; the page shows: %v (read error %v)", tb.name, what, timeout, last, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
