package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// elsewhereHooks, run before the page's own script, let the test hide the
// tab (headless Chromium's tab is always in view: document.hidden and
// visibilityState are answered from window.__hidden, and __setHidden
// sends visibilitychange), and record what the page does with the
// Notification API and Web Audio: every permission request, every
// notification made (headless Chromium shows none), every tone.
const elsewhereHooks = `(() => {
  let hidden = false;
  Object.defineProperty(Document.prototype, 'hidden', { configurable: true, get: () => hidden });
  Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
  window.__setHidden = (h) => { hidden = h; document.dispatchEvent(new Event('visibilitychange')); };
  window.__asked = 0;
  window.__notes = [];
  window.__tones = 0;
  const N = window.Notification;
  function Recorded(title, opts = {}) {
    window.__notes.push({ title, body: opts.body || '', tag: opts.tag || '', lang: opts.lang || '' });
    return { close() {}, set onclick(f) {} };
  }
  Object.defineProperty(Recorded, 'permission', { get: () => N.permission });
  Recorded.requestPermission = () => { window.__asked++; return N.requestPermission(); };
  window.Notification = Recorded;
  const osc = AudioContext.prototype.createOscillator;
  AudioContext.prototype.createOscillator = function () { window.__tones++; return osc.call(this); };
})()`

// elsewhere is what the hooks recorded.
type elsewhere struct {
	Asked int `json:"asked"`
	Notes []struct {
		Title, Body, Tag, Lang string
	} `json:"notes"`
	Tones      int    `json:"tones"`
	Title      string `json:"title"`
	Permission string `json:"permission"`
	Note       string `json:"note"`
	AskShown   bool   `json:"askShown"`
}

func (tb *tab) elsewhere() elsewhere {
	tb.t.Helper()
	var e elsewhere
	raw := eval[[]byte](tb, `({ asked: window.__asked, notes: window.__notes, tones: window.__tones, title: document.title,
	  permission: Notification.permission, note: document.getElementById('alert-note').textContent,
	  askShown: document.getElementById('alert-notify').checkVisibility() })`)
	if err := json.Unmarshal(raw, &e); err != nil {
		tb.t.Fatal(err)
	}
	return e
}

// browserElsewhere: a person waits with the page in another tab. While
// waiting the page offers a chime and a notification, and asks the
// browser for notifications only when the button is clicked. Granted,
// the turn in a hidden tab makes one notification (the turn's heading and
// sentence, tagged with the queue), two tones, and the title says it is
// the turn until the tab is seen again. In view, no notification.
func browserElsewhere(t *testing.T, s *browserSystem, b context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 5, "activationSpreadMs": 0})
	s.product(q, "pin", "Pin", 5, 500)
	tb := newTab(t, b, "elsewhere")
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: elsewhereHooks}); err != nil {
		t.Fatalf("add the hooks: %v", err)
	}
	tb.navigate(s.gateway.URL + "/q/" + q)
	tb.signIn("shopper-elsewhere")
	tb.click("enter")
	tb.waitFor("place 1", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if e := tb.elsewhere(); e.Asked != 0 || !e.AskShown || e.Permission != "default" || e.Note != "" {
		t.Fatalf("waiting, nothing clicked: %+v, want the offer shown and the browser not asked", e)
	}
	tb.shot("alerts-offered")
	tb.audit("alerts-offered")

	tb.click("alert-sound")
	if e := tb.elsewhere(); e.Tones != 2 || eval[string](tb, `localStorage.sound`) != "on" {
		t.Fatalf("the sound chosen: %d tones (want the 2 of its sample), stored %q", e.Tones, eval[string](tb, `localStorage.sound`))
	}
	tb.click("alert-notify")
	if e := tb.elsewhere(); e.Asked != 1 {
		t.Fatalf("the notification button clicked: the browser asked %d times, want 1", e.Asked)
	}
	// Headless Chromium answers the request itself; the person's yes is
	// given here as the browser would keep it for the origin.
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: s.gateway.URL, BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID,
	}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	tb.do(chromedp.Reload())
	tb.waitFor("place 1 again", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	e := tb.elsewhere()
	if e.Permission != "granted" || e.AskShown || e.Note != "A notification will tell you, even in another tab." || e.Asked != 0 {
		t.Fatalf("granted: %+v", e)
	}

	tb.do(chromedp.Evaluate[chromedp.Void](`window.__setHidden(true)`))
	s.queue(q, map[string]any{"state": "OPEN"})
	tb.waitFor("the turn", 15*time.Second, func(p pageState) bool { return p.Shown["turn"] })
	e = tb.elsewhere()
	if len(e.Notes) != 1 || e.Notes[0].Title != "It is your turn" || e.Notes[0].Body != "It is your turn! Order before your pass expires." ||
		e.Notes[0].Tag != "turn:"+q || e.Notes[0].Lang != "en" {
		t.Fatalf("the turn in a hidden tab: notifications %+v, want one", e.Notes)
	}
	if e.Tones != 2 || e.Title != "✓ It is your turn – Waiting room" {
		t.Fatalf("the turn in a hidden tab: %d tones (want 2), title %q", e.Tones, e.Title)
	}
	tb.do(chromedp.Evaluate[chromedp.Void](`window.__setHidden(false)`))
	if e := tb.elsewhere(); e.Title != "Waiting room" || len(e.Notes) != 1 {
		t.Fatalf("seen again: title %q, %d notifications", e.Title, len(e.Notes))
	}

	// In view, the turn makes no notification (and keeps the title).
	other := newTab(t, b, "in-view")
	octx, ocancel := context.WithTimeout(other.ctx, 10*time.Second)
	defer ocancel()
	if _, err := chromedp.Call(octx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: elsewhereHooks}); err != nil {
		t.Fatalf("add the hooks: %v", err)
	}
	if _, err := chromedp.CallBrowser(octx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: s.gateway.URL, BrowserContextID: chromedp.FromContext(other.ctx).BrowserContextID,
	}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	other.navigate(s.gateway.URL + "/q/" + q)
	other.signIn("shopper-in-view")
	other.click("enter")
	other.waitFor("the turn", 15*time.Second, func(p pageState) bool { return p.Shown["turn"] })
	if e := other.elsewhere(); len(e.Notes) != 0 || e.Title != "Waiting room" || e.Tones != 0 {
		t.Fatalf("the turn in view: %+v, want no notification, the title kept, no sound (not chosen)", e)
	}
	if code, v := s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q+"/position", "shopper-elsewhere", "", nil); code != http.StatusOK || v["state"] != "ADMITTED" {
		t.Fatalf("the person in the hidden tab: %d %v", code, v)
	}
	t.Logf("in another tab: asked for notifications once, on the click; at the turn 1 notification, 2 tones, the title changed and put back")
}
