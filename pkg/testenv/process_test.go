package testenv

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePortIsBelowTheEphemeralRange: ports FreePort hands out are never
// ones the kernel gives to outgoing connections, so a client socket cannot
// take a service's port between FreePort and the service's listen.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if p < freePortFloor || p >= low {
			t.Fatalf("FreePort = %d, want in [%d, %d)", p, freePortFloor, low)
		}
		seen[p] = true
	}
	if len(seen) < 150 {
		t.Errorf("200 FreePort calls gave %d distinct ports, want >= 150 (spread, so parallel tests rarely meet)", len(seen))
	}
	p := FreePort(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("listen on the port FreePort gave: %v", err)
	}
	_ = ln.Close()
}
