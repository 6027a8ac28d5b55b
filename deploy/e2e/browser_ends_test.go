package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// browserEnds walks the page through the ends a person can meet besides a
// confirmed order, and the waits in between that no other subtest holds
// still long enough to audit: a sale that closed, a product sold out
// under the buyer's hand, a place given up while away, the gateway's rate
// limit, and the browser check at work. Each is audited (axe-core).
// served is a queue the dispatcher admits from; the others no dispatcher
// serves.
func browserEnds(t *testing.T, s *browserSystem, browser context.Context, served, idle string) {
	closed, abandoned, limited, checking := idle+"-c", idle+"-a", idle+"-l", idle+"-w"
	testenv.PurgeAtCleanup(t, testenv.RedisURL(t), closed, abandoned, limited, checking)
	t.Cleanup(func() {
		for _, q := range []string{closed, abandoned, limited, checking} {
			s.call(http.MethodDelete, s.gateway.URL+"/admin/v1/queues/"+q, "ops", auth.RoleAdmin, nil)
		}
	})

	// A closed sale: Enter says so, and offers nothing more.
	s.queue(closed, map[string]any{"state": "OPEN"})
	if st, v := s.call(http.MethodDelete, s.gateway.URL+"/admin/v1/queues/"+closed, "ops", auth.RoleAdmin, nil); st != http.StatusNoContent && st != http.StatusOK {
		t.Fatalf("close %s: %d %v", closed, st, v)
	}
	tb := openTab(t, browser, "closed", s.gateway.URL+"/q/"+closed)
	tb.signIn("shopper-closed")
	tb.click("enter")
	st := tb.waitFor("the closed message", 10*time.Second, func(p pageState) bool { return p.Kind == "error" })
	if st.Status != "This sale is closed: the line takes no new entries." || st.Shown["figures"] {
		t.Fatalf("a closed sale: %v", st)
	}
	tb.shot("closed")
	tb.audit("closed")

	// Sold out between the form and the order: the order is refused and
	// the page says so, for good.
	s.queue(served, map[string]any{"admissionRatePerSec": 5, "activationSpreadMs": 0})
	s.product(served, "last-one", "Last one", 1, 900)
	tb = openTab(t, browser, "sold-out", s.gateway.URL+"/q/"+served)
	tb.signIn("shopper-sold-out")
	tb.click("enter")
	tb.waitFor("the order form", 15*time.Second, func(p pageState) bool {
		return p.Shown["order-form"] && len(p.Quantities) > 0 && !p.OrderDisabled
	})
	if code, v := s.call(http.MethodPut, s.order.URL+"/admin/v1/products/last-one", "ops", auth.RoleAdmin,
		map[string]any{"queueId": served, "name": "Last one", "stock": 0, "priceCents": 900}); code != http.StatusOK {
		t.Fatalf("sell the last one: %d %v", code, v)
	}
	tb.click("order")
	st = tb.waitFor("the sold-out message", 15*time.Second, func(p pageState) bool { return p.Kind == "error" })
	if st.Status != "Sold out: there is not enough stock left for this order." || st.Shown["order-form"] || st.Shown["result"] {
		t.Fatalf("sold out: %v", st)
	}
	tb.shot("sold-out")
	tb.audit("sold-out")

	// Away past the grace: the sweep's marker (status ABANDONED, as
	// issue.lua writes it) is what the page finds when it comes back.
	s.queue(abandoned, map[string]any{"state": "PAUSED"})
	const gone = "shopper-abandoned"
	if err := testenv.Redis(t).Set(context.Background(), redisstore.KeysFor(abandoned).Status(gone), redisstore.StatusAbandoned+":7", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	tb = openTab(t, browser, "abandoned", s.gateway.URL+"/q/"+abandoned)
	tb.signInOnly(gone)
	st = tb.waitFor("the abandoned message", 10*time.Second, func(p pageState) bool { return p.Shown["enter-again"] })
	if !strings.HasPrefix(st.Status, "Your place was given up") || st.Kind != "warn" || st.Shown["figures"] {
		t.Fatalf("abandoned: %v", st)
	}
	tb.shot("abandoned")
	tb.audit("abandoned")

	// Rate limited: the gateway's 429 (answered here by the browser's
	// Fetch domain, as the gateway words it): the page says it is busy,
	// tries again after Retry-After by itself, and gets in once the limit
	// lifts.
	s.queue(limited, map[string]any{"state": "PAUSED"})
	tb = openTab(t, browser, "rate-limited", s.gateway.URL+"/q/"+limited)
	tb.signIn("shopper-limited")
	var refused atomic.Int32
	lift := tb.answerRequests("*/api/v1/queues/"+limited+"/enter", func() (int64, string, string) {
		refused.Add(1)
		return http.StatusTooManyRequests, "2", `{"type":"` + problem.TypeRateLimited + `","title":"Too Many Requests","status":429,"detail":"too many enters from this address"}`
	})
	tb.click("enter")
	st = tb.waitFor("the rate-limit wait", 10*time.Second, func(p pageState) bool {
		return strings.HasPrefix(p.Status, "The waiting room is busy; trying again in")
	})
	if st.Kind != "wait" || st.Shown["figures"] {
		t.Fatalf("rate limited: %v", st)
	}
	tb.shot("rate-limited")
	tb.audit("rate-limited")
	lift()
	st = tb.waitFor("a place once the limit lifts", 15*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if n := refused.Load(); n < 1 {
		t.Fatalf("%d enters refused, want at least 1", n)
	}
	t.Logf("rate limited: %d enters answered 429, then place %s", refused.Load(), st.Position)

	// The browser check at work: a 30-bit challenge keeps the worker busy
	// for minutes, long enough to audit the page while it counts.
	s.queue(checking, map[string]any{"state": "PAUSED", "enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 30})
	tb = openTab(t, browser, "checking", s.gateway.URL+"/q/"+checking)
	tb.signIn("shopper-checking")
	tb.click("enter")
	st = tb.waitFor("the browser check", 15*time.Second, func(p pageState) bool { return p.Shown["check"] && p.CheckNote != "" })
	tb.shot("challenge")
	tb.audit("challenge")
	tb.navigate("about:blank") // stop the worker
}

// answerRequests answers each request of the tab to a URL that matches
// pattern with answer's status, Retry-After and problem+json body, without
// sending it, until the returned lift is called.
func (tb *tab) answerRequests(pattern string, answer func() (status int64, retryAfter, body string)) (lift func()) {
	tb.t.Helper()
	var lifted atomic.Bool
	tb.intercept(pattern, func(ev fetch.EventRequestPaused) {
		if lifted.Load() {
			_, _ = chromedp.Call(tb.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			return
		}
		status, retry, body := answer()
		_, _ = chromedp.Call(tb.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
			RequestID: ev.RequestID, ResponseCode: status, Body: []byte(body),
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/problem+json"}, {Name: "Retry-After", Value: retry}},
		})
	})
	return func() {
		tb.t.Helper()
		lifted.Store(true)
		ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
		defer cancel()
		if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
			tb.t.Fatalf("%s: disable request interception: %v", tb.name, err)
		}
	}
}
