package clientip

import (
	"net/netip"
	"strings"
)

// text is what the parsers read: header text, or a quoted-string unescaped
// into a stack buffer. Parsing both without conversion keeps Resolve free of
// allocations.
type text interface{ ~string | ~[]byte }

// parseIPv4 parses a dotted quad at the start of s and reports how many bytes
// it used. Like net/netip it rejects leading zeros ("010.0.0.1"), which other
// parsers read as octal.
func parseIPv4[T text](s T) (a [4]byte, n int, ok bool) {
	// Each octet is read with one comparison per byte: uint(n) < uint(len(s))
	// is the bounds check, and c-'0' > 9 also refuses bytes below '0'.
	for f := 0; f < 4; f++ {
		if f > 0 {
			if uint(n) >= uint(len(s)) || s[n] != '.' {
				return a, 0, false
			}
			n++
		}
		if uint(n) >= uint(len(s)) || s[n]-'0' > 9 {
			return a, 0, false
		}
		v := uint(s[n] - '0')
		n++
		if uint(n) < uint(len(s)) && s[n]-'0' <= 9 {
			if v == 0 {
				return a, 0, false // a leading zero
			}
			v = 10*v + uint(s[n]-'0')
			n++
			if uint(n) < uint(len(s)) && s[n]-'0' <= 9 {
				v = 10*v + uint(s[n]-'0')
				n++
				if v > 255 || uint(n) < uint(len(s)) && s[n]-'0' <= 9 {
					return a, 0, false
				}
			}
		}
		a[f] = byte(v)
	}
	return a, n, true
}

// hexVals maps a byte to its value as a hex digit, or 0xff.
var hexVals = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()

// parseIPv6 parses IPv6 text without a zone, with an optional embedded IPv4
// tail ("::ffff:192.0.2.1").
func parseIPv6[T text](s T) (netip.Addr, bool) {
	var ip [16]byte
	ellipsis := -1 // byte index in ip where "::" stands, or -1
	i := 0
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
		if len(s) == 0 {
			return netip.IPv6Unspecified(), true
		}
	}
	for i < 16 {
		off, acc := 0, 0
		for off < len(s) {
			v := hexVals[s[off]]
			if v == 0xff {
				break
			}
			acc = acc<<4 | int(v)
			off++
			if off > 4 {
				return netip.Addr{}, false
			}
		}
		if off == 0 {
			return netip.Addr{}, false
		}
		if off < len(s) && s[off] == '.' {
			// Embedded IPv4: it must end the address and replace the last two fields.
			if (ellipsis < 0 && i != 12) || i+4 > 16 {
				return netip.Addr{}, false
			}
			a, n, ok := parseIPv4(s)
			if !ok || n != len(s) {
				return netip.Addr{}, false
			}
			copy(ip[i:], a[:])
			i += 4
			s = s[len(s):]
			break
		}
		ip[i], ip[i+1] = byte(acc>>8), byte(acc)
		i += 2
		s = s[off:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return netip.Addr{}, false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return netip.Addr{}, false
			}
			ellipsis = i
			s = s[1:]
			if len(s) == 0 {
				break
			}
		}
	}
	if len(s) != 0 {
		return netip.Addr{}, false
	}
	if i < 16 {
		if ellipsis < 0 {
			return netip.Addr{}, false
		}
		n := 16 - i
		copy(ip[ellipsis+n:], ip[ellipsis:i])
		clear(ip[ellipsis : ellipsis+n])
	} else if ellipsis >= 0 {
		return netip.Addr{}, false // "::" must stand for at least one field
	}
	return netip.AddrFrom16(ip), true
}

// parsePort parses a decimal port of one to five digits, at most 65535.
func parsePort[T text](s T) (uint16, bool) {
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return uint16(v), v <= 65535
}

// parseRemoteAddr parses an http.Request's RemoteAddr ("192.0.2.1:1234",
// "[2001:db8::1]:1234") on a fast path, falling back to [netip.ParseAddrPort]
// for anything else (a zone, say) and then to [netip.ParseAddr] (a RemoteAddr
// without a port, as some middleware and tests write it).
func parseRemoteAddr(s string) (netip.AddrPort, bool) {
	if b, n, ok := parseIPv4(s); ok && n < len(s) && s[n] == ':' {
		if p, ok := parsePort(s[n+1:]); ok {
			return netip.AddrPortFrom(netip.AddrFrom4(b), p), true
		}
	}
	if len(s) > 0 && s[0] == '[' {
		if end := strings.IndexByte(s, ']'); end > 0 && end+1 < len(s) && s[end+1] == ':' {
			if a, ok := parseIPv6(s[1:end]); ok {
				if p, ok := parsePort(s[end+2:]); ok {
					return netip.AddrPortFrom(a, p), true
				}
			}
		}
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, validPeerZone(ap.Addr().Zone())
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), validPeerZone(a.Zone())
	}
	return netip.AddrPort{}, false
}

// validPeerZone reports whether z can be the zone of a socket peer's
// address as net/http writes RemoteAddr: none, an interface name (Linux's
// dev_valid_name: at most IFNAMSIZ-1 bytes, no '/', ':' or white space; we
// also take only printable ASCII) or a decimal interface index. netip takes
// any zone, and a RemoteAddr that other middleware rewrote from a header
// may carry one a client wrote: terminal escapes, megabytes. Such a peer
// is unreadable (ErrNoAddress), as any other rewritten RemoteAddr that does
// not parse.
func validPeerZone(z string) bool {
	if len(z) > maxZoneLen {
		return false
	}
	for i := 0; i < len(z); i++ {
		if c := z[i]; c <= ' ' || c >= 0x7f || c == '/' || c == ':' || c == '%' {
			return false
		}
	}
	return true
}

// validPort reports whether s is a decimal port number of one to five digits,
// at most 65535.
func validPort[T text](s T) bool {
	_, ok := parsePort(s)
	return ok
}

// parseListAddr parses one trimmed, non-empty entry of X-Forwarded-For or of a
// single-address header: "192.0.2.1", "192.0.2.1:80", "2001:db8::1",
// "[2001:db8::1]" or "[2001:db8::1]:80", and a link-local IPv6 address with a
// zone ("fe80::5%eth0"; see zone.go). Brackets only enclose IPv6. The result
// is canonical: unmapped and without a zone.
func parseListAddr(s string) (netip.Addr, Reason) {
	if s[0] == '[' {
		end := -1
		for i := 1; i < len(s); i++ {
			if s[i] == ']' {
				end = i
				break
			}
		}
		if end < 0 {
			return netip.Addr{}, ReasonMalformed
		}
		a, ok := parseIPv6(s[1:end])
		if !ok {
			return parseZonedEntry(s)
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, ReasonMalformed
		}
		return canonical(a)
	}
	if b, n, ok := parseIPv4(s); ok {
		if n != len(s) && (s[n] != ':' || !validPort(s[n+1:])) {
			return netip.Addr{}, ReasonMalformed
		}
		return canonical(netip.AddrFrom4(b))
	}
	a, ok := parseIPv6(s)
	if !ok {
		return parseZonedEntry(s)
	}
	return canonical(a)
}

// canonical unmaps a and refuses the unspecified addresses.
func canonical(a netip.Addr) (netip.Addr, Reason) {
	a = a.Unmap()
	if a.IsUnspecified() {
		return a, ReasonUnspecified
	}
	return a, ReasonNone
}

// trimOWS trims the optional white space of RFC 9110 (spaces and tabs).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
