package clientip

import (
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// This file holds a slow, obviously correct model of Resolve, written
// independently of the fast code: lists are split with strings.Split, addresses
// parsed with net/netip, and RFC 7239 is matched with regular expressions
// transcribed from its ABNF. The fuzz targets check that Resolve agrees with it.

type refHop struct {
	addr netip.Addr
	fail Reason
	text string
}

// refParseListAddr parses an X-Forwarded-For or single-header entry.
func refParseListAddr(s string) refHop {
	h := refHop{text: s}
	canon := func(a netip.Addr) refHop {
		h.addr = a.WithZone("").Unmap()
		if h.addr.IsUnspecified() {
			h.fail = ReasonUnspecified
		}
		return h
	}
	// The documented zone rule: only on a link-local IPv6 address that is
	// not IPv4-mapped, 1 to 15 unreserved characters, dropped.
	zoneOK := func(a netip.Addr) bool {
		return a.Zone() == "" || reZone.MatchString(a.Zone()) && !a.Is4In6() && a.IsLinkLocalUnicast()
	}
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			h.fail = ReasonMalformed
			return h
		}
		a, err := netip.ParseAddr(s[1:end])
		rest := s[end+1:]
		if err != nil || !a.Is6() || !zoneOK(a) ||
			(rest != "" && !(strings.HasPrefix(rest, ":") && refValidPort(rest[1:]))) {
			h.fail = ReasonMalformed
			return h
		}
		return canon(a)
	}
	if a, err := netip.ParseAddr(s); err == nil && zoneOK(a) {
		return canon(a)
	}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		if a, err := netip.ParseAddr(s[:i]); err == nil && a.Is4() && refValidPort(s[i+1:]) {
			return canon(a)
		}
	}
	h.fail = ReasonMalformed
	return h
}

func refValidPort(s string) bool {
	if len(s) < 1 || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return false
	}
	n, err := strconv.Atoi(s)
	return err == nil && n <= 65535
}

// refXFF returns the entries of X-Forwarded-For from the right.
func refXFF(lines []string) []refHop {
	var out []refHop
	for _, e := range strings.Split(strings.Join(lines, ","), ",") {
		e = strings.Trim(e, " \t")
		if e == "" {
			continue
		}
		out = append(out, refParseListAddr(e))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

const (
	reToken = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
	// Go's regexp reads UTF-8: a byte >= 0x80 is a rune >= U+0080 or, when it
	// is not valid UTF-8, U+FFFD, so obs-text is \x{80}-\x{10FFFF}.
	reQuoted = `"(?:[\t \x21\x23-\x5b\x5d-\x7e\x{80}-\x{10FFFF}]|\\[\t\x20-\x7e\x{80}-\x{10FFFF}])*"`
	rePair   = "(" + reToken + ")=(" + reToken + "|" + reQuoted + ")"
)

var (
	reZone = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,15}$`)
	// A list element: quoted strings or anything but a comma or a quote.
	reElementText = regexp.MustCompile(`(?s)^(?:` + `"(?:[^"\\]|\\.)*"` + `|[^,"])*`)
	reElement     = regexp.MustCompile(`^(?:` + rePair + `)?(?:[ \t]*;[ \t]*(?:` + rePair + `)?)*$`)
	rePairs       = regexp.MustCompile(rePair)
	reQuotedPair  = regexp.MustCompile(`(?s)\\(.)`)
	reObf         = `_[A-Za-z0-9._-]+`
	rePort        = `(?::([0-9]{1,5}|` + reObf + `))?`
	reNodeV6      = regexp.MustCompile(`^\[([^\]]*)\]` + rePort + `$`)
	reNodeV4      = regexp.MustCompile(`^([0-9.]+)` + rePort + `$`)
	reNodeUnknown = regexp.MustCompile(`^(?i:unknown)` + rePort + `$`)
	reNodeObf     = regexp.MustCompile(`^` + reObf + rePort + `$`)
)

// refForwarded returns the elements of Forwarded from the right, or false if a
// quoted string is left open.
func refForwarded(lines []string) ([]refHop, bool) {
	var elems []string
	for _, l := range lines {
		for {
			m := reElementText.FindString(l)
			elems = append(elems, m)
			l = l[len(m):]
			if l == "" {
				break
			}
			if l[0] == '"' {
				return nil, false // an open quote
			}
			l = l[1:] // the comma
		}
	}
	var out []refHop
	for i := len(elems) - 1; i >= 0; i-- {
		e := strings.Trim(elems[i], " \t")
		if e == "" {
			continue
		}
		out = append(out, refForwardedElement(e))
	}
	return out, true
}

func refForwardedElement(e string) refHop {
	h := refHop{text: e}
	if !reElement.MatchString(e) {
		h.fail = ReasonMalformed
		return h
	}
	seen := map[string]bool{}
	var node string
	found := false
	for _, m := range rePairs.FindAllStringSubmatch(e, -1) {
		name := strings.ToLower(m[1])
		if seen[name] {
			h.fail = ReasonMalformed
			return h
		}
		seen[name] = true
		if name == "for" {
			node, found = m[2], true
		}
	}
	if len(seen) > 16 { // documented bound: more than 16 parameters is malformed
		h.fail = ReasonMalformed
		return h
	}
	if !found {
		h.fail = ReasonUnknownHop
		return h
	}
	if strings.HasPrefix(node, `"`) {
		node = reQuotedPair.ReplaceAllString(node[1:len(node)-1], "$1")
	}
	portOK := func(p string) bool { return p == "" || strings.HasPrefix(p, "_") || refValidPort(p) }
	switch {
	case reNodeV6.MatchString(node):
		m := reNodeV6.FindStringSubmatch(node)
		a, err := netip.ParseAddr(m[1])
		if err != nil || !a.Is6() || a.Zone() != "" || strings.Contains(m[1], "%") || !portOK(m[2]) {
			h.fail = ReasonMalformed
			return h
		}
		h.addr = a.Unmap()
	case reNodeUnknown.MatchString(node):
		if !portOK(reNodeUnknown.FindStringSubmatch(node)[1]) {
			h.fail = ReasonMalformed
		} else {
			h.fail = ReasonUnknownHop
		}
		return h
	case reNodeObf.MatchString(node):
		if !portOK(reNodeObf.FindStringSubmatch(node)[1]) {
			h.fail = ReasonMalformed
		} else {
			h.fail = ReasonUnknownHop
		}
		return h
	case reNodeV4.MatchString(node):
		m := reNodeV4.FindStringSubmatch(node)
		a, err := netip.ParseAddr(m[1])
		if err != nil || !a.Is4() || !portOK(m[2]) {
			h.fail = ReasonMalformed
			return h
		}
		h.addr = a
	default:
		h.fail = ReasonMalformed
		return h
	}
	if h.addr.IsUnspecified() {
		h.fail = ReasonUnspecified
	}
	return h
}

type refResult struct {
	client netip.Addr
	source Source
	hop    int
	via    netip.Addr
	header string
	fail   Reason
}

// refResolve is the model of Resolve, written from the package's
// documentation: the chain is built as a list of hops, then walked from the
// socket peer outward, each hop checked for its position (MaxHops), then its
// content, then trust; the header's shape (size, unclosed quote, several
// values in a single-address header) is judged when the walk reaches it.
func refResolve(cfg Config, t Transport, h http.Header) refResult {
	maxHops := cfg.MaxHops
	if maxHops == 0 {
		maxHops = DefaultMaxHops
	}
	maxBytes := cfg.MaxHeaderBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxHeaderBytes
	}
	count := cfg.TrustedHops > 0
	inSet := func(set PrefixSet, a netip.Addr) bool {
		for _, p := range set.Prefixes() {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	name := ""
	if cfg.Header != "" {
		name = http.CanonicalHeaderKey(cfg.Header)
	}
	src := SourceHeader
	switch name {
	case "X-Forwarded-For":
		src = SourceXForwardedFor
	case "Forwarded":
		src = SourceForwarded
	}

	// Hop 0.
	peer := t.Peer.Addr().Unmap().WithZone("")
	switch {
	case !t.Peer.Addr().IsValid() && !cfg.TrustUnixSocket:
		return refResult{fail: ReasonNoAddress}
	case peer.IsUnspecified():
		return refResult{fail: ReasonUnspecified}
	case peer.IsValid() && !(count && cfg.TrustedProxies.Len() == 0) && !inSet(cfg.TrustedProxies, peer):
		r := refResult{client: peer, source: SourceSocket}
		if inSet(cfg.Masquerade, peer) {
			r.fail = ReasonMasqueraded
		}
		return r
	}

	// The hops outside the peer: the PROXY source, then the header's entries.
	type hop struct {
		refHop
		src Source
	}
	var hops []hop
	base := 0 // the position of the outermost transport layer
	if t.Proxy.Addr().IsValid() {
		a := t.Proxy.Addr().WithZone("").Unmap()
		hp := hop{refHop{addr: a}, SourceProxyProtocol}
		if a.IsUnspecified() {
			hp.fail = ReasonUnspecified
		}
		hops, base = append(hops, hp), 1
	}
	headerAt := len(hops) // index in hops of the header's first entry
	lines := h[name]

	path := []netip.Addr{peer} // the addresses stepped over, from hop 0
	fail := func(pos int, f Reason) refResult {
		r := refResult{hop: pos, fail: f}
		if pos > base {
			r.header = name
		}
		return r
	}
	for i := 0; ; i++ {
		pos := i + 1
		if i == headerAt && name != "" && len(lines) > 0 {
			// The header's shape, judged as the walk reaches it.
			size := 0
			for _, l := range lines {
				size += len(l) + 1
			}
			if size > maxBytes {
				return fail(pos, ReasonHeaderTooLarge)
			}
			var entries []refHop
			switch name {
			case "X-Forwarded-For":
				entries = refXFF(lines)
			case "Forwarded":
				var closed bool
				if entries, closed = refForwarded(lines); !closed {
					return fail(pos, ReasonMalformed)
				}
			default:
				v := strings.Trim(lines[0], " \t")
				if len(lines) > 1 || strings.Contains(v, ",") {
					return fail(pos, ReasonMultipleValues)
				}
				entries = []refHop{refParseListAddr(v)}
				if v == "" {
					entries[0].fail = ReasonMalformed
				}
			}
			for _, e := range entries {
				hops = append(hops, hop{e, src})
			}
		}
		if i == len(hops) {
			break
		}
		hp := hops[i]
		switch {
		case pos > maxHops:
			return fail(pos, ReasonTooManyHops)
		case hp.fail != ReasonNone:
			return fail(pos, hp.fail)
		case count && pos == cfg.TrustedHops, !count && !inSet(cfg.TrustedProxies, hp.addr):
			r := refResult{client: hp.addr, source: hp.src, hop: pos, via: path[len(path)-1]}
			if hp.src.FromHeader() {
				r.header = name
			}
			if inSet(cfg.Masquerade, hp.addr) {
				r.fail = ReasonMasqueraded
			}
			return r
		}
		path = append(path, hp.addr)
	}

	// Every hop was stepped over.
	pos := len(path) - 1
	last := path[pos]
	r := refResult{hop: pos, via: last, fail: ReasonAllTrusted}
	if count {
		r.fail = ReasonTooFewHops
	}
	if pos > base {
		r.header = name
	}
	if last.IsValid() && inSet(cfg.Masquerade, last) {
		r.client, r.fail, r.via = last, ReasonMasqueraded, netip.Addr{}
		switch {
		case pos == 0:
			r.source = SourceSocket
		case pos == base:
			r.source, r.via = SourceProxyProtocol, path[pos-1]
		default:
			r.source, r.via = src, path[pos-1]
		}
	}
	return r
}

// failureOf maps an error from Resolve back to its Reason, and any error
// that is not a resolution failure to an invalid Reason, so that it never
// agrees with the model.
func failureOf(err error) Reason {
	if r := ReasonOf(err); r != ReasonNone || err == nil {
		return r
	}
	return 255
}
