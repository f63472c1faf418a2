package clientip

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// PrefixSet is an immutable set of IP prefixes: the proxies a [Resolver] trusts,
// or the addresses it treats as masquerading nodes.
//
// The zero value is the empty set: it contains no address, so a zero
// [Config] trusts nothing. A PrefixSet is a small value that may be copied
// freely and is safe for concurrent use; [PrefixSet.Set] and
// [PrefixSet.UnmarshalText] replace the receiver's contents with a new set and
// never modify a set that was copied from it.
//
// Membership is decided on the canonical form of an address: IPv4-mapped IPv6
// addresses are unmapped and zones are ignored, so ::ffff:10.0.0.1 is inside
// 10.0.0.0/8 and fe80::1%eth0 is inside fe80::/10. Prefixes are normalised the
// same way when the set is built (::ffff:10.0.0.0/104 is stored as 10.0.0.0/8), so
// no notation can alias a trusted address in or out of the set.
type PrefixSet struct {
	list []netip.Prefix // canonical, sorted, without duplicates
	v4   *trieNode
	v6   *trieNode
}

// Named presets accepted by [ParsePrefixSet] and returned by the functions
// [Loopback], [Private], [LinkLocal] and [CGNAT].
var presets = map[string][]string{
	"loopback":  {"127.0.0.0/8", "::1/128"},
	"private":   {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"},
	"linklocal": {"169.254.0.0/16", "fe80::/10"},
	"cgnat":     {"100.64.0.0/10"},
}

func preset(name string) PrefixSet {
	var ps []netip.Prefix
	for _, s := range presets[name] {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return buildPrefixSet(ps)
}

// Loopback returns the loopback ranges 127.0.0.0/8 and ::1/128 (preset name "loopback").
func Loopback() PrefixSet { return preset("loopback") }

// Private returns the RFC 1918 ranges and the IPv6 unique local range fc00::/7
// (preset name "private").
func Private() PrefixSet { return preset("private") }

// LinkLocal returns 169.254.0.0/16 and fe80::/10 (preset name "linklocal").
func LinkLocal() PrefixSet { return preset("linklocal") }

// CGNAT returns the RFC 6598 shared address space 100.64.0.0/10, which some
// Kubernetes networks use for pods and nodes (preset name "cgnat").
func CGNAT() PrefixSet { return preset("cgnat") }

// NewPrefixSet returns the set of the given prefixes. Each prefix must be valid
// and canonical (no host bits set, as [netip.Prefix.Masked] would return it);
// IPv4-mapped IPv6 prefixes of length 96 or more are stored as IPv4 prefixes.
func NewPrefixSet(prefixes ...netip.Prefix) (PrefixSet, error) {
	out := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		c, err := canonicalPrefix(p, p.String())
		if err != nil {
			return PrefixSet{}, err
		}
		out = append(out, c)
	}
	return buildPrefixSet(out), nil
}

// ParsePrefixSet parses a list of addresses, CIDR prefixes and preset names
// separated by commas and/or white space, such as
// "10.0.0.0/8, 192.0.2.7 2001:db8::/32 loopback". A bare address stands for a
// single host (/32 or /128). Preset names are "loopback", "private",
// "linklocal" and "cgnat", in any case. A prefix with host bits set
// (10.0.0.1/8), an address with a zone, and anything else that is not one of
// these forms is an error wrapping [ErrInvalidPrefix] that names the entry.
// An empty string yields the empty set.
func ParsePrefixSet(s string) (PrefixSet, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	}) {
		if names, ok := presets[strings.ToLower(f)]; ok {
			for _, n := range names {
				out = append(out, netip.MustParsePrefix(n))
			}
			continue
		}
		p, err := parsePrefixEntry(f)
		if err != nil {
			return PrefixSet{}, err
		}
		out = append(out, p)
	}
	return buildPrefixSet(out), nil
}

// MustParsePrefixSet is like [ParsePrefixSet] but panics on error. Use it only
// for static configuration written in the program.
func MustParsePrefixSet(s string) PrefixSet {
	ps, err := ParsePrefixSet(s)
	if err != nil {
		panic(err)
	}
	return ps
}

func parsePrefixEntry(f string) (netip.Prefix, error) {
	if strings.Contains(f, "/") {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%w %q: %v", ErrInvalidPrefix, f, err)
		}
		return canonicalPrefix(p, f)
	}
	a, err := netip.ParseAddr(f)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w %q: not an address, a CIDR prefix or a preset name (loopback, private, linklocal, cgnat)", ErrInvalidPrefix, f)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%w %q: addresses with a zone cannot be trusted", ErrInvalidPrefix, f)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func canonicalPrefix(p netip.Prefix, text string) (netip.Prefix, error) {
	if !p.IsValid() {
		return netip.Prefix{}, fmt.Errorf("%w %q: invalid prefix", ErrInvalidPrefix, text)
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%w %q: addresses with a zone cannot be trusted", ErrInvalidPrefix, text)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%w %q: host bits are set (did you mean %s?)", ErrInvalidPrefix, text, m)
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96), nil
	}
	return p, nil
}

func buildPrefixSet(ps []netip.Prefix) PrefixSet {
	if len(ps) == 0 {
		return PrefixSet{}
	}
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	ps = slices.Compact(ps)
	s := PrefixSet{list: ps}
	for _, p := range ps {
		a := p.Addr()
		if a.Is4() {
			if s.v4 == nil {
				s.v4 = new(trieNode)
			}
			b := a.As4()
			s.v4.insert(b[:], p.Bits())
		} else {
			if s.v6 == nil {
				s.v6 = new(trieNode)
			}
			b := a.As16()
			s.v6.insert(b[:], p.Bits())
		}
	}
	return s
}

// Contains reports whether a, in canonical form (unmapped, zone ignored), lies
// inside one of the set's prefixes. The invalid address is in no set. Its cost
// depends on the depth of the matching prefixes, not on how many prefixes the set
// holds. It does not allocate.
func (s PrefixSet) Contains(a netip.Addr) bool {
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		return s.contains4(as4(a))
	}
	if a.Is6() && s.v6 != nil {
		return s.v6.contains6(halves(a))
	}
	return false
}

// containsCanon is Contains for an address already in canonical form. With
// contains4 it is the one trust predicate of the chain walk.
func (s *PrefixSet) containsCanon(a netip.Addr) bool {
	if a.Is4() {
		return s.contains4(as4(a))
	}
	return s.v6 != nil && a.Is6() && s.v6.contains6(halves(a))
}

// contains4 reports whether the IPv4 address ip (in host order) is in the set.
func (s *PrefixSet) contains4(ip uint32) bool { return s.v4 != nil && s.v4.contains4(ip) }

// as4 returns the IPv4 address a as a host-order integer.
func as4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// Covers reports whether every address of p is in the set, as
// [PrefixSet.Contains] decides membership: p may be covered by one of the
// set's prefixes or only by several together (10.0.0.0/9 and 10.128.0.0/9
// cover 10.0.0.0/8). p is taken in canonical form (host bits masked, an
// IPv4-mapped prefix of length 96 or more as its IPv4 prefix); an invalid
// prefix is covered by no set. Contains looks up IPv4-mapped IPv6 addresses
// among the IPv4 prefixes, so an IPv6 prefix that includes ::ffff:0:0/96 is
// covered when the set's IPv4 prefixes cover all of IPv4 and its IPv6
// prefixes cover the rest of it. It does not allocate; its
// cost grows with the set's prefixes inside p, so it is for configuration
// checks, not per connection.
func (s PrefixSet) Covers(p netip.Prefix) bool {
	if !p.IsValid() {
		return false
	}
	p = p.Masked()
	a := p.Addr().WithZone("")
	if a.Is4In6() && p.Bits() >= 96 {
		a, p = a.Unmap(), netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if a.Is4() {
		b := a.As4()
		return s.v4 != nil && s.v4.covers(b[:], p.Bits())
	}
	b := a.As16()
	if mapped := [16]byte{10: 0xff, 11: 0xff}; p.Bits() < 96 && p.Contains(netip.AddrFrom16(mapped)) {
		// Contains unmaps the addresses of ::ffff:0:0/96 and looks them up
		// in the IPv4 trie, so that part of p needs all of IPv4 ...
		if s.v4 == nil || !s.v4.covers(nil, 0) {
			return false
		}
		// ... and the rest of p the IPv6 trie: at each bit from p's length
		// down to the mapped /96, the half that does not hold it.
		for l := p.Bits(); l < 96; l++ {
			half := mapped
			half[l/8] ^= 0x80 >> (l % 8)
			if s.v6 == nil || !s.v6.covers(half[:], l+1) {
				return false
			}
		}
		return true
	}
	return s.v6 != nil && s.v6.covers(b[:], p.Bits())
}

// Len reports the number of distinct prefixes in the set.
func (s PrefixSet) Len() int { return len(s.list) }

// Prefixes returns a copy of the set's prefixes in canonical order.
func (s PrefixSet) Prefixes() []netip.Prefix { return slices.Clone(s.list) }

// Union returns the set of the prefixes of s and o.
func (s PrefixSet) Union(o PrefixSet) PrefixSet {
	if o.Len() == 0 {
		return s
	}
	if s.Len() == 0 {
		return o
	}
	return buildPrefixSet(append(slices.Clone(s.list), o.list...))
}

// String returns the prefixes separated by commas, a form [ParsePrefixSet] accepts.
func (s PrefixSet) String() string {
	var b strings.Builder
	for i, p := range s.list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Set implements [flag.Value]: it parses v like [ParsePrefixSet] and adds the
// result to the set, so a repeated flag accumulates prefixes.
func (s *PrefixSet) Set(v string) error {
	n, err := ParsePrefixSet(v)
	if err != nil {
		return err
	}
	*s = s.Union(n)
	return nil
}

// MarshalText implements [encoding.TextMarshaler] with the form of [PrefixSet.String].
func (s PrefixSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler]: it replaces the set with
// the one [ParsePrefixSet] parses from text, so prefix sets load from
// environment variables and configuration files.
func (s *PrefixSet) UnmarshalText(text []byte) error {
	n, err := ParsePrefixSet(string(text))
	if err != nil {
		return err
	}
	*s = n
	return nil
}
