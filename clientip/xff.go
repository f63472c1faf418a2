package clientip

import (
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
// entry, a dotted quad with optional white space around it, backwards in the
// same pass that finds the entry's start, checking trust on the parsed bytes
// and building an Addr only when it is needed. Anything else takes the general
// path through parseListAddr.
func (r *Resolver) walkXFF(res *Result, lines []string, pos int) (Reason, string) {
	cur := res.Via // the hop last stepped over
	// byRange is trusted-range mode with IPv4 prefixes to trust; without
	// them every dotted quad takes the general path, where it is the client.
	t4, maxHops := r.trusted.v4, r.maxHops
	byRange := r.hops == 0 && t4 != nil
	// A trusted dotted quad is kept as curIP and made an Addr only if it is
	// still the last trusted hop when the walk ends.
	var curIP uint32
	curLazy := false
	for li := len(lines) - 1; li >= 0; li-- {
		l := lines[li]
		// l[:end] is the unread part of the line; end < 0 once it is used up.
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

// addrFrom4 returns the IPv4 address of the host-order integer ip.
func addrFrom4(ip uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
}
