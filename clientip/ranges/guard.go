package ranges

import (
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// Prefix-length floors: no provider publishes a block wider than these, and
// a list that has one is wrong (a /0 split in halves, a typo).
const (
	minBitsIPv4 = 8
	minBitsIPv6 = 16
)

// reserved is space no proxy connects from; a list that overlaps it is wrong.
var reserved = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("ff00::/8"),
}

// embedsIPv4 lists the IPv6 prefixes whose addresses stand for IPv4 hosts,
// each of them for the whole of IPv4: trusting one of them whole trusts every
// IPv4 host's translated or tunnelled address. minBits is the shortest prefix
// inside it that the refresher accepts: one whose IPv4 part is pinned to at
// least the IPv4 floor (/8).
var embedsIPv4 = [...]struct {
	prefix  netip.Prefix
	minBits int
	what    string
}{
	// The IPv4 address is the last 32 bits (RFC 6052 §2.2, the /96 format).
	{netip.MustParsePrefix("64:ff9b::/96"), 96 + minBitsIPv4, "the NAT64 well-known prefix (RFC 6052)"},
	// Network-specific NAT64 prefixes of any RFC 6052 length; /104 pins the
	// first octet of the IPv4 address in every one of those formats.
	{netip.MustParsePrefix("64:ff9b:1::/48"), 96 + minBitsIPv4, "the local-use NAT64 prefix (RFC 8215)"},
	// 2002:V4HI:V4LO::/48 belongs to the IPv4 address V4 (RFC 3056 §2).
	{netip.MustParsePrefix("2002::/16"), 16 + minBitsIPv4, "6to4 (RFC 3056)"},
	// The client's public IPv4 address, inverted, is the last 32 bits
	// (RFC 4380 §4); anyone can use any Teredo server.
	{netip.MustParsePrefix("2001::/32"), 96 + minBitsIPv4, "Teredo (RFC 4380)"},
}

func localSpace() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []clientip.PrefixSet{clientip.Loopback(), clientip.Private(), clientip.LinkLocal(), clientip.CGNAT()} {
		ps = append(ps, s.Prefixes()...)
	}
	return ps
}

// CheckSet reports whether a refresher would accept s as a trusted set at
// all, whatever it replaces: s must not be empty and must not hold 0.0.0.0/0
// or ::/0, nor the whole of an IPv6 prefix whose addresses stand for every
// IPv4 host — NAT64's 64:ff9b::/96 (RFC 6052) and 64:ff9b:1::/48 (RFC 8215),
// 6to4's 2002::/16 (RFC 3056), Teredo's 2001::/32 (RFC 4380) —
// ([ErrAllAddresses]); it must not hold an IPv4 prefix shorter than /8, an
// IPv6 prefix shorter than /16, or a part of one of those IPv4-embedding
// prefixes that stands for more than an IPv4 /8: shorter than /24 in 6to4,
// than /104 in the others ([ErrTooBroad]); nor a prefix overlapping
// reserved space ([ErrReserved]); unless allowPrivate, it must not overlap
// loopback, private, link-local or CGNAT space either ([ErrPrivate]). The
// error names the first offending prefix. The refresher applies it to every
// fetched set and to its disk copy, and the presets package to every set it
// is given.
func CheckSet(s clientip.PrefixSet, allowPrivate bool) error {
	if s.Len() == 0 {
		return ErrEmpty
	}
	var local []netip.Prefix
	if !allowPrivate {
		local = localSpace()
	}
	for _, p := range s.Prefixes() {
		if p.Bits() == 0 {
			return fmt.Errorf("%w: %s", ErrAllAddresses, p)
		}
		if floor := minBitsIPv6; p.Addr().Is4() && p.Bits() < minBitsIPv4 || p.Addr().Is6() && p.Bits() < floor {
			return fmt.Errorf("%w: %s (the floor is /%d for IPv4 and /%d for IPv6)", ErrTooBroad, p, minBitsIPv4, minBitsIPv6)
		}
		for _, e := range embedsIPv4 {
			switch {
			case !p.Overlaps(e.prefix):
			case p.Bits() <= e.prefix.Bits():
				return fmt.Errorf("%w: %s holds %s, %s, whose addresses stand for every IPv4 host", ErrAllAddresses, p, e.prefix, e.what)
			case p.Bits() < e.minBits:
				return fmt.Errorf("%w: %s lies in %s, %s, and stands for more IPv4 hosts than a /%d (the floor there is /%d)", ErrTooBroad, p, e.prefix, e.what, minBitsIPv4, e.minBits)
			}
		}
		for _, r := range reserved {
			if p.Overlaps(r) {
				return fmt.Errorf("%w: %s overlaps %s", ErrReserved, p, r)
			}
		}
		for _, r := range local {
			if p.Overlaps(r) {
				return fmt.Errorf("%w: %s overlaps %s (set AllowPrivate if you publish your own internal ranges)", ErrPrivate, p, r)
			}
		}
	}
	return nil
}

// Change describes how a new set differs from the current one, by address
// space rather than by prefix count, so that a provider that merges or splits
// prefixes without changing what they cover changes nothing. Each figure is
// the larger of its IPv4 and IPv6 values, as a fraction of the current set's
// space in that family; a family the current set lacks and the new set has is
// an infinite growth.
type Change struct {
	// Shrink is the fraction of the current space the new set drops.
	Shrink float64
	// Growth is the new space the new set adds, as a fraction of the
	// current space.
	Growth float64
	// ShrinkFamily and GrowthFamily name the family ("IPv4" or "IPv6") of
	// each figure.
	ShrinkFamily, GrowthFamily string
}

// Diff measures how next differs from cur. An empty cur has nothing to
// compare to, so its Change is zero.
func Diff(cur, next clientip.PrefixSet) Change {
	var c Change
	if cur.Len() == 0 {
		return c
	}
	a, b := cur.Prefixes(), next.Prefixes()
	for _, fam := range []struct {
		name string
		v4   bool
	}{{"IPv4", true}, {"IPv6", false}} {
		old, nu := spans(a, fam.v4), spans(b, fam.v4)
		oldSize, newSize, both := total(old), total(nu), intersect(old, nu)
		var shrink, growth float64
		switch {
		case oldSize > 0:
			shrink, growth = (oldSize-both)/oldSize, (newSize-both)/oldSize
		case newSize > 0:
			growth = inf
		}
		if shrink > c.Shrink {
			c.Shrink, c.ShrinkFamily = shrink, fam.name
		}
		if growth > c.Growth {
			c.Growth, c.GrowthFamily = growth, fam.name
		}
	}
	return c
}

var inf = math.Inf(1)

// String describes the change for a log line, each fraction as a percentage
// ("new family" for a family the old list did not have):
// "shrink 12.5% (IPv4), growth 0.0%".
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shrink %s", percent(c.Shrink))
	if c.ShrinkFamily != "" {
		fmt.Fprintf(&b, " (%s)", c.ShrinkFamily)
	}
	fmt.Fprintf(&b, ", growth %s", percent(c.Growth))
	if c.GrowthFamily != "" {
		fmt.Fprintf(&b, " (%s)", c.GrowthFamily)
	}
	return b.String()
}

func percent(f float64) string {
	if f == inf {
		return "new family"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// u128 is an address as a 128-bit number (IPv4 in the low bits).
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) add1() (u128, bool) {
	lo, c := bits.Add64(a.lo, 1, 0)
	hi, c := bits.Add64(a.hi, 0, c)
	return u128{hi, lo}, c != 0
}

// span is an inclusive range of addresses.
type span struct{ lo, hi u128 }

func (s span) size() float64 {
	lo, b := bits.Sub64(s.hi.lo, s.lo.lo, 0)
	hi, _ := bits.Sub64(s.hi.hi, s.lo.hi, b)
	return float64(hi)*0x1p64 + float64(lo) + 1
}

func prefixSpan(p netip.Prefix) span {
	var lo u128
	host := p.Addr().BitLen() - p.Bits()
	if p.Addr().Is4() {
		b := p.Addr().As4()
		lo.lo = uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	} else {
		b := p.Addr().As16()
		for i := range 8 {
			lo.hi = lo.hi<<8 | uint64(b[i])
			lo.lo = lo.lo<<8 | uint64(b[8+i])
		}
	}
	var mask u128
	switch {
	case host >= 64:
		mask = u128{hi: 1<<(host-64) - 1, lo: ^uint64(0)}
		if host == 128 {
			mask.hi = ^uint64(0)
		}
	default:
		mask.lo = 1<<host - 1
	}
	return span{lo, u128{lo.hi | mask.hi, lo.lo | mask.lo}}
}

// spans returns the merged ranges of the prefixes of one family, in order.
// ps is in canonical order (by address, then length).
func spans(ps []netip.Prefix, v4 bool) []span {
	var out []span
	for _, p := range ps {
		if p.Addr().Is4() != v4 {
			continue
		}
		s := prefixSpan(p)
		if n := len(out); n > 0 {
			last := &out[n-1]
			next, overflow := last.hi.add1()
			if overflow || !next.less(s.lo) { // s starts inside or right after last
				if last.hi.less(s.hi) {
					last.hi = s.hi
				}
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

func total(ss []span) float64 {
	var t float64
	for _, s := range ss {
		t += s.size()
	}
	return t
}

// intersect returns the number of addresses two merged range lists share.
func intersect(a, b []span) float64 {
	var t float64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := a[i].lo, a[i].hi
		if lo.less(b[j].lo) {
			lo = b[j].lo
		}
		if b[j].hi.less(hi) {
			hi = b[j].hi
		}
		if !hi.less(lo) {
			t += span{lo, hi}.size()
		}
		if a[i].hi.less(b[j].hi) {
			i++
		} else {
			j++
		}
	}
	return t
}
