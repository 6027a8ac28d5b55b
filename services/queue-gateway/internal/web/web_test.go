package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	good := Config{OrderServiceURL: "https://shop.example/orders/", NotificationServiceURL: "http://127.0.0.1:18082", DefaultQueue: "spring-sale"}
	if err := good.Validate(); err != nil {
		t.Fatalf("%+v refused: %v", good, err)
	}
	bad := map[string]struct {
		cfg  Config
		want string
	}{
		"relative order url":        {Config{OrderServiceURL: "/orders"}, "ORDER_SERVICE_PUBLIC_URL"},
		"ftp notification url":      {Config{NotificationServiceURL: "ftp://n.example"}, "NOTIFICATION_SERVICE_PUBLIC_URL"},
		"url with a query":          {Config{OrderServiceURL: "http://o.example/?a=b"}, "ORDER_SERVICE_PUBLIC_URL"},
		"url with credentials":      {Config{NotificationServiceURL: "http://u:p@n.example"}, "NOTIFICATION_SERVICE_PUBLIC_URL"},
		"url that breaks the CSP":   {Config{OrderServiceURL: "http://o.example;script-src"}, "ORDER_SERVICE_PUBLIC_URL"},
		"upper-case default queue":  {Config{DefaultQueue: "Demo"}, "DEFAULT_QUEUE"},
		"default queue with spaces": {Config{DefaultQueue: "a b"}, "DEFAULT_QUEUE"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate(%+v) = %v, want an error naming %s", tt.cfg, err, tt.want)
			}
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

func get(t *testing.T, h http.HandlerFunc, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h(rec, req)
	return rec
}

// pageCSP is the policy of the page and its assets with the default config.
const pageCSP = "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' http://localhost:8081 http://localhost:8082; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func TestPageDefaultsAndSecurityHeaders(t *testing.T) {
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, h.Config, "/config.json")
	var cfg struct {
		OrderServiceURL        string     `json:"orderServiceUrl"`
		NotificationServiceURL string     `json:"notificationServiceUrl"`
		DefaultQueue           string     `json:"defaultQueue"`
		DevMode                bool       `json:"devMode"`
		Languages              []Language `json:"languages"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &cfg); err != nil || cfg.OrderServiceURL != "http://localhost:8081" ||
		cfg.NotificationServiceURL != "http://localhost:8082" || cfg.DefaultQueue != "demo" || cfg.DevMode || len(cfg.Languages) == 0 {
		t.Fatalf("config.json = %s (%v), want the default services, queue demo, no dev mode, the languages", rec.Body, err)
	}
	rec = get(t, h.Page, "/")
	want := map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Content-Security-Policy": pageCSP,
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// The CSP allows no inline code: the page must have none.
	body := rec.Body.String()
	if regexp.MustCompile(`<script>|<style|\sstyle=|\son[a-z]+=`).MatchString(body) {
		t.Fatal("the page has inline script or style, which its CSP blocks")
	}
}

func TestStaticAssetsAreVersionedAndCached(t *testing.T) {
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	index := get(t, h.Page, "/").Body.String()
	types := map[string]string{"app.js": "text/javascript", "pow-worker.js": "text/javascript", "app.css": "text/css"}
	for _, name := range []string{"app.js", "pow-worker.js", "app.css"} {
		a := h.assets[name]
		url := "/static/" + name + "?v=" + a.hash
		if !strings.Contains(index, `"`+url+`"`) {
			t.Fatalf("the page does not reference %s", url)
		}
		rec := get(t, h.Static, url)
		if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != immutableCache || rec.Header().Get("ETag") != a.etag ||
			rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Body.Len() != len(a.body) {
			t.Fatalf("%s: %d %v", url, rec.Code, rec.Header())
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, types[name]) {
			t.Fatalf("%s: content type %q", name, ct)
		}
		// A worker runs under the policy its own response carries.
		if csp := rec.Header().Get("Content-Security-Policy"); csp != pageCSP {
			t.Fatalf("%s: CSP %q, want %q", name, csp, pageCSP)
		}
		// An unversioned or stale URL may be cached only briefly.
		if rec := get(t, h.Static, "/static/"+name+"?v=old"); rec.Header().Get("Cache-Control") != briefCache {
			t.Fatalf("stale version cached as %q", rec.Header().Get("Cache-Control"))
		}
		if rec := get(t, h.Static, url, "If-None-Match", a.etag); rec.Code != http.StatusNotModified {
			t.Fatalf("revalidation: %d, want 304", rec.Code)
		}
	}
	if rec := get(t, h.Static, "/static/index.html"); rec.Code != http.StatusNotFound {
		t.Fatalf("index.html under /static/: %d, want 404", rec.Code)
	}
	if rec := get(t, h.Static, "/static/../web.go"); rec.Code != http.StatusNotFound {
		t.Fatalf("path escape: %d, want 404", rec.Code)
	}
}

// TestThePageFirstLoadIsSmall: what a browser fetches on a first load (the
// document, its style sheet and script, /config.json, the English
// messages), gzipped as the page's clients take it, stays within 32 KiB,
// each gzipped body the same bytes as the plain one, and nothing else is
// fetched from anywhere else (the CSP allows no other host for scripts,
// styles or images).
func TestThePageFirstLoadIsSmall(t *testing.T) {
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(serve http.HandlerFunc, path string, gz bool) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if gz {
			r.Header.Set("Accept-Encoding", "br, gzip;q=0.9")
		}
		w := httptest.NewRecorder()
		serve(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		return w
	}
	index := get(h.Page, "/", false).Body.String()
	paths := regexp.MustCompile(`"(/static/[a-z.]+\?v=[0-9a-f]+)"`).FindAllStringSubmatch(index, -1)
	var enURL string
	var cfg struct {
		Languages []Language `json:"languages"`
	}
	if err := json.Unmarshal(get(h.Config, "/config.json", false).Body.Bytes(), &cfg); err != nil || cfg.Languages[0].Code != "en" {
		t.Fatalf("config.json: %v %v", cfg, err)
	}
	enURL = cfg.Languages[0].URL
	total, plain := 0, 0
	report := []string{}
	for _, p := range append([]string{"/", enURL}, func() []string {
		var out []string
		for _, m := range paths {
			if !strings.Contains(m[1], "pow-worker") { // fetched only by a queue that asks for proof of work
				out = append(out, m[1])
			}
		}
		return out
	}()...) {
		serve := h.Static
		if p == "/" {
			serve = h.Page
		}
		z := get(serve, p, true)
		raw := get(serve, p, false)
		if z.Header().Get("Content-Encoding") != "gzip" || raw.Header().Get("Content-Encoding") != "" || !strings.Contains(z.Header().Get("Vary"), "Accept-Encoding") {
			t.Fatalf("%s: encodings %q / %q, Vary %q", p, z.Header().Get("Content-Encoding"), raw.Header().Get("Content-Encoding"), z.Header().Get("Vary"))
		}
		n := z.Body.Len()
		zr, err := gzip.NewReader(z.Body)
		if err != nil {
			t.Fatal(err)
		}
		unz, _ := io.ReadAll(zr)
		if !bytes.Equal(unz, raw.Body.Bytes()) {
			t.Fatalf("%s: the gzipped body is not the plain one", p)
		}
		total += n
		plain += raw.Body.Len()
		report = append(report, fmt.Sprintf("%s %d", strings.SplitN(p, "?", 2)[0], n))
	}
	total += len(get(h.Config, "/config.json", true).Body.Bytes())
	if len(report) != 4 || total > 32<<10 || total*2 > plain {
		t.Fatalf("first load: %d files, %d bytes gzipped (%v): want 4 files and config.json within 32 KiB", len(report), total, report)
	}
	t.Logf("first load: %d bytes gzipped (%d plain), with /config.json: %v", total, plain, report)
}
