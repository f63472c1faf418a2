package clientip

import "net/netip"

// Keyer turns client addresses into stable rate-limit keys. A single IPv6
// host usually controls a whole /64 (SLAAC, privacy addresses), so keying on
// the full address lets one client rotate through billions of keys; Keyer
// groups IPv6 addresses into prefixes while IPv4 addresses stay whole.
//
// The zero Keyer uses /32 for IPv4 and /64 for IPv6.
type Keyer struct {
	// IPv4Bits is the IPv4 prefix length, 1 to 32; zero means 32.
	IPv4Bits int
	// IPv6Bits is the IPv6 prefix length, 1 to 128; zero means 64.
	IPv6Bits int
}

// Key returns the prefix that identifies a for rate limiting: a is unmapped
// and its zone dropped first, so ::ffff:192.0.2.1 and 192.0.2.1 share a key.
// The key is a comparable value, usable as a map key without allocation; its
// String form ("2001:db8:1:2::/64") suits string-keyed stores. Key reports
// false for the invalid address and for out-of-range bit counts. It does not
// allocate.
func (k Keyer) Key(a netip.Addr) (netip.Prefix, bool) {
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	a = a.Unmap().WithZone("")
	bits := k.IPv6Bits
	if bits == 0 {
		bits = 64
	}
	if a.Is4() {
		bits = k.IPv4Bits
		if bits == 0 {
			bits = 32
		}
	}
	if bits < 1 || bits > a.BitLen() {
		return netip.Prefix{}, false
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// RateLimitKey returns the zero [Keyer]'s key for a: the address itself for
// IPv4, its /64 for IPv6. The zero Prefix stands for the invalid address.
func RateLimitKey(a netip.Addr) netip.Prefix {
	p, _ := Keyer{}.Key(a)
	return p
}
