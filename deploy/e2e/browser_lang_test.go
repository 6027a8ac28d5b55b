package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// messages reads the page's translation file of lang from the gateway's
// source tree.
func messages(t *testing.T, lang string) map[string]any {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../services/queue-gateway/internal/web/static/i18n", lang+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// say is message key of msgs with its {slots} filled.
func say(t *testing.T, msgs map[string]any, key string, vars map[string]string) string {
	t.Helper()
	m, ok := msgs[key].(string)
	if !ok {
		t.Fatalf("no message %s", key)
	}
	return regexp.MustCompile(`\{(\w+)\}`).ReplaceAllStringFunc(m, func(s string) string { return vars[s[1:len(s)-1]] })
}

// langState is the document's language, direction and heading.
type langState struct {
	Lang    string `json:"lang"`
	Dir     string `json:"dir"`
	Heading string `json:"heading"`
	Title   string `json:"title"`
	Chosen  string `json:"chosen"`
	Options int    `json:"options"`
}

func (tb *tab) lang() langState {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`({lang: document.documentElement.lang, dir: document.documentElement.dir,
	  heading: document.querySelector('h1').textContent, title: document.title, chosen: document.getElementById('lang').value,
	  options: document.getElementById('lang').options.length})`))
	var st langState
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	if err != nil {
		tb.t.Fatalf("%s: read the language: %v", tb.name, err)
	}
	return st
}

// browserLanguages: a person whose browser asks for Austrian German gets
// the page in German (the base language), numbers included; they switch to
// Arabic: the page turns right to left and says everything again in Arabic
// without a reload, still fitting the phone; a reload keeps Arabic.
func browserLanguages(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 2})
	for i, u := range []string{"lena", "omar"} {
		if p := s.enter(q, u); p != i+1 {
			t.Fatalf("%s entered at %d, want %d", u, p, i+1)
		}
	}
	tb := newTab(t, browser, "languages")
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	ua, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err == nil {
		_, err = chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: "de-AT,de;q=0.9,en;q=0.5"})
	}
	cancel()
	if err != nil {
		t.Fatalf("emulate an Austrian browser: %v", err)
	}
	tb.navigate(s.gateway.URL + "/q/" + q)
	de, ar := messages(t, "de"), messages(t, "ar")

	tb.signIn("shopper-lang")
	if st := tb.lang(); st.Lang != "de" || st.Dir != "ltr" || st.Heading != de["page.heading"] || st.Title != de["page.title"] || st.Chosen != "de" || st.Options < 13 {
		t.Fatalf("de-AT browser: %+v, want German (%q), left to right, the switcher at de of 13 and more", st, de["page.heading"])
	}
	tb.click("enter")
	want := say(t, de, "line.pausedSay", map[string]string{"position": "3"})
	st := tb.waitFor("place 3 in German", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Status == want })
	if st.Position != "3" || st.Ahead != "2" || !strings.Contains(st.QueueState, de["line.paused"].(string)) {
		t.Fatalf("German figures: %v, want place 3, 2 ahead, %q", st, de["line.paused"])
	}
	tb.shot("german")

	// Arabic, from the switcher: no reload (the place stays on screen).
	tb.do(chromedp.SetValue(chromedp.ID("lang"), "ar"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('lang').dispatchEvent(new Event('change'))`))
	want = say(t, ar, "line.pausedSay", map[string]string{"position": "3"})
	st = tb.waitFor("place 3 in Arabic", 10*time.Second, func(p pageState) bool { return p.Status == want })
	if l := tb.lang(); l.Lang != "ar" || l.Dir != "rtl" || l.Heading != ar["page.heading"] || !strings.Contains(st.QueueState, ar["line.paused"].(string)) {
		t.Fatalf("after choosing Arabic: %+v, %v; want ar, rtl, %q", l, st, ar["page.heading"])
	}
	tb.shot("arabic") // still no horizontal scroll, right to left
	tb.audit("arabic-rtl")

	// A reload keeps the choice over the browser's languages.
	tb.navigate(s.gateway.URL + "/q/" + q)
	tb.waitFor("place 3 in Arabic after a reload", 10*time.Second, func(p pageState) bool { return p.Status == want })
	if l := tb.lang(); l.Lang != "ar" || l.Chosen != "ar" {
		t.Fatalf("after a reload: %+v, want Arabic kept", l)
	}
}
