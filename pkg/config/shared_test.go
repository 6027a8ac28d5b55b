package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProxiesCheck(t *testing.T) {
	if err := (Proxies{TrustedProxies: []string{"10.0.0.0/8", "192.168.1.1", "::1"}}).Check(); err != nil {
		t.Fatal(err)
	}
	err := (Proxies{TrustedProxies: []string{"10.0.0.0/8", "nope", "300.1.1.1"}}).Check()
	if err == nil || strings.Count(err.Error(), "TRUSTED_PROXIES") != 2 {
		t.Fatalf("Check = %v, want two complaints", err)
	}
}

func TestCORSOrigins(t *testing.T) {
	got, err := CORS{CORSAllowedOrigins: []string{"http://localhost:8080", " http://127.0.0.1:8080", "https://shop.example/", ""}}.Origins()
	if want := []string{"http://localhost:8080", "http://127.0.0.1:8080", "https://shop.example"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Origins = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"page.example", "http://page.example/app", "ftp://x", "http://u:p@x", "http://x?q=1", "http://"} {
		if _, err := (CORS{CORSAllowedOrigins: []string{bad}}).Origins(); err == nil || !strings.Contains(err.Error(), "CORS_ALLOWED_ORIGINS") {
			t.Errorf("%q: %v, want refused", bad, err)
		}
	}
}

func TestSharedDefaultsAreOneEach(t *testing.T) {
	var c struct {
		HTTP
		Proxies
		CORS
	}
	if err := LoadFrom(&c, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	if c.ShutdownTimeout != 15*time.Second || c.ReadTimeout != 10*time.Second || len(c.TrustedProxies) != 0 || len(c.CORSAllowedOrigins) != 2 {
		t.Fatalf("defaults %+v", c)
	}
	if err := (HTTP{ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second}).Check(); err == nil || !strings.Contains(err.Error(), "SHUTDOWN_TIMEOUT") {
		t.Fatalf("zero SHUTDOWN_TIMEOUT: %v, want refused", err)
	}
}

// REDIS_WAIT_REPLICAS: a count or "all", its default by the URL, and what
// is refused.
func TestRedisWaitReplicas(t *testing.T) {
	for _, c := range []struct {
		url, v string
		want   int
		bad    bool
	}{
		{"redis://h:6379/0", "", 0, false},
		{"redis+sentinel://h:26379/wr", "", AllReplicas, false},
		{"h1:7000,h2:7001", "", 0, false},
		{"h1:7000,h2:7001", "all", AllReplicas, false},
		{"redis+sentinel://h:26379/wr", "2", 2, false},
		{"redis+sentinel://h:26379/wr", "0", 0, false},
		{"redis://h:6379/0", "ALL", AllReplicas, false},
		{"redis://h:6379/0", "-1", 0, true},
		{"redis://h:6379/0", "some", 0, true},
	} {
		r := Redis{URL: c.url, WaitReplicas: c.v, WaitTimeout: 250 * time.Millisecond}
		if err := r.Check(); (err != nil) != c.bad {
			t.Errorf("%s %q: Check %v, want bad=%v", c.url, c.v, err, c.bad)
		}
		if !c.bad && r.Replicas() != c.want {
			t.Errorf("%s %q: Replicas %d, want %d", c.url, c.v, r.Replicas(), c.want)
		}
	}
	if err := (Redis{WaitTimeout: time.Second}).Check(); err == nil {
		t.Error("a wait of 1s (the read timeout) was accepted")
	}
}
