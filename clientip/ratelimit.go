package clientip

import (
	"fmt"
	"net/netip"
)

// Keyer turns client addresses into stable rate-limit keys. A single IPv6
// host usually controls a whole /64 (SLAAC, privacy addresses), so keying on
// the full address lets one client rotate through billions of keys; Keyer
// groups IPv6 addresses into prefixes while IPv4 addresses stay whole.
//
// An IPv6 address that carries an IPv4 address is keyed by that IPv4
// address, as the IPv4 host it stands for would be:
//
//   - 6to4 (2002::/16, RFC 3056 §2): one IPv4 address owns the /48 behind
//     it, 65,536 /64s, so a /64 key would give it 65,536 buckets;
//   - Teredo (2001::/32, RFC 4380 §4): the client's public IPv4 address is
//     the last 32 bits, inverted; by /64 every client of one Teredo server
//     would share a bucket;
//   - NAT64 (64:ff9b::/96, RFC 6052 §2.1, and NAT64 below, §2.2): an
//     IPv6-only service reached by IPv4 clients through a translator sees
//     each of them as the translator's prefix and the client's address; by
//     /64 every IPv4 client would share one bucket, and one abusive client
//     would exhaust it for all.
//
// The zero Keyer uses /32 for IPv4 (an embedded one too) and /64 for IPv6.
// A Keyer is a value: copy it freely; its methods are safe for concurrent
// use.
type Keyer struct {
	// IPv4Bits is the IPv4 prefix length, 1 to 32; zero means 32.
	IPv4Bits int
	// IPv6Bits is the IPv6 prefix length, 1 to 128; zero means 64.
	IPv6Bits int
	// NAT64 is a network-specific NAT64 prefix (RFC 6052 §2.2: an IPv6
	// prefix of length 32, 40, 48, 56, 64 or 96, host bits zero) whose
	// addresses are keyed by the IPv4 address they embed, as those of the
	// well-known prefix 64:ff9b::/96 are. Set it when the service sits
	// behind a translator of its own (often in 64:ff9b:1::/48, RFC 8215):
	// its addresses are otherwise ordinary IPv6 ones. The zero Prefix means
	// none. Any other prefix makes every Key report false.
	NAT64 netip.Prefix
	// EmbeddedAsIPv6, when true, keys 6to4, Teredo and NAT64 addresses by
	// their IPv6Bits prefix, as any other IPv6 address, and ignores NAT64.
	EmbeddedAsIPv6 bool
}

// Key returns the prefix that identifies a for rate limiting: a is unmapped
// and its zone dropped first, so ::ffff:192.0.2.1 and 192.0.2.1 share a key,
// and an address embedding an IPv4 address (6to4, Teredo, NAT64; see
// [Keyer]) is keyed by that IPv4 address. The key is a comparable value,
// usable as a map key without allocation; its String form
// ("2001:db8:1:2::/64") suits string-keyed stores. Key reports false for the
// invalid address, for out-of-range bit counts and for a NAT64 prefix RFC
// 6052 does not allow. It does not allocate.
func (k Keyer) Key(a netip.Addr) (netip.Prefix, bool) {
	if !a.IsValid() || !k.nat64Valid() {
		return netip.Prefix{}, false
	}
	a = a.Unmap().WithZone("")
	if a.Is6() && !k.EmbeddedAsIPv6 {
		if v4, ok := k.embedded(a); ok {
			a = v4
		}
	}
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

// Valid reports why k cannot key addresses (a prefix length out of range,
// a NAT64 prefix RFC 6052 does not allow), wrapping [ErrInvalidConfig], or
// nil when it can.
func (k Keyer) Valid() error {
	switch {
	case k.IPv4Bits < 0 || k.IPv4Bits > 32:
		return fmt.Errorf("%w: Keyer.IPv4Bits %d is not 1 to 32", ErrInvalidConfig, k.IPv4Bits)
	case k.IPv6Bits < 0 || k.IPv6Bits > 128:
		return fmt.Errorf("%w: Keyer.IPv6Bits %d is not 1 to 128", ErrInvalidConfig, k.IPv6Bits)
	case !k.nat64Valid():
		return fmt.Errorf("%w: Keyer.NAT64 %s is not an IPv6 prefix of 32, 40, 48, 56, 64 or 96 bits with its host bits zero (RFC 6052 §2.2)", ErrInvalidConfig, k.NAT64)
	}
	return nil
}

// nat64Valid says whether k.NAT64 is unset or a prefix RFC 6052 §2.2
// allows.
func (k Keyer) nat64Valid() bool {
	p := k.NAT64
	if p == (netip.Prefix{}) {
		return true
	}
	if !p.IsValid() || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" || p.Masked() != p {
		return false
	}
	switch p.Bits() {
	case 32, 40, 48, 56, 64, 96:
		return true
	}
	return false
}

// wellKnownNAT64 is RFC 6052 §2.1's prefix.
var wellKnownNAT64 = netip.MustParsePrefix("64:ff9b::/96")

// embedded returns the IPv4 address the IPv6 address a carries, if it is a
// 6to4, Teredo or NAT64 address.
func (k Keyer) embedded(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case b[0] == 0x20 && b[1] == 0x02: // 6to4: 2002:V4HI:V4LO::/48
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo: the client's address, inverted
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	case wellKnownNAT64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case k.NAT64.IsValid() && k.NAT64.Contains(a):
		// RFC 6052 §2.2: the IPv4 address follows the prefix, skipping
		// bits 64 to 71 (the "u" octet).
		var v4 [4]byte
		i := k.NAT64.Bits() / 8
		for n := range v4 {
			if i == 8 {
				i++
			}
			v4[n] = b[i]
			i++
		}
		return netip.AddrFrom4(v4), true
	}
	return netip.Addr{}, false
}

// RateLimitKey returns the zero [Keyer]'s key for a: the address itself for
// IPv4, its /64 for IPv6, the IPv4 address embedded in a 6to4, Teredo or
// NAT64 (64:ff9b::/96) address. The zero Prefix stands for the invalid
// address.
func RateLimitKey(a netip.Addr) netip.Prefix {
	p, _ := Keyer{}.Key(a)
	return p
}
