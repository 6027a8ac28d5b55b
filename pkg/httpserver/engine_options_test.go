package httpserver_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

// TestNewEngineRefusesBadOptionsWithAnError: a misconfiguration (an origin
// without a scheme or with a path, a missing dependency, a registry used
// twice) must come back as NewEngine's error, as
// NewOps does, not crash the process with a panic.
func TestNewEngineRefusesBadOptionsWithAnError(t *testing.T) {
	ok := func() httpserver.EngineOptions {
		return httpserver.EngineOptions{Service: "test", Log: slog.New(slog.DiscardHandler),
			Registry: prometheus.NewRegistry(), Health: httpserver.NewHealth(nil)}
	}
	used := ok()
	if _, err := httpserver.NewEngine(used); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    func() httpserver.EngineOptions
	}{
		{"origin without scheme", func() httpserver.EngineOptions { o := ok(); o.CORSOrigins = []string{"page.example"}; return o }},
		{"a path", func() httpserver.EngineOptions {
			o := ok()
			o.CORSOrigins = []string{"http://page.example/app"}
			return o
		}},
		{"no registry", func() httpserver.EngineOptions { o := ok(); o.Registry = nil; return o }},
		{"no log", func() httpserver.EngineOptions { o := ok(); o.Log = nil; return o }},
		{"no health", func() httpserver.EngineOptions { o := ok(); o.Health = nil; return o }},
		{"registry used twice", func() httpserver.EngineOptions { return used }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panicked: %v", p)
						t.Errorf("NewEngine panicked: %v", p)
					}
				}()
				_, err = httpserver.NewEngine(tc.o())
				return err
			}()
			if err == nil {
				t.Errorf("NewEngine returned no error")
			}
		})
	}
}

// "a, b" is a common way to write CORS_ALLOWED_ORIGINS: the space is
// trimmed, and both origins are allowed.
func TestCheckOriginsTrimsAList(t *testing.T) {
	got, err := httpserver.CheckOrigins([]string{"http://localhost:8080", " http://127.0.0.1:8080", "https://shop.example/", ""})
	want := []string{"http://localhost:8080", "http://127.0.0.1:8080", "https://shop.example"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("CheckOrigins = %v, %v; want %v", got, err, want)
	}
}
