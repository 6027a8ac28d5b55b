package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// Host is a network namespace a test makes for a process of its own: a
// host on its own address, joined to the machine by a veth pair. Cut takes
// the link down (a partition: nothing crosses, both ends stay up), Heal
// brings it back. Servers on the machine listen on loopback, so a process
// on the Host reaches them through proxies on the machine's end of the
// link (StartProxyOn(t, host.Gateway, ...)). Removed when the test ends.
type Host struct {
	t testing.TB
	// Name is the namespace; IP the Host's address; Gateway the machine's
	// end of the link.
	Name, IP, Gateway string
	veth              string
}

var hosts atomic.Int32

// StartHost makes a Host. It needs root and iproute2 (CI runs as root);
// without them the test fails saying so.
func StartHost(t testing.TB) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("partition tests make network namespaces (ip netns, veth): run them as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("partition tests need iproute2: apt-get install -y iproute2 (%v)", err)
	}
	n := int(hosts.Add(1))
	pid := os.Getpid() % 10000
	// 10.<200 + pid % 50>.<n>.0/30: distinct per test binary and Host.
	net := fmt.Sprintf("10.%d.%d", 200+pid%50, n%250)
	h := &Host{t: t, Name: fmt.Sprintf("wr%d-%d", pid, n), IP: net + ".2", Gateway: net + ".1",
		veth: fmt.Sprintf("wrh%d-%d", pid, n)}
	peer := fmt.Sprintf("wrn%d-%d", pid, n)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", h.veth).Run()
		_ = exec.Command("ip", "netns", "del", h.Name).Run()
	})
	for _, args := range [][]string{
		{"netns", "add", h.Name},
		{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.Name},
		{"addr", "add", h.Gateway + "/30", "dev", h.veth},
		{"link", "set", h.veth, "up"},
		{"netns", "exec", h.Name, "ip", "addr", "add", h.IP + "/30", "dev", peer},
		{"netns", "exec", h.Name, "ip", "link", "set", peer, "up"},
		{"netns", "exec", h.Name, "ip", "link", "set", "lo", "up"},
	} {
		h.ip(args...)
	}
	return h
}

func (h *Host) ip(args ...string) {
	h.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		h.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Cut partitions the Host from the machine: its link goes down.
func (h *Host) Cut() { h.ip("link", "set", h.veth, "down") }

// Heal brings the link back.
func (h *Host) Heal() { h.ip("link", "set", h.veth, "up") }
