// Package queuetest holds what the contract suites of the services' ports
// (ordertest, restoretest, streamtest) share. Only tests import it.
package queuetest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// ID is a queue id of its own for one contract case: the real stores share
// a server between tests, and the fakes do not care.
func ID(t testing.TB) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "contract-" + hex.EncodeToString(b)
}
