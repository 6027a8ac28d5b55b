package web

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestThePageSpeaksTwelveLanguages lists the languages of /config.json:
// English first, at least twelve more with Arabic right to left, each by
// its own name, each file served at its versioned URL with every English
// message (New refuses a file that lacks one, has one more, or changes a
// message's {slots}).
func TestThePageSpeaksTwelveLanguages(t *testing.T) {
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Languages []Language `json:"languages"`
	}
	if err := json.Unmarshal(get(t, h.Config, "/config.json").Body.Bytes(), &cfg); err != nil {
		t.Fatal(err)
	}
	langs := cfg.Languages
	if len(langs) < 13 || langs[0].Code != "en" {
		t.Fatalf("%d languages, first %q; want English first and at least 12 more", len(langs), langs[0].Code)
	}
	names := map[string]bool{}
	for _, l := range langs {
		wantDir := "ltr"
		if l.Code == "ar" {
			wantDir = "rtl"
		}
		if l.Dir != wantDir || l.Name == "" || names[l.Name] {
			t.Errorf("%s: dir %q name %q; want %s and a name of its own", l.Code, l.Dir, l.Name, wantDir)
		}
		names[l.Name] = true
		rec := get(t, h.Static, l.URL)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") ||
			rec.Header().Get("Cache-Control") != immutableCache {
			t.Errorf("%s: GET %s = %d %q %q, want 200 JSON cached for good", l.Code, l.URL, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"))
		}
	}
	if !slices.ContainsFunc(langs, func(l Language) bool { return l.Code == "ar" }) {
		t.Error("no Arabic")
	}
}

// TestAMissingOrChangedMessageIsRefused: the check New runs on every
// translation file fails, naming the message, for a message missing, one
// English does not have, a {slot} lost or renamed, a plural message given
// as a string, and a plural form that is no plural category.
func TestAMissingOrChangedMessageIsRefused(t *testing.T) {
	en, err := messagesOf([]byte(`{"a": "Hello {user}", "b": {"one": "{count} left", "other": "{count} left"}, "c": "Bye"}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct{ file, want string }{
		"missing":       {`{"a": "Hallo {user}", "b": {"one": "{count} übrig", "other": "{count} übrig"}}`, "c is missing"},
		"extra":         {`{"a": "Hallo {user}", "b": {"other": "{count} übrig"}, "c": "Tschüss", "d": "x"}`, "d is not an English message"},
		"slot lost":     {`{"a": "Hallo", "b": {"other": "{count} übrig"}, "c": "Tschüss"}`, "a (other) has the slots [], English [user]"},
		"slot renamed":  {`{"a": "Hallo {name}", "b": {"other": "{count} übrig"}, "c": "Tschüss"}`, "a (other) has the slots [name]"},
		"plural lost":   {`{"a": "Hallo {user}", "b": "{count} übrig", "c": "Tschüss"}`, "b: a plural message in one language"},
		"plural form":   {`{"a": "Hallo {user}", "b": {"lots": "{count}", "other": "{count}"}, "c": "Tschüss"}`, `"lots" is no plural category`},
		"no other form": {`{"a": "Hallo {user}", "b": {"one": "{count}"}, "c": "Tschüss"}`, `needs its "other" form`},
	} {
		t.Run(name, func(t *testing.T) {
			msgs, err := messagesOf([]byte(tt.file))
			if err == nil {
				err = sameMessages(en, msgs)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
	good, _ := messagesOf([]byte(`{"a": "{user}, hallo", "b": {"one": "{count} übrig", "other": "noch {count}"}, "c": "Tschüss"}`))
	if err := sameMessages(en, good); err != nil {
		t.Fatalf("a complete translation refused: %v", err)
	}
}

// TestThePageHoldsNoTextOutsideTheTranslations: every text of index.html
// is the English message of the element's data-i18n (its data-slot
// children at their {slots}), but for symbols; and app.js passes no prose
// of its own to the page: every string literal with words in it is a
// message key or a list of element ids.
func TestThePageHoldsNoTextOutsideTheTranslations(t *testing.T) {
	raw, err := os.ReadFile("static/i18n/en.json")
	if err != nil {
		t.Fatal(err)
	}
	var en map[string]any
	if err := json.Unmarshal(raw, &en); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.ParseWithOptions(strings.NewReader(string(page)), html.ParseOptionEnableScripting(false)) // noscript as markup
	if err != nil {
		t.Fatal(err)
	}
	symbols := regexp.MustCompile(`^[\s…–ℹ]*$`)
	space := regexp.MustCompile(`\s+`)
	translated := 0
	var walk func(n *html.Node, key string)
	walk = func(n *html.Node, key string) {
		if n.Type == html.ElementNode {
			if k := attr(n, "data-i18n"); k != "" {
				msg, ok := en[k].(string)
				if !ok {
					t.Errorf("<%s data-i18n=%q>: no such English message", n.Data, k)
				} else if got := space.ReplaceAllString(strings.TrimSpace(textWithSlots(n)), " "); got != msg {
					t.Errorf("<%s data-i18n=%q> says %q, English %q", n.Data, k, got, msg)
				}
				translated++
				key = k
			}
			if n.Data == "script" || n.Data == "style" {
				return
			}
		}
		if n.Type == html.TextNode && key == "" && !symbols.MatchString(n.Data) {
			t.Errorf("text outside the translations: %q", strings.TrimSpace(n.Data))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, key)
		}
	}
	walk(doc, "")
	if translated < 30 {
		t.Errorf("%d elements translated, want the page's 30 and more", translated)
	}

	js, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(regexp.MustCompile(`//[^\n]*`).ReplaceAllString(string(js), ""), "")
	literal := regexp.MustCompile("'(?:[^'\\\\\\n]|\\\\.)*'|`(?:[^`\\\\]|\\\\.)*`|\"(?:[^\"\\\\\\n]|\\\\.)*\"")
	ids := regexp.MustCompile(`^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)*$`)
	interp := regexp.MustCompile(`\$\{[^}]*\}`)
	words := regexp.MustCompile(`\pL{2,}\s+\pL{2,}`)
	// t is the page's one way to its words: nothing may shadow it.
	if m := regexp.MustCompile(`\b(?:const|let|var)\s+t\b|\(\s*t\s*[,)]|,\s*t\s*\)`).FindString(code); m != "" {
		t.Errorf("app.js shadows t, the message function: %q", m)
	}
	for _, lit := range literal.FindAllString(code, -1) {
		inner := interp.ReplaceAllString(lit[1:len(lit)-1], "")
		if words.MatchString(inner) && !ids.MatchString(inner) {
			t.Errorf("app.js says %s itself: put it in static/i18n/en.json", lit)
		}
	}
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// textWithSlots is n's text with each data-slot child as its {slot}.
func textWithSlots(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.TextNode:
			b.WriteString(c.Data)
		case c.Type == html.ElementNode && attr(c, "data-slot") != "":
			b.WriteString("{" + attr(c, "data-slot") + "}")
		case c.Type == html.ElementNode:
			b.WriteString(textWithSlots(c))
		}
	}
	return b.String()
}

// TestThePageWritesMessagesAsText: app.js never turns a string into markup
// (innerHTML, outerHTML, insertAdjacentHTML, document.write): a message,
// the shop's own wording among them, is always text.
func TestThePageWritesMessagesAsText(t *testing.T) {
	js, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	markup := regexp.MustCompile(`\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment)\b`)
	if m := markup.FindAllString(string(js), -1); len(m) != 0 {
		t.Fatalf("app.js makes markup from strings: %v", m)
	}
	if n := strings.Count(string(js), ".textContent ="); n < 10 {
		t.Fatalf("app.js sets textContent %d times: is the page still written as text?", n)
	}
}
