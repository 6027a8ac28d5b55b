// Package testenv gives integration tests the real servers they talk to.
//
// A server is found at the URL its environment variable names (REDIS_URL, ...),
// defaulting to localhost. When nothing answers there and a Docker engine does,
// one container per server per test binary is started by deploy/containers
// (testcontainers-go, kept out of this module: see container.go). Otherwise
// the test fails, saying how to start the server: a missing server never
// skips a test silently.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
)

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// ID returns an id unique to this test run, usable as a queue id, a database
// name or an exchange suffix: the test's name, lower-cased, plus random hex.
func ID(t testing.TB) string {
	name := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[len(name)-40:]
		name = strings.TrimLeft(name, "-")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	if name == "" {
		name = "t"
	}
	return name + "-" + hex.EncodeToString(b)
}
