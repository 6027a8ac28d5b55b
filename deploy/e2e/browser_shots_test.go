package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// pageShots are the languages and widths `make screenshots` draws the
// page in: left to right in three scripts, and right to left.
var (
	shotLangs  = []string{"en", "de", "ja", "ar"}
	shotWidths = []int64{1280, 320}
)

// browserScreenshots draws the page of a person waiting third in a paused
// line (one line a language) in each of shotLangs at each of shotWidths, the whole page, into
// E2E_PAGE_SHOTS (make screenshots: ./screenshots) or a temporary folder;
// each is a PNG of the width asked for. Every request of those pages goes
// to the services' own origins: the page loads nothing from anyone else.
func browserScreenshots(t *testing.T, s *browserSystem, b context.Context, q string) {
	dir := os.Getenv("E2E_PAGE_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{}
	for _, svc := range []string{s.gateway.URL, s.order.URL, s.notify.URL} {
		u, _ := url.Parse(svc)
		own[u.Host] = true
	}
	var written []string
	for _, lang := range shotLangs {
		// A line of its own, two people ahead: the page shows place 3.
		q := q + "-" + lang
		testenv.PurgeAtCleanup(t, testenv.RedisURL(t), q)
		t.Cleanup(func() { s.call(http.MethodDelete, s.gateway.URL+"/admin/v1/queues/"+q, "ops", auth.RoleAdmin, nil) })
		s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 3})
		s.enter(q, "first-in-line")
		s.enter(q, "second-in-line")
		tb := newTab(t, b, "shot-"+lang)
		reqs := tb.recordRequests()
		ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: fmt.Sprintf(`localStorage.lang = %q`, lang),
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		tb.navigate(s.gateway.URL + "/q/" + q)
		tb.signIn("shopper-" + lang)
		tb.click("enter")
		tb.waitFor("place 3", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "3" })
		if got := eval[string](tb, `document.documentElement.lang`); got != lang {
			t.Fatalf("the page in %s says lang=%q", lang, got)
		}
		for _, w := range shotWidths {
			tb.do(chromedp.EmulateViewport(w, 800))
			ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			cancel()
			if err != nil {
				t.Fatalf("%s at %d px: %v", lang, w, err)
			}
			img, err := png.Decode(bytes.NewReader(shot))
			if err != nil || int64(img.Bounds().Dx()) != w {
				t.Fatalf("%s at %d px: a PNG %v wide (%v)", lang, w, img.Bounds(), err)
			}
			p := filepath.Join(dir, fmt.Sprintf("waiting-%s-%d.png", lang, w))
			if err := os.WriteFile(p, shot, 0o644); err != nil {
				t.Fatal(err)
			}
			written = append(written, p)
		}
		for _, r := range reqs.matching(func(sentRequest) bool { return true }) {
			u, err := url.Parse(r.url)
			if err != nil || (u.Scheme != "data" && !own[u.Host]) {
				t.Errorf("the page in %s asked %s: not one of the services", lang, r.url)
			}
		}
		if n := reqs.count(func(sentRequest) bool { return true }); n < 5 {
			t.Fatalf("the page in %s sent %d requests, want the page, its files and its calls (5 or more)", lang, n)
		}
	}
	if len(written) != len(shotLangs)*len(shotWidths) {
		t.Fatalf("%d screenshots, want %d", len(written), len(shotLangs)*len(shotWidths))
	}
	t.Logf("screenshots: %s", strings.Join(written, " "))
}
