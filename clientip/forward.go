package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
)

// forwardingNames are the headers, besides every X-Forwarded-* one, that
// [IsForwardingHeader] names, in lower case with "-" for "_": headers that
// carry a client address or the origin a proxy saw, which only a trusted
// hop may write.
var forwardingNames = [...]string{
	// RFC 7239 and the forms before it.
	"forwarded", "forwarded-for", "x-forwarded",
	// Single-address headers of proxies, CDNs and platforms.
	"x-real-ip", "x-client-ip", "client-ip", "x-cluster-client-ip", "true-client-ip",
	"cf-connecting-ip", "cf-connecting-ipv6", "cf-pseudo-ipv4", "fastly-client-ip", "fly-client-ip",
	"x-azure-clientip", "x-azure-socketip", "x-appengine-user-ip", "cloudfront-viewer-address",
	"x-envoy-external-address", "x-envoy-internal", "x-originating-ip", "x-remote-ip", "x-remote-addr",
	"x-proxyuser-ip", "wl-proxy-client-ip", "proxy-client-ip", "x-original-forwarded-for",
	// Origin headers: the scheme, host or path a proxy saw.
	"x-host", "x-original-host", "x-scheme", "x-url-scheme", "front-end-https", "x-arr-ssl",
	"cf-visitor", "cloudfront-forwarded-proto", "x-original-url", "x-rewrite-url",
}

// IsForwardingHeader reports whether the header field name, in any case and
// with "_" read as "-" (CGI and some servers map both to one variable), is
// one that [Forwarder] removes: every X-Forwarded-* header (X-Forwarded-For,
// -Host, -Proto, -Port, -Prefix, -Server, -Ssl, -Client-Cert, …); Forwarded,
// Forwarded-For and X-Forwarded; the single-address headers X-Real-IP,
// X-Client-IP, Client-IP, X-Cluster-Client-IP, True-Client-IP,
// CF-Connecting-IP, CF-Connecting-IPv6, CF-Pseudo-IPv4, Fastly-Client-IP,
// Fly-Client-IP, X-Azure-ClientIP, X-Azure-SocketIP, X-AppEngine-User-IP,
// CloudFront-Viewer-Address, X-Envoy-External-Address, X-Envoy-Internal,
// X-Originating-IP, X-Remote-IP, X-Remote-Addr, X-ProxyUser-IP,
// WL-Proxy-Client-IP, Proxy-Client-IP and X-Original-Forwarded-For; and the
// origin headers X-Host, X-Original-Host, X-Scheme, X-Url-Scheme,
// Front-End-Https, X-ARR-SSL, CF-Visitor, CloudFront-Forwarded-Proto,
// X-Original-URL and X-Rewrite-URL. It does not allocate.
func IsForwardingHeader(name string) bool {
	if len(name) >= len("x-forwarded-") && headerNameIs(name[:len("x-forwarded-")], "x-forwarded-") {
		return true
	}
	for _, f := range forwardingNames {
		if headerNameIs(name, f) {
			return true
		}
	}
	return false
}

// isToken reports whether s is an RFC 9110 token (1*tchar), as a field name
// is.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// headerNameIs reports whether name is f (lower case, "-" for "_") in any
// case and with "_" for "-".
func headerNameIs(name, f string) bool {
	if len(name) != len(f) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := lowerASCII(name[i])
		if c == '_' {
			c = '-'
		}
		if c != f[i] {
			return false
		}
	}
	return true
}

// ForwardConfig configures a [Forwarder].
type ForwardConfig struct {
	// Trust decides which hops are verified: the resolver in force when a
	// request is forwarded walks its chain. It is required.
	Trust Trust

	// XForwardedFor writes the verified chain as X-Forwarded-For: the
	// client, then each trusted hop the walk stepped over, then this
	// proxy's socket peer, as proxies that append write it. XForwardedFor,
	// Forwarded or both must be set: a Forwarder that wrote neither would
	// pass every request on as this proxy's own, which a next hop that
	// trusts this proxy takes for an internal caller's (see
	// [Forwarder.Header]).
	XForwardedFor bool

	// Forwarded writes the verified chain as RFC 7239 Forwarded: one
	// element per hop with for=, the client's with the proto= and host= of
	// the verified origin (when Origin is set), the socket peer's with by=,
	// this proxy's own address.
	Forwarded bool

	// Origin, when not nil, reads the verified origin of each request (see
	// [OriginReader]), for Forwarded's proto= and host= and for
	// XForwardedOrigin. For a direct client that is the request this proxy
	// received, its TLS state and Host, as RFC 7239 §5.3 and §5.4 define
	// host= and proto=; set OriginConfig.AllowedHosts to confine the host.
	// A request whose origin cannot be read is forwarded as one whose
	// client is unknown (see [Forwarder.Header]). Nil writes no origin.
	Origin *OriginReader

	// XForwardedOrigin writes the verified origin as X-Forwarded-Proto,
	// X-Forwarded-Host (with its port when it is not the scheme's default),
	// X-Forwarded-Port (always) and X-Forwarded-Prefix (when there is one),
	// each one value. It needs Origin.
	XForwardedOrigin bool

	// Remove names more headers to remove from every forwarded request, in
	// any case, "_" read as "-"; [IsForwardingHeader]'s are always removed.
	Remove []string
}

// Forwarder rebuilds the forwarding headers of requests a reverse proxy
// passes on: it removes every incoming forwarding header and writes only
// what the walk verified, so that the next hop never reads a byte a client
// wrote unless a trusted hop vouched for it. It is immutable and safe for
// concurrent use.
//
// With httputil.ReverseProxy, call [Forwarder.Rewrite] from its Rewrite
// function; mount the resolve middleware in front of the proxy to refuse
// requests whose chain cannot be verified (Rewrite cannot refuse them: it
// forwards them marked as forwarded for an unknown client, see
// [Forwarder.Header]).
type Forwarder struct {
	cfg    ForwardConfig
	remove []string // lower case, "-" for "_"
}

// NewForwarder returns a Forwarder for cfg, or an error wrapping
// [ErrInvalidConfig]: no Trust (or one without a resolver), neither XForwardedFor nor Forwarded,
// XForwardedOrigin without Origin, or a Remove entry that is no field name.
func NewForwarder(cfg ForwardConfig) (*Forwarder, error) {
	if cfg.Trust == nil || cfg.Trust.Resolver() == nil {
		return nil, fmt.Errorf("%w: Trust is required", ErrInvalidConfig)
	}
	if !cfg.XForwardedFor && !cfg.Forwarded {
		return nil, fmt.Errorf("%w: set XForwardedFor, Forwarded or both: a Forwarder that writes neither passes every request on as the proxy's own", ErrInvalidConfig)
	}
	if cfg.XForwardedOrigin && cfg.Origin == nil {
		return nil, fmt.Errorf("%w: XForwardedOrigin needs Origin", ErrInvalidConfig)
	}
	f := &Forwarder{cfg: cfg}
	for _, name := range cfg.Remove {
		if !isToken(name) {
			return nil, fmt.Errorf("%w: Remove: %q is not a valid field name", ErrInvalidConfig, name)
		}
		f.remove = append(f.remove, strings.ReplaceAll(strings.ToLower(name), "_", "-"))
	}
	return f, nil
}

// Rewrite rewrites the outbound request's forwarding headers for
// httputil.ReverseProxy's Rewrite function, from the inbound request: see
// [Forwarder.Header]. Call it after pr.SetURL.
func (f *Forwarder) Rewrite(pr *httputil.ProxyRequest) { f.Header(pr.Out.Header, pr.In) }

// Header rewrites out, the header of the request about to be forwarded for
// in (in is only read):
//
//  1. It removes from out every header [IsForwardingHeader] names, every
//     header ForwardConfig.Remove names, and every header in's Connection
//     header names (RFC 9110 §7.6.1: hop-by-hop), except Connection,
//     Upgrade and TE, which a proxy sets again for its own hop
//     (httputil.ReverseProxy does, for a protocol upgrade and trailers).
//     A client that lists X-Forwarded-Host in Connection therefore cannot
//     make a hop drop what this one writes (CVE-2024-45410), and out's own
//     Connection header loses every token that names a forwarding header.
//  2. It resolves in with the resolver in force, and on success writes the
//     verified chain: the client, the trusted hops the walk stepped over,
//     and the socket peer (a Unix-socket peer has no address and is left
//     out), as ForwardConfig says, with the origin when Origin is set.
//     Entries to the left of the client are never written; every address
//     is written in canonical form from the parsed value, never copied.
//
// When the chain cannot be verified (an error of [Resolver.Resolve],
// ErrMasqueraded included: a node address must not reach the next hop as a
// client), or its origin cannot be read, or the Trust returns a nil
// resolver (an error wrapping [ErrNoTrust]), no address and no origin is
// written and the error is returned. The request is then marked as
// forwarded for a client whose address is unknown: X-Forwarded-For:
// unknown, and Forwarded: for=unknown with by= (RFC 7239 §6.2), in the
// formats ForwardConfig asks for. A next hop that trusts this proxy refuses
// it (a resolver's walk fails with ErrMalformed or ErrUnknownHop), rather
// than take it for this proxy's own request, which a policy's
// AdmitInternal rule, or an application that trusts its proxies, would let
// in as an internal caller's. Only [ErrAllTrusted], a chain whose every hop
// is a trusted proxy (an internal caller's request), is forwarded with no
// forwarding header, as this proxy's own. It returns the Result of the
// walk.
func (f *Forwarder) Header(out http.Header, in *http.Request) (Result, error) {
	f.strip(out, in.Header["Connection"])
	r := f.cfg.Trust.Resolver()
	if r == nil {
		f.unknown(out, in)
		return Result{}, errNilResolver
	}
	res, err := r.ResolveRequest(in)
	var org Origin
	if err == nil && f.cfg.Origin != nil {
		org, err = f.cfg.Origin.ReadRequest(in, res)
	}
	if err != nil {
		if ReasonOf(err) != ReasonAllTrusted {
			f.unknown(out, in)
		}
		return res, err
	}
	chain := r.verifiedChain(make([]netip.Addr, 0, 8), res, in.Header)
	if f.cfg.XForwardedFor && len(chain) > 0 {
		out["X-Forwarded-For"] = []string{formatXFF(chain)}
	}
	if f.cfg.Forwarded && len(chain) > 0 {
		out["Forwarded"] = []string{formatForwarded(chain, localAddr(in), org)}
	}
	if f.cfg.XForwardedOrigin {
		port := org.Port
		if port == 0 {
			port = 80
			if org.Secure() {
				port = 443
			}
		}
		out["X-Forwarded-Proto"] = []string{org.Scheme}
		out["X-Forwarded-Host"] = []string{org.HostPort()}
		out["X-Forwarded-Port"] = []string{strconv.Itoa(int(port))}
		if org.Prefix != "" {
			out["X-Forwarded-Prefix"] = []string{org.Prefix}
		}
	}
	return res, nil
}

// unknown writes the forwarding headers of a request whose client this
// proxy cannot vouch for: one hop whose address is unknown, in the formats
// ForwardConfig asks for.
func (f *Forwarder) unknown(out http.Header, in *http.Request) {
	if f.cfg.XForwardedFor {
		out["X-Forwarded-For"] = []string{"unknown"}
	}
	if f.cfg.Forwarded {
		b := []byte("for=unknown")
		if by := localAddr(in); by.IsValid() {
			b = append(b, ";by="...)
			b = appendNode(b, by)
		}
		out["Forwarded"] = []string{string(b)}
	}
}

// strip removes the incoming forwarding headers and the hop-by-hop headers
// conn (the inbound Connection lines) names from out.
func (f *Forwarder) strip(out http.Header, conn []string) {
	for _, line := range conn {
		for tok := range strings.SplitSeq(line, ",") {
			if tok = trimOWS(tok); tok != "" && !proxySets(tok) {
				out.Del(tok)
			}
		}
	}
	for name := range out {
		if IsForwardingHeader(name) || f.removes(name) {
			delete(out, name)
		}
	}
	if lines, ok := out["Connection"]; ok {
		var keep []string
		for _, line := range lines {
			for tok := range strings.SplitSeq(line, ",") {
				if tok = trimOWS(tok); tok != "" && !IsForwardingHeader(tok) && !f.removes(tok) {
					keep = append(keep, tok)
				}
			}
		}
		if len(keep) == 0 {
			delete(out, "Connection")
		} else {
			out["Connection"] = []string{strings.Join(keep, ", ")}
		}
	}
}

// proxySets reports whether a proxy sets the hop-by-hop header name for its
// own hop, as httputil.ReverseProxy does after removing the inbound ones:
// Connection, Upgrade (for a protocol upgrade) and TE ("trailers").
func proxySets(name string) bool {
	return strings.EqualFold(name, "Connection") || strings.EqualFold(name, "Upgrade") || strings.EqualFold(name, "TE")
}

func (f *Forwarder) removes(name string) bool {
	for _, r := range f.remove {
		if headerNameIs(name, r) {
			return true
		}
	}
	return false
}

// verifiedChain appends to dst the addresses a successful walk verified, as
// X-Forwarded-For lists them: the client first, then the trusted header
// entries, the PROXY source and the socket peer, each canonical. It reads the
// header entries the walk read again, by position: all of them parsed, and
// none beyond the client is touched.
func (r *Resolver) verifiedChain(dst []netip.Addr, res Result, h http.Header) []netip.Addr {
	base := 0
	if res.Proxy.Addr().IsValid() {
		base = 1
	}
	if n := res.Hop - base; n > 0 && res.Source.FromHeader() {
		// Header entries 0 (rightmost) to n-1 (the client), leftmost first.
		lines := h[r.header]
		switch r.kind {
		case headerForwarded:
			var ring fwdRing
			ring.scan(lines)
			for k := n - 1; k >= 0; k-- {
				a, _ := parseForwardedElement(ring.element(lines, k))
				dst = append(dst, a)
			}
		default:
			start := len(dst)
			for li := len(lines) - 1; li >= 0 && len(dst)-start < n; li-- {
				l := lines[li]
				for end := len(l); end >= 0 && len(dst)-start < n; {
					i := strings.LastIndexByte(l[:end], ',')
					e := trimOWS(l[i+1 : end])
					end = i
					if e != "" {
						a, _ := parseListAddr(e)
						dst = append(dst, a)
					}
				}
			}
			for i, j := start, len(dst)-1; i < j; i, j = i+1, j-1 {
				dst[i], dst[j] = dst[j], dst[i]
			}
		}
	}
	if base == 1 && res.Hop >= 1 {
		dst = append(dst, canonicalHop(res.Proxy.Addr()))
	}
	if p := canonicalHop(res.Peer.Addr()); p.IsValid() {
		dst = append(dst, p)
	}
	return dst
}

// formatXFF writes chain as an X-Forwarded-For value.
func formatXFF(chain []netip.Addr) string {
	b := make([]byte, 0, 24*len(chain))
	for i, a := range chain {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = a.AppendTo(b)
	}
	return string(b)
}

// formatForwarded writes chain as a Forwarded value (RFC 7239 §4): one
// element per hop; the first (the client's) with the origin's proto= and
// host=, the last (this proxy's peer's) with by=, this proxy's address.
func formatForwarded(chain []netip.Addr, by netip.Addr, o Origin) string {
	b := make([]byte, 0, 40*len(chain)+64)
	for i, a := range chain {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, "for="...)
		b = appendNode(b, a)
		if i == len(chain)-1 && by.IsValid() {
			b = append(b, ";by="...)
			b = appendNode(b, by)
		}
		if i == 0 && o.IsValid() {
			b = append(b, ";proto="...)
			b = append(b, o.Scheme...)
			b = append(b, ";host="...)
			hp := o.HostPort()
			if strings.ContainsAny(hp, ":[]") {
				// A port or an IPv6 literal is not a token; a host holds no
				// '"' or '\\' to escape.
				b = append(b, '"')
				b = append(b, hp...)
				b = append(b, '"')
			} else {
				b = append(b, hp...)
			}
		}
	}
	return string(b)
}

// appendNode appends a Forwarded node: an IPv4 address as a token, an IPv6
// address bracketed and quoted (RFC 7239 §6).
func appendNode(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		return a.AppendTo(b)
	}
	b = append(b, `"[`...)
	b = a.AppendTo(b)
	return append(b, `]"`...)
}

// localAddr returns the address the inbound request arrived on, canonical,
// or the invalid Addr when it is unknown or not IP.
func localAddr(in *http.Request) netip.Addr {
	la, ok := in.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return netip.Addr{}
	}
	if ta, ok := la.(*net.TCPAddr); ok {
		return canonicalHop(ta.AddrPort().Addr())
	}
	return netip.Addr{}
}
