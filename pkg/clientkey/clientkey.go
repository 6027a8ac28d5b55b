// Package clientkey names the client that a per-address limit counts. An
// IPv4 address is scarce, so it counts alone; an IPv6 client is handed a
// whole prefix (a /64 for a home or a phone, often a /56 or /48 for a site)
// and can pick a new address from it for every request, so it counts by
// its prefix.
package clientkey

import (
	"fmt"
	"net/netip"
)

// DefaultIPv6Prefix is the prefix length an IPv6 client counts by unless
// configured: the smallest prefix a network assigns to one subscriber.
const DefaultIPv6Prefix = 64

// The prefix lengths CLIENT_IPV6_PREFIX may take: shorter than /32 would lump
// a whole provider together; /128 counts every address alone.
const (
	MinIPv6Prefix = 32
	MaxIPv6Prefix = 128
)

// CheckIPv6Prefix refuses a prefix length outside MinIPv6Prefix..MaxIPv6Prefix.
func CheckIPv6Prefix(bits int) error {
	if bits < MinIPv6Prefix || bits > MaxIPv6Prefix {
		return fmt.Errorf("CLIENT_IPV6_PREFIX must be %d..%d, not %d", MinIPv6Prefix, MaxIPv6Prefix, bits)
	}
	return nil
}

// Of returns the key per-client limits count ip under: an IPv4 address,
// also one written IPv4-mapped ("::ffff:192.0.2.1"), as the address; an IPv6
// address as its network of ipv6Bits bits in canonical form
// ("2001:db8:1:2::/64"), its zone dropped; at 128 bits as the address alone.
// ipv6Bits outside MinIPv6Prefix..MaxIPv6Prefix means DefaultIPv6Prefix.
//
// A string that is no address (which gin's ClientIP never gives for a TCP
// peer) is returned unchanged, so it still counts alone, as before.
func Of(ip string, ipv6Bits int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	if ipv6Bits < MinIPv6Prefix || ipv6Bits > MaxIPv6Prefix {
		ipv6Bits = DefaultIPv6Prefix
	}
	if ipv6Bits == MaxIPv6Prefix {
		return a.String()
	}
	p, err := a.Prefix(ipv6Bits)
	if err != nil {
		return a.String()
	}
	return p.String()
}
