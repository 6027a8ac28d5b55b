package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// focus is the element that has the keyboard focus, and whether it shows
// it: :focus-visible, with the page's ring (an outline of 2 px or more).
type focus struct {
	ID      string `json:"id"`
	Tag     string `json:"tag"`
	Visible bool   `json:"visible"`
	Ring    bool   `json:"ring"`
}

func (tb *tab) focused() focus {
	tb.t.Helper()
	raw := eval[[]byte](tb, `(() => {
	  const e = document.activeElement, cs = getComputedStyle(e);
	  return { id: e.id, tag: e.tagName.toLowerCase(), visible: e.matches(':focus-visible'),
	    ring: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 };
	})()`)
	var f focus
	if err := json.Unmarshal(raw, &f); err != nil {
		tb.t.Fatal(err)
	}
	return f
}

// press sends keys (kb's names) to the focused element.
func (tb *tab) press(keys ...string) {
	tb.t.Helper()
	for _, k := range keys {
		tb.do(chromedp.KeyEvent(k))
	}
}

// tabTo presses Tab until the control id has the focus, at most within
// presses, and checks that every control on the way shows its focus.
func (tb *tab) tabTo(id string, within int) int {
	tb.t.Helper()
	for n := 1; n <= within; n++ {
		tb.press(kb.Tab)
		f := tb.focused()
		if f.Tag != "body" && (!f.Visible || !f.Ring) {
			tb.t.Fatalf("%s: Tab %d on the way to #%s: #%s (%s) has the focus without showing it: %+v", tb.name, n, id, f.ID, f.Tag, f)
		}
		if f.ID == id {
			return n
		}
	}
	tb.t.Fatalf("%s: #%s not reached within %d presses of Tab (focus on #%s)", tb.name, id, within, tb.focused().ID)
	return 0
}

// browserKeyboard is the whole flow with the keyboard alone, in a browser
// that asks for less motion: sign in, enter, order two, each control
// reached with Tab in a few presses and showing its focus; when a pressed
// button gives way (Enter, the form once the order is placed) the focus
// goes to the heading of what the page shows now, not to the top of the
// document. The turn does not move (prefers-reduced-motion); without the
// preference it draws the eye.
func browserKeyboard(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 5, "activationSpreadMs": 0})
	s.product(q, "scarf", "Scarf", 5, 3000)
	tb := newTab(t, browser, "keyboard")
	tb.media("prefers-reduced-motion", "reduce")
	tb.navigate(s.gateway.URL + "/q/" + q)
	tb.waitFor("the sign-in form", 15*time.Second, func(p pageState) bool { return p.Shown["dev-login"] })

	presses := map[string]int{}
	presses["name"] = tb.tabTo("name", 4)
	tb.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('name').select()`))
	tb.press("shopper-keys", kb.Enter)
	tb.waitFor("the Enter button", 10*time.Second, func(p pageState) bool { return p.Shown["enter"] && !p.EnterDisabled })
	if f := tb.focused(); f.ID != "identity-h" && f.Tag != "body" {
		t.Logf("after signing in the focus is on #%s", f.ID)
	}
	presses["enter"] = tb.tabTo("enter", 4)
	tb.press(kb.Enter)
	st := tb.waitFor("place 1", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if f := tb.focused(); f.ID != "line-h" {
		t.Fatalf("Enter pressed and gone: the focus is on #%s (%s), want the line's heading; page %v", f.ID, f.Tag, st)
	}
	tb.shot("keyboard-in-line")

	s.queue(q, map[string]any{"state": "OPEN"})
	tb.waitFor("the order form", 15*time.Second, func(p pageState) bool {
		return p.Shown["order-form"] && len(p.Quantities) > 0 && !p.OrderDisabled
	})
	if f := tb.focused(); f.ID != "turn-h" {
		t.Fatalf("the turn: the focus is on #%s (%s), want the turn's heading", f.ID, f.Tag)
	}
	if anim := eval[string](tb, `getComputedStyle(document.getElementById('turn-h')).animationName`); anim != "none" {
		t.Fatalf("the turn's heading moves (animation %q) in a browser that asks for reduced motion", anim)
	}
	presses["quantity"] = tb.tabTo("quantity", 3)
	tb.press(kb.ArrowDown)
	if v := eval[string](tb, `document.getElementById('quantity').value`); v != "2" {
		t.Fatalf("ArrowDown on the quantity: %q, want 2", v)
	}
	presses["order"] = tb.tabTo("order", 2)
	tb.shot("keyboard-order-form")
	tb.press(kb.Enter)
	st = tb.waitFor("the order confirmation", 15*time.Second, func(p pageState) bool { return p.Shown["result"] && p.OrderID != "" })
	if f := tb.focused(); f.ID != "result-h" {
		t.Fatalf("ordered: the focus is on #%s (%s), want the confirmation's heading", f.ID, f.Tag)
	}
	code, order := s.call(http.MethodGet, s.order.URL+"/api/v1/orders/"+st.OrderID, "shopper-keys", "", nil)
	if code != http.StatusOK || order["quantity"] != 2.0 || order["productId"] != "scarf" {
		t.Fatalf("GET order %s: %d %v", st.OrderID, code, order)
	}
	tb.shot("keyboard-confirmed")
	t.Logf("keyboard only: Tab presses to each control %v; order %s of 2 scarves", presses, st.OrderID)

	// The same turn, motion allowed: the heading draws the eye.
	tb2 := newTab(t, browser, "motion")
	tb2.navigate(s.gateway.URL + "/q/" + q)
	tb2.signIn("shopper-motion")
	tb2.click("enter")
	tb2.waitFor("the turn", 15*time.Second, func(p pageState) bool { return p.Shown["turn"] })
	if anim := eval[string](tb2, `getComputedStyle(document.getElementById('turn-h')).animationName`); anim != "arrive" {
		t.Fatalf("the turn's heading: animation %q, want arrive", anim)
	}
	if said := strings.TrimSpace(eval[string](tb2, `document.getElementById('say-now').textContent`)); !strings.HasPrefix(said, "It is your turn") {
		t.Fatalf("the turn's alert: %q", said)
	}
}

// recordSaid keeps, from now on, every text of the status line and of the
// two regions a screen reader hears (say, polite; say-now, an alert) in
// window.said, with when (ms).
func (tb *tab) recordSaid() {
	tb.t.Helper()
	tb.do(chromedp.Evaluate[chromedp.Void](`(() => {
	  window.said = [];
	  for (const id of ['status-text', 'say', 'say-now']) {
	    const el = document.getElementById(id);
	    new MutationObserver(() => window.said.push({ id, text: el.textContent, at: Date.now() }))
	      .observe(el, { childList: true, characterData: true, subtree: true });
	  }
	})()`))
}

// said is one text recordSaid kept.
type said struct {
	ID   string  `json:"id"`
	Text string  `json:"text"`
	At   float64 `json:"at"`
}

// placeSayMs is the page's PLACE_SAY_MS: the place in line is heard at
// most this often while the line's state (moving, paused) holds.
const placeSayMs = 30000

// calmAnnouncements checks what a screen reader heard while the buyer
// waited: the place in line less often than the status line changed it
// (at most once per state of the line and per 30 s), and the turn at
// once, as an alert whose text is the status line's. (A page that spoke
// every change would be heard as often as shown: more than the limit
// whenever one state showed two places.)
func calmAnnouncements(t *testing.T, tb *tab, turn string) {
	t.Helper()
	var all []said
	if err := json.Unmarshal(eval[[]byte](tb, `window.said`), &all); err != nil {
		t.Fatal(err)
	}
	place := func(s said) bool {
		return strings.HasPrefix(s.Text, "You are number") || strings.HasPrefix(s.Text, "Paused: the line is not moving")
	}
	var shown, heard, runs int
	var alerts []string
	lastKind, first, last := "", 0.0, 0.0
	for _, s := range all {
		switch {
		case s.ID == "status-text" && place(s):
			shown++
			if kind := s.Text[:6]; kind != lastKind {
				runs++
				lastKind = kind
			}
			if first == 0 {
				first = s.At
			}
			last = s.At
		case s.ID == "status-text":
			lastKind = ""
		case s.ID == "say" && place(s):
			heard++
		case s.ID == "say-now":
			alerts = append(alerts, s.Text)
		}
	}
	limit := runs + int((last-first)/placeSayMs)
	if heard < 1 || heard > limit {
		t.Fatalf("the place in line: shown %d times in %d runs of one state over %.1f s, heard %d times; want it heard 1 to %d times\n%v",
			shown, runs, (last-first)/1000, heard, limit, all)
	}
	if len(alerts) != 1 || alerts[0] != turn {
		t.Fatalf("alerts %q, want the turn's one: %q", alerts, turn)
	}
	t.Logf("screen reader: the place shown %d times, heard %d (%d runs of one line state); the turn heard at once as an alert", shown, heard, runs)
}
