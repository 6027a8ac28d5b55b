package clientkey_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/clientkey"
)

func TestOf(t *testing.T) {
	tests := []struct {
		name, ip string
		bits     int
		want     string
	}{
		{"v4", "203.0.113.7", 64, "203.0.113.7"},
		{"v4 ignores the v6 prefix", "203.0.113.7", 32, "203.0.113.7"},
		{"v4-mapped", "::ffff:203.0.113.7", 64, "203.0.113.7"},
		{"v4-mapped in hex", "::ffff:cb00:7107", 48, "203.0.113.7"},
		{"v6 at /64", "2001:db8:1:2::1", 64, "2001:db8:1:2::/64"},
		{"v6 at /64, another host", "2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"},
		{"v6 at /64, uncanonical spelling", "2001:0DB8:0001:0002:0000:0000:0000:0009", 64, "2001:db8:1:2::/64"},
		{"v6 at /48", "2001:db8:1:2::1", 48, "2001:db8:1::/48"},
		{"v6 at /56", "2001:db8:1:2ff::1", 56, "2001:db8:1:200::/56"},
		{"v6 at /32", "2001:db8:1:2::1", 32, "2001:db8::/32"},
		{"v6 at /128 is the address", "2001:db8:1:2::1", 128, "2001:db8:1:2::1"},
		{"v6 at /127", "2001:db8:1:2::1", 127, "2001:db8:1:2::/127"},
		{"zone dropped", "fe80::1:2%eth0", 64, "fe80::/64"},
		{"zone dropped at /128", "fe80::1%eth0", 128, "fe80::1"},
		{"loopback v6", "::1", 64, "::/64"},
		{"unspecified v6", "::", 64, "::/64"},
		{"bits 0 means the default", "2001:db8:1:2::1", 0, "2001:db8:1:2::/64"},
		{"bits too short means the default", "2001:db8:1:2::1", 8, "2001:db8:1:2::/64"},
		{"bits too long means the default", "2001:db8:1:2::1", 129, "2001:db8:1:2::/64"},
		{"negative bits mean the default", "2001:db8:1:2::1", -1, "2001:db8:1:2::/64"},
		{"empty", "", 64, ""},
		{"garbage", "not-an-ip", 64, "not-an-ip"},
		{"host:port is no address", "203.0.113.7:443", 64, "203.0.113.7:443"},
		{"a prefix is no address", "2001:db8::/64", 64, "2001:db8::/64"},
		{"bracketed", "[2001:db8::1]", 64, "[2001:db8::1]"},
		{"v4 with leading zeros", "203.000.113.007", 64, "203.000.113.007"},
		{"bare zone", "%eth0", 64, "%eth0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clientkey.Of(tt.ip, tt.bits); got != tt.want {
				t.Fatalf("Of(%q, %d) = %q, want %q", tt.ip, tt.bits, got, tt.want)
			}
		})
	}
}

func TestCheckIPv6Prefix(t *testing.T) {
	for bits, ok := range map[int]bool{-1: false, 0: false, 31: false, 32: true, 48: true, 64: true, 128: true, 129: false} {
		if err := clientkey.CheckIPv6Prefix(bits); (err == nil) != ok {
			t.Errorf("CheckIPv6Prefix(%d) = %v, want ok=%v", bits, err, ok)
		}
	}
}

// FuzzOf: no input panics, and the key of an address is the same for every
// address of its network.
func FuzzOf(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "::ffff:203.0.113.7", "2001:db8:1:2::1", "fe80::1%eth0",
		"::", "::1", "", "not-an-ip", "2001:db8::/64", "[::1]:80", "1.2.3.4%x", "::ffff:1.2.3.4%zone", "%"} {
		for _, bits := range []int{0, 48, 64, 128, -7, 1000} {
			f.Add(s, bits)
		}
	}
	f.Fuzz(func(t *testing.T, ip string, bits int) {
		key := clientkey.Of(ip, bits)
		a, err := netip.ParseAddr(ip)
		if err != nil {
			if key != ip {
				t.Fatalf("Of(%q) = %q; garbage must come back unchanged", ip, key)
			}
			return
		}
		a = a.Unmap().WithZone("")
		if a.Is4() {
			if key != a.String() {
				t.Fatalf("Of(%q) = %q, want the IPv4 address %s", ip, key, a)
			}
			return
		}
		if bits < clientkey.MinIPv6Prefix || bits > clientkey.MaxIPv6Prefix {
			bits = clientkey.DefaultIPv6Prefix
		}
		if bits == clientkey.MaxIPv6Prefix {
			if key != a.String() {
				t.Fatalf("Of(%q, 128) = %q, want the address", ip, key)
			}
			return
		}
		p, err := netip.ParsePrefix(key)
		if err != nil || p.Bits() != bits || !p.Contains(a) || p.Masked() != p || strings.Contains(key, "%") {
			t.Fatalf("Of(%q, %d) = %q: not the canonical /%d holding the address (%v)", ip, bits, key, bits, err)
		}
		// Every host bit flipped: still the same network, still the same key
		// (unless that lands in ::ffff:0:0/96, which is IPv4 and counts alone).
		b := a.As16()
		for i := bits; i < 128; i++ {
			b[i/8] ^= 1 << (7 - i%8)
		}
		flipped := netip.AddrFrom16(b)
		if other := flipped.String(); !flipped.Is4In6() && clientkey.Of(other, bits) != key {
			t.Fatalf("Of(%q) = %q but Of(%q) = %q: one network, two keys", ip, key, other, clientkey.Of(other, bits))
		}
	})
}
