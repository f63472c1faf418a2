package clientip

import (
	"errors"
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
	fail failure
	text string
}

// refParseListAddr parses an X-Forwarded-For or single-header entry.
func refParseListAddr(s string) refHop {
	h := refHop{text: s}
	canon := func(a netip.Addr) refHop {
		h.addr = a.Unmap()
		if h.addr.IsUnspecified() {
			h.fail = failUnspecified
		}
		return h
	}
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			h.fail = failMalformed
			return h
		}
		a, err := netip.ParseAddr(s[1:end])
		rest := s[end+1:]
		if err != nil || !a.Is6() || a.Zone() != "" || strings.Contains(s[1:end], "%") ||
			(rest != "" && !(strings.HasPrefix(rest, ":") && refValidPort(rest[1:]))) {
			h.fail = failMalformed
			return h
		}
		return canon(a)
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" && !strings.Contains(s, "%") {
		return canon(a)
	}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		if a, err := netip.ParseAddr(s[:i]); err == nil && a.Is4() && refValidPort(s[i+1:]) {
			return canon(a)
		}
	}
	h.fail = failMalformed
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
		h.fail = failMalformed
		return h
	}
	seen := map[string]bool{}
	var node string
	found := false
	for _, m := range rePairs.FindAllStringSubmatch(e, -1) {
		name := strings.ToLower(m[1])
		if seen[name] {
			h.fail = failMalformed
			return h
		}
		seen[name] = true
		if name == "for" {
			node, found = m[2], true
		}
	}
	if len(seen) > maxParams {
		h.fail = failMalformed
		return h
	}
	if !found {
		h.fail = failUnknown
		return h
	}
	if strings.HasPrefix(node, `"`) {
		node = node[1 : len(node)-1]
		if len(node) > maxNode {
			h.fail = failMalformed
			return h
		}
		node = reQuotedPair.ReplaceAllString(node, "$1")
	}
	if len(node) > maxNode {
		h.fail = failMalformed
		return h
	}
	portOK := func(p string) bool { return p == "" || strings.HasPrefix(p, "_") || refValidPort(p) }
	switch {
	case reNodeV6.MatchString(node):
		m := reNodeV6.FindStringSubmatch(node)
		a, err := netip.ParseAddr(m[1])
		if err != nil || !a.Is6() || a.Zone() != "" || strings.Contains(m[1], "%") || !portOK(m[2]) {
			h.fail = failMalformed
			return h
		}
		h.addr = a.Unmap()
	case reNodeUnknown.MatchString(node):
		if !portOK(reNodeUnknown.FindStringSubmatch(node)[1]) {
			h.fail = failMalformed
		} else {
			h.fail = failUnknown
		}
		return h
	case reNodeObf.MatchString(node):
		if !portOK(reNodeObf.FindStringSubmatch(node)[1]) {
			h.fail = failMalformed
		} else {
			h.fail = failUnknown
		}
		return h
	case reNodeV4.MatchString(node):
		m := reNodeV4.FindStringSubmatch(node)
		a, err := netip.ParseAddr(m[1])
		if err != nil || !a.Is4() || !portOK(m[2]) {
			h.fail = failMalformed
			return h
		}
		h.addr = a
	default:
		h.fail = failMalformed
		return h
	}
	if h.addr.IsUnspecified() {
		h.fail = failUnspecified
	}
	return h
}

type refResult struct {
	client netip.Addr
	source Source
	hop    int
	via    netip.Addr
	fail   failure
}

// refResolve is the model of Resolve.
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
	trusted := func(a netip.Addr) bool {
		for _, p := range cfg.TrustedProxies.Prefixes() {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	done := func(r refResult) refResult {
		if r.fail == ok {
			for _, p := range cfg.Masquerade.Prefixes() {
				if p.Contains(r.client) {
					r.fail = failMasqueraded
				}
			}
		}
		return r
	}

	// Hop 0.
	var cur netip.Addr
	if t.Peer.Addr().IsValid() {
		p := t.Peer.Addr().Unmap().WithZone("")
		if p.IsUnspecified() {
			return refResult{fail: failUnspecified}
		}
		isTrusted := trusted(p)
		if count && cfg.TrustedProxies.Len() == 0 {
			isTrusted = true
		}
		if !isTrusted {
			return done(refResult{client: p, source: SourceSocket})
		}
		cur = p
	} else if !cfg.TrustUnixSocket {
		return refResult{fail: failNoAddress}
	}
	pos := 0
	isClient := func(a netip.Addr) bool {
		if count {
			return pos == cfg.TrustedHops
		}
		return !trusted(a)
	}

	// Hop 1: PROXY.
	if t.Proxy.Addr().IsValid() {
		pos = 1
		a := t.Proxy.Addr().WithZone("").Unmap()
		if a.IsUnspecified() {
			return refResult{hop: pos, fail: failUnspecified}
		}
		if isClient(a) {
			return done(refResult{client: a, source: SourceProxyProtocol, hop: pos, via: cur})
		}
		cur = a
	}

	// Header.
	name := ""
	if cfg.Header != "" {
		name = http.CanonicalHeaderKey(cfg.Header)
	}
	lines := h[name]
	if name != "" && len(lines) > 0 {
		size := 0
		for _, l := range lines {
			size += len(l) + 1
		}
		if size > maxBytes {
			return refResult{hop: pos + 1, fail: failTooLarge}
		}
		var hops []refHop
		src := SourceHeader
		switch name {
		case "X-Forwarded-For":
			hops, src = refXFF(lines), SourceXForwardedFor
		case "Forwarded":
			var okq bool
			if hops, okq = refForwarded(lines); !okq {
				return refResult{hop: pos + 1, fail: failMalformed}
			}
			src = SourceForwarded
		default:
			v := strings.Trim(lines[0], " \t")
			switch {
			case len(lines) > 1 || strings.Contains(v, ","):
				return refResult{hop: pos + 1, fail: failMultiple}
			case v == "":
				return refResult{hop: pos + 1, fail: failMalformed}
			}
			hops = []refHop{refParseListAddr(v)}
		}
		for _, hp := range hops {
			pos++
			if pos > maxHops {
				return refResult{hop: pos, fail: failTooMany}
			}
			if hp.fail != ok {
				return refResult{hop: pos, fail: hp.fail}
			}
			if isClient(hp.addr) {
				return done(refResult{client: hp.addr, source: src, hop: pos, via: cur})
			}
			cur = hp.addr
		}
	}
	for _, p := range cfg.Masquerade.Prefixes() {
		if cur.IsValid() && p.Contains(cur) {
			src := SourceHeader
			switch {
			case pos == 0:
				src = SourceSocket
			case pos == 1 && t.Proxy.Addr().IsValid():
				src = SourceProxyProtocol
			case name == "X-Forwarded-For":
				src = SourceXForwardedFor
			case name == "Forwarded":
				src = SourceForwarded
			}
			return refResult{client: cur, source: src, hop: pos, fail: failMasqueraded}
		}
	}
	if count {
		return refResult{hop: pos, via: cur, fail: failTooFew}
	}
	return refResult{hop: pos, via: cur, fail: failAllTrusted}
}

// failureOf maps an error from Resolve back to its failure code.
func failureOf(err error) failure {
	if err == nil {
		return ok
	}
	for f, e := range failureErrors {
		if e != nil && errors.Is(err, e) {
			return failure(f)
		}
	}
	return 255
}
