package clientip

import (
	"net/netip"
	"strings"
)

// The syntax of origin values: what [OriginReader] accepts from a header or
// from the request's Host, and [ParseOrigin] from an Origin header. Each
// parser is strict and returns a canonical value, so that two texts naming
// the same origin compare equal and nothing a parser does not understand is
// passed on to a redirect or a cookie.

// Bounds on origin values.
const (
	maxHostLen   = 253  // a DNS name (RFC 1035 §2.3.4, without the root label)
	maxLabelLen  = 63   // a DNS label
	maxPrefixLen = 1024 // a path prefix
)

// parseScheme returns "http" or "https" for s in any case.
func parseScheme(s string) (string, bool) {
	switch {
	case equalFold(s, "https"):
		return "https", true
	case equalFold(s, "http"):
		return "http", true
	}
	return "", false
}

// parseOriginPort parses a port of an origin: one to five decimal digits
// without a leading zero, 1 to 65535.
func parseOriginPort(s string) (uint16, bool) {
	if s == "" || s[0] == '0' {
		return 0, false
	}
	return parsePort(s)
}

// parseHostPort parses a Host header value (RFC 9110 §7.2: uri-host
// [":" port]) into a canonical host and its port; hasPort reports whether a
// port was given.
//
// The host is a DNS-style name, an IPv4 dotted quad, or an IPv6 address in
// brackets without a zone. A name is 1 to 253 bytes of labels of 1 to 63
// letters, digits, "-" and "_" joined by "."; it is returned in lower case
// (IDNA is not decoded: an internationalised name arrives as its xn--
// labels). A name whose last label is a number ("1.2.3", "a.0x10") is read
// as IPv4 the way browsers read it (WHATWG URL, "ends in a number"), so it
// must be a dotted quad without leading zeros. An IPv6 literal is returned
// in its canonical text. Percent-encoding, user info, a trailing dot, an
// empty port and port 0 are refused.
//
// It allocates only for a name with upper-case letters and for an IPv6
// literal.
func parseHostPort(s string) (host string, port uint16, hasPort, ok bool) {
	if s == "" || len(s) > maxHostLen+len("[]:65535") {
		return "", 0, false, false
	}
	h, rest := s, ""
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, false, false
		}
		h, rest = s[:end+1], s[end+1:]
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		h, rest = s[:i], s[i:]
	}
	if rest != "" {
		if rest[0] != ':' {
			return "", 0, false, false
		}
		if port, ok = parseOriginPort(rest[1:]); !ok {
			return "", 0, false, false
		}
		hasPort = true
	}
	if host, ok = canonicalHost(h); !ok {
		return "", 0, false, false
	}
	return host, port, hasPort, true
}

// canonicalHost checks a host without a port and returns it canonical.
func canonicalHost(h string) (string, bool) {
	if h == "" || len(h) > maxHostLen {
		return "", false
	}
	if h[0] == '[' {
		if len(h) < 2 || h[len(h)-1] != ']' {
			return "", false
		}
		a, ok := parseIPv6(h[1 : len(h)-1])
		if !ok {
			return "", false
		}
		return "[" + a.String() + "]", true
	}
	if endsInNumber(h) {
		// Dotted quads without leading zeros are already canonical.
		if _, n, ok := parseIPv4(h); !ok || n != len(h) {
			return "", false
		}
		return h, true
	}
	label, upper := 0, false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", false // an empty label: "..", a leading or a trailing dot
			}
			label = 0
			continue
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c >= 'A' && c <= 'Z':
			upper = true
		default:
			return "", false
		}
		if label++; label > maxLabelLen {
			return "", false
		}
	}
	if label == 0 {
		return "", false
	}
	if upper {
		h = strings.ToLower(h)
	}
	return h, true
}

// endsInNumber reports whether the last label of h is a number as the
// WHATWG URL host parser reads one: decimal digits, or "0x" and hex digits.
// Such a host is an IPv4 address to a browser, never a name.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		last = last[2:]
		for i := 0; i < len(last); i++ {
			if hexVals[last[i]] == 0xff {
				return false
			}
		}
		return true
	}
	if last == "" {
		return false
	}
	for i := 0; i < len(last); i++ {
		if last[i]-'0' > 9 {
			return false
		}
	}
	return true
}

// isPrefixChar reports whether c may appear in a path prefix segment:
// RFC 3986's unreserved characters and the sub-delims and ":" and "@" of a
// pchar, without "," (a list separator in a header), ";" (path parameters,
// which servers strip and reinterpret) and "%" (percent-encoding, which
// could decode to "/" or "..").
func isPrefixChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+=:@", c) >= 0
}

// parsePrefix checks a path prefix (X-Forwarded-Prefix) and returns it
// without a trailing "/": "" for "/", "/api" for "/api/". It must be an
// absolute path of at most 1024 bytes whose segments are not empty ("//"
// would make it a network-path reference, "//evil.example"), not "." or
// "..", and made of [isPrefixChar] characters. It does not allocate.
func parsePrefix(s string) (string, bool) {
	if s == "" || s[0] != '/' || len(s) > maxPrefixLen {
		return "", false
	}
	s = strings.TrimSuffix(s, "/")
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "" {
			continue // the empty string before the leading "/" (later ones are refused below)
		}
		if seg == "." || seg == ".." {
			return "", false
		}
		for i := 0; i < len(seg); i++ {
			if !isPrefixChar(seg[i]) {
				return "", false
			}
		}
	}
	if strings.Contains(s, "//") {
		return "", false
	}
	return s, true
}

// ParseOrigin parses a serialised origin as browsers send it in the Origin
// header (RFC 6454 §6.2): "https://example.com" or
// "http://192.0.2.1:8080", with the host syntax [OriginReader] accepts and
// the scheme http or https. A default port (443 for https, 80 for http) is
// dropped, so the result compares equal to the Origin a reader returns for
// the same site (see [Origin.SameOrigin]). "null", a path, a query, user
// info or a trailing slash are ErrOriginMalformed.
func ParseOrigin(s string) (Origin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if ok {
		scheme, ok = parseScheme(scheme)
	}
	var o Origin
	if ok {
		o.Host, o.Port, _, ok = parseHostPort(rest)
	}
	if !ok {
		return Origin{}, &ChainError{Header: "Origin", Value: s, Err: ErrOriginMalformed}
	}
	o.Scheme = scheme
	o.Port = o.normalPort(o.Port)
	return o, nil
}

// hostAllow is a compiled OriginConfig.AllowedHosts.
type hostAllow struct {
	exact map[string]struct{} // canonical hosts
	wild  []string            // ".example.com" for "*.example.com"
}

// newHostAllow compiles an allowlist; the zero hostAllow admits every host.
func newHostAllow(hosts []string) (hostAllow, bool, string) {
	var a hostAllow
	for _, h := range hosts {
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			c, ok := canonicalHost(rest)
			if !ok || c[0] == '[' || endsInNumber(c) {
				return hostAllow{}, false, h
			}
			a.wild = append(a.wild, "."+c)
			continue
		}
		if ip, err := netip.ParseAddr(h); err == nil && ip.Is6() && ip.Zone() == "" {
			h = "[" + h + "]" // an IPv6 address may be listed without brackets
		}
		c, ok := canonicalHost(h)
		if !ok {
			return hostAllow{}, false, h
		}
		if a.exact == nil {
			a.exact = make(map[string]struct{})
		}
		a.exact[c] = struct{}{}
	}
	return a, true, ""
}

// allows reports whether the canonical host h is allowed. A wildcard
// matches exactly one label, as in a TLS certificate: "*.example.com"
// admits "a.example.com", neither "example.com" nor "a.b.example.com".
func (a *hostAllow) allows(h string) bool {
	if a.exact == nil && a.wild == nil {
		return true
	}
	if _, ok := a.exact[h]; ok {
		return true
	}
	for _, w := range a.wild {
		if label, ok := strings.CutSuffix(h, w); ok && label != "" && strings.IndexByte(label, '.') < 0 {
			return true
		}
	}
	return false
}
