package clientip

import "net/netip"

// RFC 7239 Forwarded.
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//	node              = nodename [ ":" node-port ]
//	nodename          = IPv4address / "[" IPv6address "]" / "unknown" / obfnode
//	obfnode           = "_" 1*( ALPHA / DIGIT / "." / "_" / "-" )
//	node-port         = port / obfport
//
// A header is split into elements first, left to right, so that a comma inside a
// quoted string never separates elements; a quoted string left open anywhere makes
// the whole header malformed, because no element boundary after it can be known.
// The walk then reads elements from the right. Each element it reads must be
// well formed: pairs of a token, "=" and a token or quoted string, no parameter
// twice (in any case), and a for= node. White space is allowed around ";" (a
// common, harmless deviation) but not around "=". IPv6 nodes must be bracketed,
// and since brackets and ":" are not token characters they must also be quoted,
// as must any node with a port. "unknown" and obfuscated identifiers are hops
// whose address cannot be known (ErrUnknownHop); an element without for= is one
// too.

// fwdSpan is where one element of a Forwarded header lies: its line, and its
// bytes in that line.
type fwdSpan struct{ line, start, end int32 }

// fwdRing keeps the spans of the last elements of a Forwarded header. The walk
// never reads more than maxHopsLimit elements, so older ones can be forgotten.
type fwdRing struct {
	spans [maxHopsLimit]fwdSpan
	n     int // elements seen in all
}

// scan splits the header into elements. It reports false if a quoted
// string is left open.
func (r *fwdRing) scan(lines []string) bool {
	for li, l := range lines {
		start := 0
		for i := 0; i <= len(l); {
			if i == len(l) || l[i] == ',' {
				s, e := start, i
				for s < e && (l[s] == ' ' || l[s] == '\t') {
					s++
				}
				for e > s && (l[e-1] == ' ' || l[e-1] == '\t') {
					e--
				}
				if s < e {
					r.spans[r.n%maxHopsLimit] = fwdSpan{int32(li), int32(s), int32(e)}
					r.n++
				}
				i++
				start = i
				continue
			}
			if l[i] == '"' {
				i++
				for i < len(l) && l[i] != '"' {
					if l[i] == '\\' {
						i++
					}
					i++
				}
				if i >= len(l) {
					return false
				}
			}
			i++
		}
	}
	return true
}

// element returns the k-th element counted from the right (k = 0 is the last);
// k must be below both r.n and maxHopsLimit.
func (r *fwdRing) element(lines []string, k int) string {
	sp := r.spans[(r.n-1-k)%maxHopsLimit]
	return lines[sp.line][sp.start:sp.end]
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// isQdtext reports whether c may appear unescaped in a quoted string, and
// isQuotable whether it may follow a backslash (RFC 9110 §5.6.4).
func isQdtext(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) || (c >= 0x5d && c <= 0x7e) || c >= 0x80
}

func isQuotable(c byte) bool { return c == '\t' || (c >= 0x20 && c != 0x7f) }

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func equalFold[T text](a T, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// maxParams bounds the parameters of one element. RFC 7239 defines four and
// sets no limit; the bound is deliberate, so that the check for repeated
// parameters stays cheap on hostile input, and documented: an element with
// more is ErrMalformed.
const maxParams = 16

// nodeBuf is the size of the stack buffers a quoted node is unescaped into:
// longer than any address with brackets, "unknown" or decimal port. A longer
// part of a node can only be an obfuscated identifier, which has no length
// limit and is checked as it is read.
const nodeBuf = 64

// parseForwardedElement returns the address of the for= node of one element.
func parseForwardedElement(e string) (netip.Addr, Reason) {
	var names [maxParams]string
	nparams := 0
	var forVal string
	forQuoted, haveFor := false, false
	i := 0
	for i <= len(e) {
		// One pair, up to the next ";" or the end.
		for i < len(e) && (e[i] == ' ' || e[i] == '\t') {
			i++
		}
		if i == len(e) {
			break
		}
		if e[i] == ';' {
			i++
			continue // empty pair
		}
		ns := i
		for i < len(e) && isTchar(e[i]) {
			i++
		}
		if i == ns || i == len(e) || e[i] != '=' {
			return netip.Addr{}, ReasonMalformed
		}
		name := e[ns:i]
		i++ // "="
		var val string
		quoted := false
		if i < len(e) && e[i] == '"' {
			vs := i + 1
			i++
			for i < len(e) && e[i] != '"' {
				if e[i] == '\\' {
					i++
					if i == len(e) || !isQuotable(e[i]) {
						return netip.Addr{}, ReasonMalformed
					}
				} else if !isQdtext(e[i]) {
					return netip.Addr{}, ReasonMalformed
				}
				i++
			}
			if i == len(e) {
				return netip.Addr{}, ReasonMalformed
			}
			val, quoted = e[vs:i], true
			i++ // closing quote
		} else {
			vs := i
			for i < len(e) && isTchar(e[i]) {
				i++
			}
			if i == vs {
				return netip.Addr{}, ReasonMalformed
			}
			val = e[vs:i]
		}
		for i < len(e) && (e[i] == ' ' || e[i] == '\t') {
			i++
		}
		if i < len(e) {
			if e[i] != ';' {
				return netip.Addr{}, ReasonMalformed
			}
			i++
		}
		for _, n := range names[:nparams] {
			if equalFold(n, name) {
				return netip.Addr{}, ReasonMalformed // RFC 7239 §4: each parameter at most once
			}
		}
		if nparams == maxParams {
			return netip.Addr{}, ReasonMalformed
		}
		names[nparams] = name
		nparams++
		if equalFold(name, "for") {
			forVal, forQuoted, haveFor = val, quoted, true
		}
	}
	if !haveFor {
		return netip.Addr{}, ReasonUnknownHop
	}
	if forQuoted {
		for j := 0; j < len(forVal); j++ {
			if forVal[j] == '\\' {
				return parseEscapedNode(forVal)
			}
		}
	}
	return parseNode(forVal)
}

func isObfChar(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'
}

func validObf[T text](s T) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isObfChar(s[i]) {
			return false
		}
	}
	return true
}

func validNodePort[T text](s T) bool { return validPort(s) || validObf(s) }

// parseNode parses an RFC 7239 node (§6) of any length: nodename [":" node-port].
func parseNode[T text](v T) (netip.Addr, Reason) {
	end := len(v) // the end of the nodename
	if len(v) > 0 && v[0] == '[' {
		end = -1
		for i := 1; i < len(v); i++ {
			if v[i] == ']' {
				end = i + 1
				break
			}
		}
		if end < 0 || end < len(v) && v[end] != ':' {
			return netip.Addr{}, ReasonMalformed
		}
	} else {
		for i := 0; i < len(v); i++ {
			if v[i] == ':' {
				end = i
				break
			}
		}
	}
	if end < len(v) && !validNodePort(v[end+1:]) {
		return netip.Addr{}, ReasonMalformed
	}
	return parseNodeName(v[:end])
}

// parseNodeName parses a nodename: a bracketed IPv6 address, an IPv4 address,
// "unknown" or an obfuscated identifier.
func parseNodeName[T text](v T) (netip.Addr, Reason) {
	switch {
	case len(v) == 0:
		return netip.Addr{}, ReasonMalformed
	case v[0] == '[':
		if v[len(v)-1] != ']' {
			return netip.Addr{}, ReasonMalformed
		}
		a, ok := parseIPv6(v[1 : len(v)-1])
		if !ok {
			return netip.Addr{}, ReasonMalformed
		}
		return canonical(a)
	case len(v) == 7 && lowerASCII(v[0]) == 'u' && equalFold(v, "unknown"):
		return netip.Addr{}, ReasonUnknownHop
	case v[0] == '_':
		if validObf(v) {
			return netip.Addr{}, ReasonUnknownHop
		}
		return netip.Addr{}, ReasonMalformed
	}
	b, n, ok := parseIPv4(v)
	if !ok || n != len(v) {
		return netip.Addr{}, ReasonMalformed
	}
	return canonical(netip.AddrFrom4(b))
}

// nodePart collects one part of a quoted node (its nodename or its port) as
// parseEscapedNode unescapes it: the bytes, as long as they fit, and whether
// the part is a valid obfuscated identifier so far.
type nodePart struct {
	buf [nodeBuf]byte
	n   int  // bytes in all
	obf bool // "_" followed only by obfuscated-identifier characters
}

func (p *nodePart) add(c byte) {
	if p.n < len(p.buf) {
		p.buf[p.n] = c
	}
	if p.n == 0 {
		p.obf = c == '_'
	} else if !isObfChar(c) {
		p.obf = false
	}
	p.n++
}

// parseEscapedNode is parseNode for the contents of a well-formed quoted
// string that holds quoted-pairs ("\\x" stands for x, RFC 9110 §5.6.4). It
// unescapes the nodename and the port into stack buffers, so it does not
// allocate; a part too long for its buffer can only be an obfuscated
// identifier, and is judged as one, whatever its length.
func parseEscapedNode(raw string) (netip.Addr, Reason) {
	var name, port nodePart
	hasPort, bracket, closed := false, false, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			i++
			c = raw[i]
		}
		switch {
		case hasPort:
			port.add(c)
		case name.n == 0 && c == '[':
			bracket = true
			name.add(c)
		case bracket && closed:
			if c != ':' {
				return netip.Addr{}, ReasonMalformed
			}
			hasPort = true
		case !bracket && c == ':':
			hasPort = true
		default:
			closed = bracket && c == ']'
			name.add(c)
		}
	}
	if hasPort {
		if port.n > nodeBuf {
			if !port.obf {
				return netip.Addr{}, ReasonMalformed
			}
		} else if !validNodePort(port.buf[:port.n]) {
			return netip.Addr{}, ReasonMalformed
		}
	}
	if name.n > nodeBuf {
		if name.obf {
			return netip.Addr{}, ReasonUnknownHop
		}
		return netip.Addr{}, ReasonMalformed
	}
	return parseNodeName(name.buf[:name.n])
}

// walkForwarded continues the walk of Resolver.walk over Forwarded from
// position pos; res.Via holds the hop last stepped over.
func (r *Resolver) walkForwarded(res *Result, lines []string, pos int) (Reason, string) {
	cur := res.Via // the hop last stepped over
	var ring fwdRing
	if !ring.scan(lines) {
		return r.fail(res, pos+1, ReasonMalformed, lines[len(lines)-1])
	}
	for k := 0; k < ring.n; k++ {
		if pos++; pos > r.maxHops {
			return r.fail(res, pos, ReasonTooManyHops, "")
		}
		e := ring.element(lines, k)
		a, f := parseForwardedElement(e)
		if f != ReasonNone {
			return r.fail(res, pos, f, e)
		}
		if r.trace != nil {
			r.trace.read(pos, e, a)
		}
		if r.client(a, pos) {
			return r.found(res, a, r.source, pos, cur), ""
		}
		cur = a
	}
	return r.exhausted(res, pos, cur, lines)
}
