package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// wording is a queue's own German wording: a plain message, one with a
// slot, a plural one.
var wording = map[string]any{
	"page.heading":    "Sommeraktion: Warteschlange",
	"line.waitingSay": "Sie sind auf Platz {position}. Lassen Sie diese Seite offen.",
	"order.left":      map[string]any{"one": "noch {count} Stück", "other": "noch {count} Stück"},
}

// pageTexts is what the page loads of q's wording in lang.
func (h *harness) pageTexts(q, lang string) map[string]any {
	h.t.Helper()
	r := h.must(http.MethodGet, "/api/v1/queues/"+q+"/texts/"+lang, "", nil)
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "public, max-age=5" {
		h.t.Fatalf("the page's texts of %s in %s: %d %q %s", q, lang, r.status, r.header.Get("Cache-Control"), r.body)
	}
	var m map[string]any
	r.json(h.t, &m)
	return m
}

// TestAQueueWordsItsOwnPage: an operator replaces messages of the page for
// one queue and language; the page loads them; every malformed wording is
// refused with 400 naming each bad message, and changes nothing; only an
// admin may set one; removing it gives the page its own words back.
func TestAQueueWordsItsOwnPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPage(pageConfig, true))
	q := h.newQueue(nil)
	other := h.newQueue(nil)
	path := "/admin/v1/queues/" + q + "/texts/de"

	if got := h.pageTexts(q, "de"); len(got) != 0 {
		t.Fatalf("before any wording: %v, want {}", got)
	}
	r := h.must(http.MethodPut, path, h.admin(), wording)
	var stored map[string]any
	r.json(t, &stored)
	if r.status != http.StatusOK || !reflect.DeepEqual(stored, wording) {
		t.Fatalf("PUT the wording: %d %s", r.status, r.body)
	}
	if got := h.pageTexts(q, "de"); !reflect.DeepEqual(got, wording) {
		t.Fatalf("the page loads %v, want %v", got, wording)
	}
	if got := h.pageTexts(q, "fr"); len(got) != 0 {
		t.Fatalf("French, never worded: %v", got)
	}
	if got := h.pageTexts(other, "de"); len(got) != 0 {
		t.Fatalf("another queue: %v", got)
	}
	var all struct {
		Texts map[string]map[string]any `json:"texts"`
	}
	h.must(http.MethodGet, "/admin/v1/queues/"+q+"/texts", h.admin(), nil).json(t, &all)
	if len(all.Texts) != 1 || !reflect.DeepEqual(all.Texts["de"], wording) {
		t.Fatalf("the admin list: %v", all.Texts)
	}

	bad := []struct {
		name   string
		body   any
		fields []string
	}{
		{"a key the page has not", map[string]any{"page.nope": "x", "page.heading": "ok"}, []string{"page.nope"}},
		{"a slot dropped", map[string]any{"line.waitingSay": "Sie warten."}, []string{"line.waitingSay"}},
		{"a slot added", map[string]any{"page.heading": "Hallo {user}"}, []string{"page.heading"}},
		{"a string for a plural", map[string]any{"order.left": "noch {count}"}, []string{"order.left"}},
		{"a plural for a string", map[string]any{"page.heading": map[string]any{"other": "x"}}, []string{"page.heading"}},
		{"a plural without other", map[string]any{"order.left": map[string]any{"one": "noch {count}"}}, []string{"order.left"}},
		{"no such plural category", map[string]any{"order.left": map[string]any{"other": "{count}", "lots": "{count}"}}, []string{"order.left"}},
		{"too long", map[string]any{"page.heading": strings.Repeat("ä", 501)}, []string{"page.heading"}},
		{"blank", map[string]any{"page.heading": "  "}, []string{"page.heading"}},
		{"a control character", map[string]any{"page.heading": "Sale\u0007"}, []string{"page.heading"}},
		{"a line break", map[string]any{"page.heading": "Sale\nnow"}, []string{"page.heading"}},
		{"not an object", []string{"page.heading"}, []string{""}},
		{"null", "null", []string{""}},
	}
	for _, c := range bad {
		p := h.must(http.MethodPut, path, h.admin(), c.body).problem(t, http.StatusBadRequest, "validation-failed")
		var named []string
		for _, e := range p.Errors {
			named = append(named, e.Field)
		}
		if !reflect.DeepEqual(named, c.fields) {
			t.Errorf("%s: the problem names %v, want %v", c.name, named, c.fields)
		}
	}
	h.must(http.MethodPut, "/admin/v1/queues/"+q+"/texts/xx", h.admin(), wording).problem(t, http.StatusBadRequest, "validation-failed")
	h.must(http.MethodPut, "/admin/v1/queues/"+q+"/texts/de", h.admin(), strings.Repeat(" ", 40<<10)+"{}").problem(t, http.StatusBadRequest, "validation-failed")
	h.must(http.MethodPut, "/admin/v1/queues/"+q+"/texts/de", h.admin(), "{}", "Content-Type", "text/plain").problem(t, http.StatusUnsupportedMediaType, "unsupported-media-type")
	h.must(http.MethodPut, path, h.token("mallory", ""), map[string]any{"page.heading": "Free tickets at evil.example"}).problem(t, http.StatusForbidden, "forbidden")
	h.must(http.MethodPut, path, "", map[string]any{"page.heading": "Free tickets"}).problem(t, http.StatusUnauthorized, "unauthorized")
	h.must(http.MethodPut, "/admin/v1/queues/no-such-queue-"+strings.ToLower(testenv.ID(t))+"/texts/de", h.admin(), wording).problem(t, http.StatusNotFound, "queue-not-found")
	h.must(http.MethodPut, "/admin/v1/queues/Bad_Id/texts/de", h.admin(), wording).problem(t, http.StatusBadRequest, "invalid-queue-id")
	h.must(http.MethodGet, "/api/v1/queues/"+q+"/texts/xx", "", nil).problem(t, http.StatusNotFound, "not-found")
	if got := h.pageTexts(q, "de"); !reflect.DeepEqual(got, wording) {
		t.Fatalf("after %d refused wordings the page loads %v, want the first one", len(bad)+7, got)
	}

	// A new wording replaces the whole set of its language.
	h.must(http.MethodPut, path, h.admin(), map[string]any{"page.heading": "Neu"})
	if got := h.pageTexts(q, "de"); len(got) != 1 || got["page.heading"] != "Neu" {
		t.Fatalf("replaced: %v", got)
	}
	if r := h.must(http.MethodDelete, path, h.admin(), nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	h.must(http.MethodDelete, path, h.admin(), nil).problem(t, http.StatusNotFound, "not-found")
	if got := h.pageTexts(q, "de"); len(got) != 0 {
		t.Fatalf("removed: the page still loads %v", got)
	}

	// The audit trail's events in the queue's outbox (no relay here): the
	// create, the three wordings written (set, replaced, removed) and the
	// fifteen refused by an admin (the malformed ones, the unknown
	// language, the 40 KiB body: recorded without it); none for the
	// others' attempts.
	entries, err := h.rdb.XRange(context.Background(), redisstore.KeysFor(q).Outbox(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range entries {
		if e.Values["type"] != "QueueChanged" {
			continue
		}
		kind := fmt.Sprint(e.Values["outcome"])
		if e.Values["worded"] == "1" {
			kind += " worded"
			after := fmt.Sprint(e.Values["after"])
			if !json.Valid([]byte(after)) || e.Values["actor"] != "operator" {
				t.Errorf("wording event %v: after not JSON or not the operator's", e.Values)
			}
		}
		kinds[kind]++
	}
	if want := map[string]int{"APPLIED": 1, "APPLIED worded": 3, "REFUSED worded": len(bad) + 2}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("the queue's QueueChanged events: %v, want %v", kinds, want)
	}
}

// TestAQueueWordingWhileRedisIsDown: the page's read of a wording and the
// admin's write answer 503 with Retry-After while Redis is cut off, write
// nothing, and work again by themselves once it is back.
func TestAQueueWordingWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	proxy := testenv.StartProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	h := newHarness(t, withRedisURL("redis://"+proxy.Addr()+"/0"), withPage(pageConfig, true))
	q := h.newQueue(nil)
	h.must(http.MethodPut, "/admin/v1/queues/"+q+"/texts/ja", h.admin(), map[string]any{"page.heading": "待合室"})
	h.pageTexts(q, "ja")
	time.Sleep(5100 * time.Millisecond) // past the gateway's copy

	proxy.Cut()
	for _, r := range []response{
		h.must(http.MethodGet, "/api/v1/queues/"+q+"/texts/ja", "", nil),
		h.must(http.MethodPut, "/admin/v1/queues/"+q+"/texts/ja", h.admin(), map[string]any{"page.heading": "変更"}),
	} {
		r.problem(t, http.StatusServiceUnavailable, "backend-unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After: %s", r.body)
		}
	}
	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := h.must(http.MethodGet, "/api/v1/queues/"+q+"/texts/ja", "", nil)
		if r.status == http.StatusOK {
			var m map[string]any
			if err := json.Unmarshal(r.body, &m); err != nil || m["page.heading"] != "待合室" || len(m) != 1 {
				t.Fatalf("after the outage: %s (%v)", r.body, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after Redis came back: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
