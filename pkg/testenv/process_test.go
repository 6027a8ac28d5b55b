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
	if len(seen) != 200 {
		t.Errorf("200 FreePort calls gave %d distinct ports, want 200: each is reserved until the test ends", len(seen))
	}
	p := FreePort(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("listen on the port FreePort gave: %v", err)
	}
	_ = ln.Close()
}

// TestFreePortReservesAcrossTests: a port FreePort gave is locked until its
// test ends, and every other FreePort, in this binary or another one (a
// lock on the same file from another process fails alike), skips it; the
// cleanup releases it. A block is reserved whole.
func TestFreePortReservesAcrossTests(t *testing.T) {
	var held, block int
	t.Run("holder", func(t *testing.T) {
		var release func()
		held = FreePort(t)
		block, release = freePorts(t, 3)
		t.Cleanup(release)
		for _, p := range []int{held, block, block + 1, block + 2} {
			if lock, ok := reservePort(t, p); ok {
				_ = lock.Close()
				t.Errorf("port %d was reserved again while its test runs", p)
			}
		}
	})
	for _, p := range []int{held, block, block + 2} {
		lock, ok := reservePort(t, p)
		if !ok {
			t.Fatalf("port %d is still reserved after its test ended", p)
		}
		_ = lock.Close()
	}
}

// TestFreePortSkipsAPortInUse: a port something already listens on (a
// server outside the reservations, or one a killed run left behind) is
// never handed out, though nothing reserved it; its reservation is let go.
func TestFreePortSkipsAPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().(*net.TCPAddr).Port
	// The kernel's pick is in the ephemeral range; FreePort's floor is
	// below it, so the picker is told to offer the busy port first.
	picks := 0
	old := pickPort
	pickPort = func(lo, hi int) int {
		picks++
		if picks == 1 {
			return inUse
		}
		return old(lo, hi)
	}
	defer func() { pickPort = old }()
	p := FreePort(t)
	if p == inUse || picks < 2 {
		t.Fatalf("FreePort = %d after %d picks; the busy port %d was handed out", p, picks, inUse)
	}
	if lock, ok := reservePort(t, inUse); !ok {
		t.Fatalf("the busy port %d stays reserved after it was refused", inUse)
	} else {
		_ = lock.Close()
	}
}
