package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/web"
)

// withPage serves the waiting-room page with cfg; devMode sets AUTH_DEV_MODE.
func withPage(cfg web.Config, devMode bool) harnessOption {
	return func(o *httpapi.Options, _ *harness) {
		o.Page = &cfg
		o.DevMode = devMode
	}
}

var pageConfig = web.Config{
	OrderServiceURL:        "https://shop.example/orders/",
	NotificationServiceURL: "http://127.0.0.1:18082",
	DefaultQueue:           "spring-sale",
}

func TestPageRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPage(pageConfig, true))

	var index string
	for _, path := range []string{"/", "/?queue=other", "/q/spring-sale", "/q/a-1"} {
		r := h.must(http.MethodGet, path, "", nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("GET %s: %d %q", path, r.status, r.header.Get("Content-Type"))
		}
		want := map[string]string{
			"Cache-Control":          "no-store",
			"X-Content-Type-Options": "nosniff",
			"Referrer-Policy":        "no-referrer",
		}
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Fatalf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://shop.example http://127.0.0.1:18082;") ||
			!strings.Contains(csp, "script-src 'self';") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
		index = string(r.body)
	}
	if !strings.Contains(index, `id="enter"`) || !strings.Contains(index, `role="status"`) {
		t.Fatal("the page lacks its enter button or status region")
	}

	// The assets the page names are served, versioned, for a year.
	for _, m := range regexp.MustCompile(`"(/static/[a-z.]+\?v=[0-9a-f]+)"`).FindAllStringSubmatch(index, -1) {
		r := h.must(http.MethodGet, m[1], "", nil)
		if r.status != http.StatusOK || r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" || r.header.Get("ETag") == "" {
			t.Fatalf("GET %s: %d %v", m[1], r.status, r.header)
		}
	}
	if r := h.must(http.MethodGet, "/static/nothing.js", "", nil); r.status != http.StatusNotFound {
		t.Fatalf("unknown asset: %d", r.status)
	}
	if r := h.must(http.MethodHead, "/", "", nil); r.status != http.StatusOK || len(r.body) != 0 {
		t.Fatalf("HEAD /: %d, %d bytes", r.status, len(r.body))
	}
	// A path that can be no queue's is refused before any page loads.
	h.must(http.MethodGet, "/q/Not_A_Queue", "", nil).problem(t, http.StatusBadRequest, "invalid-queue-id")
	// The API is unchanged next to the page.
	h.must(http.MethodGet, "/api/v1/queues/"+strings.Repeat("x", 65), "", nil).problem(t, http.StatusBadRequest, "invalid-queue-id")
}

func TestPageConfigJSON(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		cfg     web.Config
		devMode bool
		want    string
	}{
		"configured, dev mode": {pageConfig, true,
			`{"orderServiceUrl":"https://shop.example/orders","notificationServiceUrl":"http://127.0.0.1:18082","defaultQueue":"spring-sale","devMode":true}`},
		"defaults, no dev mode": {web.Config{}, false,
			`{"orderServiceUrl":"http://localhost:8081","notificationServiceUrl":"http://localhost:8082","defaultQueue":"demo","devMode":false}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, withPage(tt.cfg, tt.devMode))
			r := h.must(http.MethodGet, "/config.json", "", nil)
			if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("config.json: %d %v", r.status, r.header)
			}
			// The services, the queue, dev mode; then the page's languages
			// (their list is the web package's to test).
			var got map[string]json.RawMessage
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatalf("config.json %s: %v", r.body, err)
			}
			langs := got["languages"]
			delete(got, "languages")
			if b, _ := json.Marshal(got); !jsonEqual(t, b, tt.want) || !strings.HasPrefix(string(langs), `[{"code":"en"`) {
				t.Fatalf("config.json = %s, want %s with the languages, English first", r.body, tt.want)
			}
			// The dev token endpoint exists exactly when the page is told so.
			res := h.must(http.MethodPost, "/api/v1/dev/token", "", map[string]string{"userId": "guest-1a2b"})
			if (res.status == http.StatusOK) != tt.devMode {
				t.Fatalf("dev token with devMode %v: %d", tt.devMode, res.status)
			}
		})
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestNoPageUnlessConfigured(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, path := range []string{"/", "/config.json", "/q/demo"} {
		h.must(http.MethodGet, path, "", nil).problem(t, http.StatusNotFound, "not-found")
	}
}
