package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// newConsoleSystem starts the services the console needs: a gateway in
// dev auth mode (it serves the console and mints tokens), the
// order-service (the audit trail, the report; the gateway's origin
// allowed) and a dispatcher.
func newConsoleSystem(t *testing.T, q string) *browserSystem {
	t.Helper()
	testenv.PurgeAtCleanup(t, testenv.RedisURL(t), q)
	ver, err := auth.NewVerifier(auth.DevSecret)
	if err != nil {
		t.Fatal(err)
	}
	id := testenv.ID(t)
	exchange := "e2e." + id
	amqpURL := testenv.AMQPURL(t)
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(amqpURL, exchange, exchange+".order-failed", exchange+".order-failed.dlq",
			exchange+".queue-changes", exchange+".queue-changes.dlq")
	})
	gwPort, orderPort := testenv.FreePort(t), testenv.FreePort(t)
	common := map[string]string{
		"AUTH_DEV_MODE": "true", "AUTH_JWT_SECRET": "",
		"REDIS_URL": testenv.RedisURL(t), "AMQP_URL": amqpURL, "AMQP_EXCHANGE": exchange,
		"ORDER_FAILED_QUEUE": exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": exchange + ".queue-changes",
	}
	s := &browserSystem{t: t, ver: ver}
	s.order = startOn(t, "order-service", orderPort, merged(common, map[string]string{
		"DATABASE_URL": testenv.PostgresURL(t), "CORS_ALLOWED_ORIGINS": fmt.Sprintf("http://127.0.0.1:%d", gwPort),
		"HISTORY_ROLLUP_INTERVAL": "1s",
	}))
	s.dispatcher = startOn(t, "admission-dispatcher", testenv.FreePort(t), merged(common, map[string]string{"DISPATCH_QUEUES": q}))
	s.gateway = startOn(t, "queue-gateway", gwPort, merged(common, map[string]string{
		"ENTER_RATE_LIMIT_PER_IP": "0", "ORDER_SERVICE_PUBLIC_URL": fmt.Sprintf("http://127.0.0.1:%d", orderPort), "DEFAULT_QUEUE": q,
	}))
	return s
}

// until waits for a JavaScript condition in the tab.
func until(tb *tab, what, cond string, timeout time.Duration) {
	tb.t.Helper()
	deadline := time.Now().Add(timeout)
	for !eval[bool](tb, cond) {
		if time.Now().After(deadline) {
			tb.shot("timeout")
			tb.t.Fatalf("%s: not %s within %v (%s)", tb.name, what, timeout, cond)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBrowserConsole: an operator signs in to the console (the dev token),
// sees the queue's numbers move while people enter, pauses and resumes it
// through the console (each after a confirmation that shows the change and
// says admission stops), finds both changes in the audit trail under their
// subject, and has a change based on a version someone else changed
// refused (412) without overwriting theirs. Every state is audited with
// axe-core. A user's token is refused: 403 on every console and admin
// route of both services, and the console sends them back to sign in.
func TestBrowserConsole(t *testing.T) {
	t.Parallel()
	q := testenv.ID(t)
	s := newConsoleSystem(t, q)
	gw, ord := s.gateway.URL, s.order.URL
	if st, _ := s.call(http.MethodPut, gw+"/admin/v1/queues/"+q, "setup@ops", "admin", map[string]any{}); st != http.StatusCreated {
		t.Fatalf("create the queue: %d", st)
	}
	// Admitting 1 a second, so the line grows while people enter.
	if st, _ := s.call(http.MethodPut, gw+"/admin/v1/queues/"+q, "setup@ops", "admin", map[string]any{"admissionRatePerSec": 1}); st != http.StatusOK {
		t.Fatalf("set the rate: %d", st)
	}

	// A user's token: 403 on every admin route of both services.
	for _, r := range []struct{ method, url string }{
		{http.MethodGet, gw + "/admin/v1/overview"}, {http.MethodGet, gw + "/admin/v1/queues"},
		{http.MethodGet, gw + "/admin/v1/queues/" + q}, {http.MethodPut, gw + "/admin/v1/queues/" + q},
		{http.MethodDelete, gw + "/admin/v1/queues/" + q}, {http.MethodGet, gw + "/admin/v1/queues/" + q + "/texts"},
		{http.MethodPut, gw + "/admin/v1/queues/" + q + "/texts/en"}, {http.MethodDelete, gw + "/admin/v1/queues/" + q + "/texts/en"},
		{http.MethodGet, ord + "/admin/v1/audit"}, {http.MethodGet, ord + "/admin/v1/queues/" + q + "/report"},
		{http.MethodPut, ord + "/admin/v1/products/p-" + q},
	} {
		if st, _ := s.call(r.method, r.url, "mallory", "", map[string]any{}); st != http.StatusForbidden {
			t.Errorf("%s %s with a user's token: %d, want 403", r.method, r.url, st)
		}
		if st, _ := s.call(r.method, r.url, "", "", map[string]any{}); st != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", r.method, r.url, st)
		}
	}

	browser := newBrowser(t)
	tb := openTab(t, browser, "console", gw+"/console")
	tb.do(chromedp.EmulateViewport(1280, 900))
	until(tb, "the sign-in form", `!document.getElementById('signin').hidden && !document.getElementById('dev-form').hidden`, 15*time.Second)
	tb.audit("console-sign-in")
	// A user's token pasted in: refused, back at the sign-in, told why.
	userToken, _ := s.ver.Mint("mallory", "", time.Hour)
	tb.do(chromedp.SendKeys(chromedp.ID("token"), userToken), chromedp.Click(chromedp.CSS("#signin-form button"), chromedp.NodeVisible))
	until(tb, "the refusal of a user's token", `!document.getElementById('signin-error').hidden && document.getElementById('signin-error').textContent.includes('admin')`, 15*time.Second)
	if got := eval[string](tb, `sessionStorage.getItem('waitingroom.console.token') || ''`); got != "" {
		t.Fatalf("a refused token kept in the tab: %q", got)
	}
	tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('dev-subject').value = ''`),
		chromedp.SendKeys(chromedp.ID("dev-subject"), "ann@ops"), chromedp.Click(chromedp.CSS("#dev-form button"), chromedp.NodeVisible))
	row := fmt.Sprintf(`document.querySelector('#queues tr[data-queue=%q]')`, q)
	until(tb, "the queue in the overview", row+` !== null`, 15*time.Second)
	if who := eval[string](tb, `document.getElementById('subject').textContent`); who != "ann@ops" {
		t.Fatalf("signed in as %q, want ann@ops", who)
	}

	// People enter while the console watches: its waiting figure moves.
	waiting := func() string { return eval[string](tb, row+`.querySelector('[data-figure=waiting]').textContent`) }
	first := waiting()
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 150 * time.Millisecond)
			tok, _ := s.ver.Mint(fmt.Sprintf("buyer%02d", i), "", time.Hour)
			req, _ := http.NewRequest(http.MethodPost, gw+"/api/v1/queues/"+q+"/enter", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("enter buyer%02d: %d", i, res.StatusCode)
			}
		})
	}
	seen := map[string]bool{first: true}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < 3 && time.Now().Before(deadline) {
		seen[waiting()] = true
		time.Sleep(200 * time.Millisecond)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) < 3 {
		t.Fatalf("the overview's waiting figure showed %v while 12 people entered: want it to move (3 values or more)", seen)
	}
	tb.audit("console-overview")
	tb.shot("overview")

	// One queue: pause and resume through the controls, each confirmed.
	// Clicked in one evaluation: the overview redraws its rows as its
	// figures change, and a node found before a redraw is gone by the
	// click ("Could not find node with given id").
	until(tb, "the queue's row", fmt.Sprintf(`document.querySelector('#queues tr[data-queue=%q] a') !== null`, q), 10*time.Second)
	eval[bool](tb, fmt.Sprintf(`(document.querySelector('#queues tr[data-queue=%q] a').click(), true)`, q))
	until(tb, "the queue's page", `!document.getElementById('detail').hidden && document.querySelector('#figures dd[data-figure=State]') !== null && document.getElementById('knob-admissionRatePerSec') !== null`, 15*time.Second)
	tb.audit("console-queue")
	tb.shot("queue")
	state := func() string {
		_, v := s.call(http.MethodGet, gw+"/admin/v1/queues/"+q, "check@ops", "admin", nil)
		return fmt.Sprint(v["state"])
	}
	for _, step := range []struct{ button, want string }{{"pause", "PAUSED"}, {"resume", "OPEN"}} {
		until(tb, step.button+" enabled", fmt.Sprintf(`!document.getElementById(%q).disabled`, step.button), 10*time.Second)
		tb.click(step.button)
		until(tb, "the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
		diff := eval[string](tb, `document.querySelector('#confirm-diff tbody').textContent`)
		if !strings.Contains(diff, step.want) {
			t.Fatalf("%s: the confirmation shows %q, want the state going to %s", step.button, diff, step.want)
		}
		if step.want == "PAUSED" {
			if w := eval[string](tb, `document.getElementById('confirm-warning').textContent`); !strings.Contains(w, "Admission stops") {
				t.Fatalf("pause: the confirmation warns %q, want that admission stops", w)
			}
			tb.audit("console-confirm")
		}
		if got := state(); got == step.want {
			t.Fatalf("%s: the queue is %s before the confirmation", step.button, got)
		}
		tb.click("confirm-apply")
		until(tb, "the queue "+step.want, fmt.Sprintf(`document.querySelector('#figures dd[data-figure=State]').textContent === %q`, step.want), 10*time.Second)
		if got := state(); got != step.want {
			t.Fatalf("after %s through the console the queue is %s, want %s", step.button, got, step.want)
		}
	}

	// A stale change: the console read a version, bob changes the rate
	// meanwhile, ann's change of it is refused and bob's stays.
	until(tb, "the fresh version shown", `document.getElementById('knob-state').value === 'OPEN'`, 10*time.Second)
	// The page stops refreshing (as a tab left open does between its
	// reads), keeping the version it read; bob changes the rate; ann
	// then changes it from that page.
	tb.do(chromedp.Evaluate[chromedp.Void](`state.view = 'held'; clearTimeout(state.timer)`))
	time.Sleep(500 * time.Millisecond) // a read under way ends first
	if st, _ := s.call(http.MethodPut, gw+"/admin/v1/queues/"+q, "bob@ops", "admin", map[string]any{"admissionRatePerSec": 3}); st != http.StatusOK {
		t.Fatalf("bob's change: %d", st)
	}
	tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('knob-admissionRatePerSec').value = '7';
		document.getElementById('knobs').requestSubmit()`))
	until(tb, "the confirmation", `document.getElementById('confirm').open`, 5*time.Second)
	tb.click("confirm-apply")
	until(tb, "the refusal", `document.getElementById('detail-status').textContent.includes('someone changed this queue')`, 10*time.Second)
	_, after := s.call(http.MethodGet, gw+"/admin/v1/queues/"+q, "check@ops", "admin", nil)
	if after["admissionRatePerSec"] != float64(3) {
		t.Fatalf("after a stale change the rate is %v, want bob's 3", after["admissionRatePerSec"])
	}

	// The audit trail: ann's pause and resume, under her subject.
	tb.navigate(gw + "/console#/audit")
	anns := `[...document.querySelectorAll('#audit-table tbody tr')].filter((r) => r.textContent.includes(` + fmt.Sprintf("%q", q) + `) && r.querySelector('[data-actor]').textContent === 'ann@ops')`
	deadline = time.Now().Add(20 * time.Second)
	for eval[int](tb, anns+`.length`) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the audit trail shows %d of ann's changes, want 3 (pause, resume, the refused change): %s", eval[int](tb, anns+`.length`),
				eval[string](tb, `document.getElementById('audit-table').textContent`))
		}
		tb.do(chromedp.Click(chromedp.CSS("#audit-form button"), chromedp.NodeVisible))
		time.Sleep(500 * time.Millisecond)
	}
	rows := eval[[]string](tb, anns+`.map((r) => r.textContent)`)
	joined := strings.Join(rows, "\n")
	for _, want := range []string{`state: "OPEN" → "PAUSED"`, `state: "PAUSED" → "OPEN"`, "REFUSED (precondition-failed)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("ann's rows in the audit trail lack %q:\n%s", want, joined)
		}
	}
	tb.audit("console-audit")

	// The report of the last hour: 12 arrivals once the minute is sent;
	// here only that it shows, with its totals.
	tb.navigate(gw + "/console#/report/" + q)
	until(tb, "the report", `!document.getElementById('report-body').hidden`, 20*time.Second)
	tb.audit("console-report")
	tb.shot("report")
	if dir := os.Getenv("E2E_CONSOLE_SHOTS"); dir != "" {
		// The report's first minute is sent once it is over.
		testenv.WaitFor(t, 90*time.Second, "the sale's minute in the report", func() bool {
			_, r := s.call(http.MethodGet, ord+"/admin/v1/queues/"+q+"/report", "shots@ops", "admin", nil)
			totals, _ := r["totals"].(map[string]any)
			return totals["arrivals"] == float64(12)
		})
		consoleShots(t, tb, dir, gw, q)
	}
}

// consoleShots draws the console's overview, one queue and the report at
// 1280 px into dir (make console-screenshots).
func consoleShots(t *testing.T, tb *tab, dir, gw, q string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.EmulateViewport(1280, 900))
	for _, s := range []struct{ name, hash, ready string }{
		{"console-overview", "#/", `document.querySelector('#queues tbody tr') !== null`},
		{"console-queue", "#/q/" + q, `document.querySelector('#chart svg') !== null`},
		{"console-report", "#/report/" + q, `!document.getElementById('report-body').hidden`},
	} {
		tb.navigate(gw + "/console" + s.hash)
		until(tb, s.name, s.ready, 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Fatalf("screenshot %s: %v", s.name, err)
		}
		path := filepath.Join(dir, s.name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}
