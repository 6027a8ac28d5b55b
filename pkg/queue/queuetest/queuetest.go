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

// Case is one case of a contract suite over a port P, seeded with S (what
// puts state into the port the way production does).
type Case[P, S any] struct {
	Name string
	Run  func(t *testing.T, port P, seed S)
}

// RunContract runs every case as a parallel subtest, each on a fresh,
// empty port and its seeder from newPort.
func RunContract[P, S any](t *testing.T, newPort func(t *testing.T) (P, S), cases []Case[P, S]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			port, seed := newPort(t)
			c.Run(t, port, seed)
		})
	}
}

// SpearmanRho is the rank correlation between the order people entered in
// (entry) and the order they were drawn or admitted in (drawn): 0 for no
// relation, 1 for the same order. entry and drawn hold the same ids.
func SpearmanRho(entry, drawn []string) float64 {
	rank := make(map[string]int, len(drawn))
	for i, u := range drawn {
		rank[u] = i
	}
	n := float64(len(entry))
	var d2 float64
	for i, u := range entry {
		d := float64(i - rank[u])
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}
