package clientip

import (
	"encoding/binary"
	"net/netip"
	"strings"
)

// withinBudget reports whether a header's lines fit in max bytes. Each line
// costs its length plus one, so that many empty lines also count; the loop stops
// as soon as the budget is spent.
func withinBudget(lines []string, max int) bool {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
		if n > max {
			return false
		}
	}
	return true
}

// walkXFF continues the walk of Resolver.walk over X-Forwarded-For from
// position pos; res.Via holds the hop last stepped over. It reads the list from
// the right, across all of the header's lines (later lines first), as one list:
// "a, b" + "c" is a, b, c (RFC 9110 §5.6.1), skipping empty elements and
// trimming optional white space. It keeps its state in locals, parses the common
// entries, a dotted quad or plain IPv6 text with optional white space around
// it, backwards in the same pass that finds the entry's start, checking trust
// on a dotted quad's parsed bytes and building its Addr only when it is
// needed, and on plain IPv6 text's parsed halves. An entry after a trusted
// plain IPv6 one is read as IPv6 first, a dotted quad first otherwise.
// Anything else takes the general path through parseListAddr.
func (r *Resolver) walkXFF(res *Result, lines []string, pos int) (Reason, string) {
	cur := res.Via // the hop last stepped over
	// byRange is trusted-range mode with IPv4 prefixes to trust; without
	// them every dotted quad takes the general path, where it is the client.
	t4, t6, maxHops := r.trusted.v4, r.trusted.v6, r.maxHops
	byRange, byRange6 := r.quads, r.quads6
	// A trusted dotted quad is kept as curIP and made an Addr only if it is
	// still the last trusted hop when the walk ends.
	var curIP uint32
	curLazy := false
	for li := len(lines) - 1; li >= 0; li-- {
		l := lines[li]
		// l[:end] is the unread part of the line; end < 0 once it is used up.
	line:
		for end := len(l); end >= 0; {
			var a netip.Addr
			if ip, j := back4(l, end); j >= -1 {
				if pos++; pos > maxHops {
					return r.fail(res, pos, ReasonTooManyHops, "")
				}
				if ip == 0 {
					return r.fail(res, pos, ReasonUnspecified, trimOWS(l[j+1:end]))
				}
				end = j
				if byRange {
					// Trusted-range mode: the trust predicate on the parsed
					// integer is the whole decision. This is
					// r.trusted.contains4(ip) spelt out, because the
					// compiler does not inline it and a call per entry costs
					// 8% of xff3's instructions and 9% of xff20's (callgrind).
					if t4.full4(ip) || t4.kids4(ip) && t4.descend4(ip) {
						curIP, curLazy = ip, true
						continue
					}
					if curLazy {
						cur = addrFrom4(curIP)
					}
					return r.found(res, addrFrom4(ip), r.source, pos, cur), ""
				}
				a = addrFrom4(ip)
			} else if hi, lo, j := back6(l, end); j >= -1 {
				// Plain IPv6 text, and the trusted entries that follow it
				// in this inner loop: a chain is mostly of one family, so
				// each is read as IPv6 first, saving back4's failure.
				for {
					if pos++; pos > maxHops {
						return r.fail(res, pos, ReasonTooManyHops, "")
					}
					if hi|lo == 0 || hi == 0 && lo == 0xffff<<32 { // :: or ::ffff:0:0
						return r.fail(res, pos, ReasonUnspecified, trimOWS(l[j+1:end]))
					}
					end = j
					if hi == 0 && lo>>32 == 0xffff {
						// IPv4-mapped: the walk reads it as its IPv4 address.
						a = addrFrom4(uint32(lo))
						break
					}
					a = addrFrom128(hi, lo)
					if !byRange6 {
						break
					}
					// As for dotted quads, the trust predicate on the parsed
					// halves is the whole decision, spelt out for the root,
					// where most lookups end.
					if !(t6.full6(hi) || t6.kids6(hi) && t6.descend6(hi, lo)) {
						if curLazy {
							cur = addrFrom4(curIP)
						}
						return r.found(res, a, r.source, pos, cur), ""
					}
					cur, curLazy = a, false
					if end < 0 {
						continue line
					}
					if hi, lo, j = back6(l, end); j < -1 {
						continue line // not plain IPv6 text: back4 first
					}
				}
			} else {
				i := strings.LastIndexByte(l[:end], ',')
				e := trimOWS(l[i+1 : end])
				end = i
				if e == "" {
					continue // RFC 9110 §5.6.1: empty list elements do not count
				}
				if pos++; pos > maxHops {
					return r.fail(res, pos, ReasonTooManyHops, "")
				}
				var f Reason
				if a, f = parseListAddr(e); f != ReasonNone {
					return r.fail(res, pos, f, e)
				}
			}
			if curLazy {
				cur, curLazy = addrFrom4(curIP), false
			}
			if r.trace != nil {
				r.trace.read(pos, entryAfter(l, end), a)
			}
			if r.client(a, pos) {
				return r.found(res, a, r.source, pos, cur), ""
			}
			cur = a
		}
	}
	if curLazy {
		cur = addrFrom4(curIP)
	}
	return r.exhausted(res, pos, cur, lines)
}

// back4 parses the element of l that ends at end (exclusive) if it is a dotted
// quad with optional white space around it, reading backwards. It returns the
// address and the index of the comma before the element (-1 at the start of
// the line), or j < -1 when the element is anything else. Like parseIPv4 it
// refuses leading zeros. uint(j) < uint(len(l)) is both "j >= 0" and the
// bounds check, so each byte costs one comparison.
func back4(l string, end int) (ip uint32, j int) {
	j = end - 1
	for uint(j) < uint(len(l)) && (l[j] == ' ' || l[j] == '\t') {
		j--
	}
	for shift := 0; shift < 32; shift += 8 {
		// One octet: up to three digits, no leading zero.
		if uint(j) >= uint(len(l)) || l[j]-'0' > 9 {
			return 0, -2
		}
		v := uint32(l[j] - '0')
		j--
		if uint(j) < uint(len(l)) && l[j]-'0' <= 9 {
			d := uint32(l[j] - '0')
			v += 10 * d
			j--
			if uint(j) < uint(len(l)) && l[j]-'0' <= 9 {
				d = uint32(l[j] - '0')
				v += 100 * d
				j--
			}
			if d == 0 || v > 255 {
				return 0, -2
			}
		}
		ip |= v << shift
		if shift < 24 {
			if uint(j) >= uint(len(l)) || l[j] != '.' {
				return 0, -2
			}
			j--
		}
	}
	for uint(j) < uint(len(l)) && (l[j] == ' ' || l[j] == '\t') {
		j--
	}
	if uint(j) < uint(len(l)) && l[j] != ',' {
		return 0, -2
	}
	if j < 0 {
		j = -1
	}
	return ip, j
}

// back6 parses the element of l that ends at end (exclusive) if it is IPv6
// text made of hex fields and at most one "::", with optional white space
// around it, reading backwards as back4 does, so that the element's start is
// found in the same pass. It returns the address as its high and low 64
// bits and the index of the comma before the element (-1 at the start of
// the line), or j < -1 when the element is anything else (brackets, a port,
// a zone, an embedded dotted quad, or no address at all), which the general
// path judges. Of such text it accepts exactly what parseIPv6 accepts
// (FuzzBack6).
func back6(l string, end int) (hi0, lo0 uint64, j int) {
	j = end - 1
	for uint(j) < uint(len(l)) && (l[j] == ' ' || l[j] == '\t') {
		j--
	}
	// hi, lo hold the fields read so far as a 128-bit value, the one read
	// last in the top 16 bits, so that without "::" the eighth field read
	// (the first of the text) leaves every field in place. Once "::" is
	// read, the fields right of it move to rhi, rlo, in place.
	var hi, lo, rhi, rlo uint64
	n := 0    // fields read
	ell := -1 // fields right of "::", once it is read
	c := byteAt(l, j)
	if c == ':' && byteAt(l, j-1) == ':' {
		ell, j = 0, j-2 // the element ends in "::"
		c = byteAt(l, j)
	}
	if ell < 0 || !elementEdge(c) {
		for {
			// One field: one to four hex digits, read from the right,
			// unrolled: a loop with a variable shift costs half as many
			// instructions again per digit (callgrind).
			v := uint64(hexVals[c])
			if v > 0xf || n == 8 {
				return 0, 0, -2
			}
			j--
			if d := uint64(hexVals[byteAt(l, j)]); d <= 0xf {
				v |= d << 4
				j--
				if d := uint64(hexVals[byteAt(l, j)]); d <= 0xf {
					v |= d << 8
					j--
					if d := uint64(hexVals[byteAt(l, j)]); d <= 0xf {
						v |= d << 12
						j--
						if hexVals[byteAt(l, j)] <= 0xf {
							return 0, 0, -2 // a fifth digit
						}
					}
				}
			}
			lo, hi = lo>>16|hi<<48, hi>>16|v<<48
			n++
			c = byteAt(l, j)
			if elementEdge(c) {
				break
			}
			if c != ':' {
				return 0, 0, -2
			}
			j--
			if c = byteAt(l, j); c == ':' {
				if ell >= 0 {
					return 0, 0, -2
				}
				ell, j = n, j-1
				rhi, rlo = shr128(hi, lo, uint(128-16*n))
				hi, lo = 0, 0
				if c = byteAt(l, j); elementEdge(c) {
					break
				}
			}
		}
	}
	// What comes before the element: white space, then a comma or the start.
	for c == ' ' || c == '\t' {
		j--
		c = byteAt(l, j)
	}
	switch {
	case c != ',':
		return 0, 0, -2
	case ell < 0 && n != 8, ell >= 0 && n == 8: // "::" stands for at least one field
		return 0, 0, -2
	}
	if j < 0 {
		j = -1
	}
	return hi | rhi, lo | rlo, j
}

// byteAt returns l[j], or ',' when j lies outside l: for the backward
// readers the start of a line ends an element as a comma does.
func byteAt(l string, j int) byte {
	if uint(j) < uint(len(l)) {
		return l[j]
	}
	return ','
}

// elementEdge reports whether c, read by byteAt before a list element, ends
// it: a comma (or the start of the line) or white space.
func elementEdge(c byte) bool {
	return c == ',' || c == ' ' || c == '\t'
}

// shr128 shifts the 128-bit value hi, lo right by s bits, s <= 128.
func shr128(hi, lo uint64, s uint) (uint64, uint64) {
	if s >= 64 {
		return 0, hi >> (s - 64)
	}
	return hi >> s, lo>>s | hi<<(64-s)
}

// addrFrom128 returns the IPv6 address whose high and low 64 bits are hi
// and lo.
func addrFrom128(hi, lo uint64) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

// addrFrom4 returns the IPv4 address of the host-order integer ip.
func addrFrom4(ip uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
}

// entryAfter returns the list element of l that starts after index i (a
// comma, or -1 for the start of the line), without the white space around
// it: the entry walkXFF has just read, for Explain's trace.
func entryAfter(l string, i int) string {
	l = l[i+1:]
	if j := strings.IndexByte(l, ','); j >= 0 {
		l = l[:j]
	}
	return trimOWS(l)
}
