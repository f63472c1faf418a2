package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// Limits on hostile input. See Config.MaxHops and Config.MaxHeaderBytes.
const (
	DefaultMaxHops        = 32
	DefaultMaxHeaderBytes = 8 << 10

	maxHopsLimit = 64
	// maxHeaderBytesLimit is the largest Config.MaxHeaderBytes: positions in
	// a header then fit in an int32.
	maxHeaderBytesLimit = 1 << 30
)

// Config configures a [Resolver]. The zero Config is valid and trusts nothing:
// every socket peer is the client and no header is read.
type Config struct {
	// TrustedProxies is the set of proxies whose reports are believed: a hop
	// whose address is in the set delivered the layer outside it, so the walk
	// steps over it; the first hop outside the set is the client. The zero
	// value trusts no proxy.
	//
	// [New] refuses a set that holds 0.0.0.0/0 or ::/0 (::ffff:0:0/96 is
	// 0.0.0.0/0): every address of the family would be a trusted proxy, so
	// the walk could name no client of it (every answer ErrAllTrusted, with
	// the leftmost entry, which the client wrote, in Via), and every peer of
	// it could send a PROXY header. There is no opt-in: to believe a fixed
	// number of hops whoever the peer is, use TrustedHops without
	// TrustedProxies. Sets that are merely too broad for a proxy fleet are
	// checked by ranges.CheckSet and reported by the explain package's
	// findings, not refused here.
	//
	// In hop-count mode (TrustedHops > 0) the set, when not empty, is only
	// used for the socket peer: a peer outside it is the client and its PROXY
	// and header layers are ignored.
	TrustedProxies PrefixSet

	// TrustedHops, when above zero, switches to hop-count mode for deployments
	// whose proxy addresses are not known in advance: the client is the hop
	// TrustedHops positions outward from the socket peer (position 0), counting
	// the PROXY source and then the header entries from the right. With
	// TrustedHops = 1 behind one proxy, the client is what that proxy wrote. A
	// chain that is too short is ErrTooFewHops. Zero (the default) selects
	// trusted-range mode.
	TrustedHops int

	// TrustUnixSocket makes a socket peer without an IP address (a Unix-domain
	// socket, as used between a local reverse proxy and the application) a
	// trusted hop. When false (the default) such a peer is ErrNoAddress.
	TrustUnixSocket bool

	// Header names the one forwarding header to read, in any case:
	// "X-Forwarded-For", "Forwarded" (RFC 7239), or any other name, which is
	// then read as a single-address header such as "X-Real-IP",
	// "CF-Connecting-IP", "True-Client-IP" or "Fly-Client-IP". No other header
	// is ever read. "" (the default) reads no header: the chain is the socket
	// peer and the PROXY source.
	//
	// A Forwarded element the walk reads may have at most 16 parameters
	// (RFC 7239 sets no limit; see the package documentation); more is
	// ErrMalformed.
	//
	// An entry of X-Forwarded-For or of a single-address header may carry a
	// zone if its address is link-local IPv6, as Go's httputil.ReverseProxy
	// writes it for a link-local peer ("fe80::5%eth0"): 1 to 15 of RFC 6874's
	// unreserved characters, never percent-decoded, dropped before the
	// trusted set is matched. A zone anywhere else, and any zone in a
	// Forwarded node (RFC 7239 §6 has none), is ErrMalformed.
	//
	// A single-address header is believed only from a trusted hop and must
	// appear exactly once, holding one address: a second instance or a list is
	// ErrMultipleValues, and an empty value is ErrMalformed. An edge that sets such a header overwrites it, so a
	// second value can only come from a client, and neither first nor last can
	// be picked safely without knowing which proxy appended which.
	Header string

	// Masquerade is the set of addresses that stand in for clients rather than
	// being one: node addresses under Kubernetes externalTrafficPolicy: Cluster,
	// which SNATs every external connection to the node that received it. A
	// result in the set is returned with Masqueraded set and ErrMasqueraded. The
	// zero value flags nothing.
	Masquerade PrefixSet

	// MaxHops bounds the length of the walk, counted like TrustedHops. A chain
	// that would need more is ErrTooManyHops, and a hop beyond the bound is
	// never read. Zero means DefaultMaxHops; at most 64.
	MaxHops int

	// MaxHeaderBytes bounds the size of the configured header over all of its
	// lines (each line counts one byte more than its length). A larger header
	// is ErrHeaderTooLarge before any of it is parsed. Zero means
	// DefaultMaxHeaderBytes; at most 1 GiB.
	MaxHeaderBytes int
}

type headerKind uint8

const (
	headerNone headerKind = iota
	headerXFF
	headerForwarded
	headerSingle
)

// Resolver resolves client addresses under one [Config]. It is immutable and
// safe for concurrent use.
type Resolver struct {
	cfg       Config // as validated, for Config
	trusted   PrefixSet
	masq      PrefixSet
	hops      int
	trustUnix bool
	header    string // canonical
	kind      headerKind
	source    Source
	maxHops   int
	maxBytes  int

	// quads is trusted-range mode with IPv4 prefixes to trust: walkXFF then
	// tests trust on a dotted quad's integer; quads6 the same with IPv6
	// prefixes, on plain IPv6 entries' 64-bit halves. Explain's copy turns
	// both off, for its trace needs every entry.
	quads, quads6 bool

	// trace, when not nil, records each header entry the walk reads. Only
	// Explain sets it, on a copy of the Resolver of its own.
	trace *trace
}

// New returns a Resolver for cfg, or an error wrapping [ErrInvalidConfig] that
// says which field is wrong. A header with nothing trusted to deliver it is an
// error: it would never be read.
func New(cfg Config) (*Resolver, error) {
	r := &Resolver{
		trusted:   cfg.TrustedProxies,
		masq:      cfg.Masquerade,
		hops:      cfg.TrustedHops,
		trustUnix: cfg.TrustUnixSocket,
		maxHops:   cfg.MaxHops,
		maxBytes:  cfg.MaxHeaderBytes,
	}
	if r.maxHops == 0 {
		r.maxHops = DefaultMaxHops
	}
	if r.maxBytes == 0 {
		r.maxBytes = DefaultMaxHeaderBytes
	}
	switch {
	case r.maxHops < 0 || r.maxHops > maxHopsLimit:
		return nil, fmt.Errorf("%w: MaxHops %d is outside 0..%d", ErrInvalidConfig, cfg.MaxHops, maxHopsLimit)
	case r.maxBytes < 0:
		return nil, fmt.Errorf("%w: MaxHeaderBytes %d is negative", ErrInvalidConfig, cfg.MaxHeaderBytes)
	case r.maxBytes > maxHeaderBytesLimit:
		// The Forwarded walk keeps positions in a header as int32.
		return nil, fmt.Errorf("%w: MaxHeaderBytes %d exceeds %d", ErrInvalidConfig, cfg.MaxHeaderBytes, maxHeaderBytesLimit)
	case r.hops < 0:
		return nil, fmt.Errorf("%w: TrustedHops %d is negative", ErrInvalidConfig, cfg.TrustedHops)
	case r.hops > r.maxHops:
		return nil, fmt.Errorf("%w: TrustedHops %d exceeds MaxHops %d", ErrInvalidConfig, r.hops, r.maxHops)
	}
	for _, p := range r.trusted.list {
		if p.Bits() == 0 {
			return nil, fmt.Errorf("%w: TrustedProxies holds %s, which makes every address of its family a trusted proxy: no client of it could be named and any of them could send a PROXY header (trust the proxies' own ranges, or use TrustedHops without TrustedProxies)", ErrInvalidConfig, p)
		}
	}
	if cfg.Header != "" {
		for i := 0; i < len(cfg.Header); i++ {
			if !isTchar(cfg.Header[i]) {
				return nil, fmt.Errorf("%w: Header %q is not a valid field name", ErrInvalidConfig, cfg.Header)
			}
		}
		r.header = textproto.CanonicalMIMEHeaderKey(cfg.Header)
		switch r.header {
		case "X-Forwarded-For":
			r.kind, r.source = headerXFF, SourceXForwardedFor
		case "Forwarded":
			r.kind, r.source = headerForwarded, SourceForwarded
		case "Cloudfront-Viewer-Address":
			// "IP:port" with an unbracketed IPv6 address: "2001:db8::1:443"
			// is itself a valid address, so the entry cannot be read as a
			// single address without guessing.
			return nil, fmt.Errorf("%w: Header %q carries an address and a port that cannot be told apart for IPv6 clients; read X-Forwarded-For, which CloudFront appends on every request (see the presets package)", ErrInvalidConfig, r.header)
		default:
			r.kind, r.source = headerSingle, SourceHeader
		}
		if r.trusted.Len() == 0 && r.hops == 0 && !r.trustUnix {
			return nil, fmt.Errorf("%w: Header %q is set but no proxy is trusted to deliver it (set TrustedProxies, TrustedHops or TrustUnixSocket)", ErrInvalidConfig, r.header)
		}
	}
	r.quads = r.hops == 0 && r.trusted.v4 != nil
	r.quads6 = r.hops == 0 && r.trusted.v6 != nil
	r.cfg = cfg
	r.cfg.Header, r.cfg.MaxHops, r.cfg.MaxHeaderBytes = r.header, r.maxHops, r.maxBytes
	return r, nil
}

// MustNew is like [New] but panics on error. Use it only for static configuration.
func MustNew(cfg Config) *Resolver {
	r, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return r
}

// Config returns the configuration r was built from, as [New] validated it:
// MaxHops and MaxHeaderBytes hold the limits in force (their defaults when
// zero was given) and Header is in canonical form ("X-Forwarded-For"). The
// prefix sets are immutable values, so the copy shares nothing that can
// change r.
func (r *Resolver) Config() Config { return r.cfg }

// Resolve walks the chain of one connection's transport t and, for HTTP, its
// headers h (nil for protocols without headers) and returns the client with its
// provenance.
//
// The walk starts at the socket peer (hop 0). A peer outside the trusted set
// is the client and nothing else is read. A trusted peer delivered the next
// layer: the PROXY source if t has one (hop 1), then the configured header's
// entries from the right. The first untrusted hop is the client. On failure the
// error wraps one of the package's sentinels in a [*ChainError] naming the hop
// and header, and the Result still describes the layers; its Client is invalid
// except with ErrMasqueraded. Resolve never returns the leftmost entry of a
// list, never skips an entry it cannot read, and never passes the peer off as
// the client when a trusted peer's report cannot be read.
//
// Resolve does not allocate unless it fails.
func (r *Resolver) Resolve(t Transport, h http.Header) (res Result, err error) {
	// Small enough to inline into the caller, so that resolve fills the
	// caller's Result in place rather than copying it back.
	err = r.resolve(&res, &t, h)
	return res, err
}

// resolve is Resolve's body: it walks, then builds the error once.
func (r *Resolver) resolve(res *Result, t *Transport, h http.Header) error {
	f, val := r.walk(res, t, h)
	switch f {
	case ReasonNone:
		return nil
	case ReasonMasqueraded:
		return ErrMasqueraded
	}
	return &ChainError{Hop: res.Hop, Header: res.Header, Value: val, Err: f.Err()}
}

// ResolveRequest resolves the client of an HTTP request. The transport is
// the one a connection wrapper stored with [NewConnContext] or
// [NewTransportContext] (the middleware and proxyproto packages' ConnContext
// helpers do so, keeping the PROXY layer apart from the load balancer's
// socket address), found with one context lookup; otherwise it is parsed
// from req.RemoteAddr. The trust is r's, whatever Trust the connection
// carries: [FromRequest] is the form that resolves under the connection's.
// A peer on a Unix-domain listener (http.LocalAddrContextKey) has no IP
// address whatever RemoteAddr says, since that is the path the client bound
// its socket to and may read "127.0.0.1:9". ResolveRequest never modifies req.
func (r *Resolver) ResolveRequest(req *http.Request) (res Result, err error) {
	// Small enough to inline, like Resolve.
	err = r.resolveRequest(&res, req)
	return res, err
}

func (r *Resolver) resolveRequest(res *Result, req *http.Request) error {
	ctx := req.Context()
	if ci, ok := ctx.Value(transportCtxKey).(*connInfo); ok {
		return ci.resolve(res, r, req)
	}
	var t Transport
	la, _ := ctx.Value(http.LocalAddrContextKey).(net.Addr)
	switch {
	case la != nil && strings.HasPrefix(la.Network(), "unix"):
		// A Unix-domain listener: the peer has no IP address, whatever
		// RemoteAddr says. It is the path the client bound its socket
		// to, which can read "127.0.0.1:9".
	default:
		ap, ok := parseRemoteAddr(req.RemoteAddr)
		if !ok {
			// Not a Unix socket, so an unreadable RemoteAddr (rewritten
			// by other middleware, say) must not pass for a local peer.
			return &ChainError{Err: ErrNoAddress, Value: req.RemoteAddr}
		}
		t.Peer = ap
	}
	return r.resolve(res, &t, req.Header)
}

// client reports whether a, at chain position pos, is the client.
func (r *Resolver) client(a netip.Addr, pos int) bool {
	if r.hops > 0 {
		return pos == r.hops
	}
	return !r.trusted.containsCanon(a)
}

func (r *Resolver) found(res *Result, a netip.Addr, src Source, pos int, via netip.Addr) Reason {
	res.Client, res.Source, res.Hop, res.Via = a, src, pos, via
	if src.FromHeader() {
		res.Header = r.header
	}
	if r.masq.list != nil && r.masq.containsCanon(a) {
		res.Masqueraded = true
		return ReasonMasqueraded
	}
	return ReasonNone
}

// walk fills res and reports how the walk ended; on failure it also returns
// the offending header entry.
func (r *Resolver) walk(res *Result, t *Transport, h http.Header) (Reason, string) {
	res.Peer, res.Proxy = t.Peer, t.Proxy

	// Hop 0: the socket peer.
	var cur netip.Addr // the hop just stepped over
	if pa := t.Peer.Addr(); pa.IsValid() {
		if pa.Is6() {
			pa = pa.Unmap().WithZone("")
		}
		if pa.IsUnspecified() {
			return ReasonUnspecified, ""
		}
		var trusted bool
		switch {
		case t.PeerUntrusted:
		case r.hops > 0 && r.trusted.Len() == 0:
			trusted = true
		case pa.Is4():
			trusted = r.trusted.contains4(as4(pa)) // containsCanon without a call
		default:
			trusted = r.trusted.containsCanon(pa)
		}
		if !trusted {
			return r.found(res, pa, SourceSocket, 0, netip.Addr{}), ""
		}
		cur = pa
	} else if !r.trustUnix || t.PeerUntrusted {
		return ReasonNoAddress, ""
	}
	pos := 0
	if t.ProxyLocal {
		// A trusted upstream's PROXY header named no client (LOCAL, or v1
		// UNKNOWN): the walk ends at the upstream, as for a request without
		// a forwarding header, whatever header the connection's own bytes
		// carry.
		return r.exhausted(res, pos, cur, nil)
	}

	// Hop 1: the PROXY protocol source.
	if pa := t.Proxy.Addr(); pa.IsValid() {
		pos = 1
		a, f := canonical(pa.WithZone(""))
		if f != ReasonNone {
			res.Hop = pos
			return f, ""
		}
		if r.client(a, pos) {
			return r.found(res, a, SourceProxyProtocol, pos, cur), ""
		}
		cur = a
	}

	// The header's entries, from the right.
	if r.kind == headerNone {
		return r.exhausted(res, pos, cur, nil)
	}
	lines := h[r.header]
	res.Via = cur // handed to the header walk; set again when the walk ends
	switch {
	case len(lines) == 0:
		return r.exhausted(res, pos, cur, nil)
	case !withinBudget(lines, r.maxBytes):
		return r.fail(res, pos+1, ReasonHeaderTooLarge, "")
	case r.kind == headerXFF:
		return r.walkXFF(res, lines, pos)
	case r.kind == headerForwarded:
		return r.walkForwarded(res, lines, pos)
	}
	return r.walkSingle(res, lines, pos)
}

// fail records where a header walk failed.
func (r *Resolver) fail(res *Result, pos int, f Reason, entry string) (Reason, string) {
	res.Hop, res.Header, res.Via = pos, r.header, netip.Addr{}
	return f, entry
}

// walkSingle continues the walk over a single-address header. The header's
// shape is judged first (one line, no list), then its one hop like any other:
// its position against MaxHops, then its content.
func (r *Resolver) walkSingle(res *Result, lines []string, pos int) (Reason, string) {
	cur := res.Via // the hop last stepped over
	pos++
	e := trimOWS(lines[0])
	switch {
	case len(lines) > 1:
		return r.fail(res, pos, ReasonMultipleValues, lines[1])
	case strings.IndexByte(e, ',') >= 0:
		return r.fail(res, pos, ReasonMultipleValues, e)
	case pos > r.maxHops:
		return r.fail(res, pos, ReasonTooManyHops, "")
	case e == "":
		return r.fail(res, pos, ReasonMalformed, e)
	}
	var a netip.Addr
	if ip, j := back4(e, len(e)); j == -1 {
		// The common entry, a dotted quad, as walkXFF reads it.
		if ip == 0 {
			return r.fail(res, pos, ReasonUnspecified, e)
		}
		a = addrFrom4(ip)
	} else {
		var f Reason
		if a, f = parseListAddr(e); f != ReasonNone {
			return r.fail(res, pos, f, e)
		}
	}
	if r.trace != nil {
		r.trace.read(pos, e, a)
	}
	if r.client(a, pos) {
		return r.found(res, a, r.source, pos, cur), ""
	}
	return r.exhausted(res, pos, a, lines)
}

// exhausted ends a walk that stepped over every hop up to pos, cur being the
// last of them; lines are the configured header's. Hop pos is a header entry
// when it lies beyond the transport's layers, and only then does res name the
// header.
//
// When cur is a masquerading node (a node address trusted to deliver PROXY
// headers under externalTrafficPolicy: Cluster, reached by a connection that
// node masqueraded), the client was lost to masquerading, which says more than
// ErrAllTrusted or ErrTooFewHops: the node is returned as a flagged Client,
// with the hop that reported it in Via.
func (r *Resolver) exhausted(res *Result, pos int, cur netip.Addr, lines []string) (Reason, string) {
	res.Hop, res.Via, res.Header = pos, cur, ""
	base := 0 // the position of the outermost transport layer
	if res.Proxy.Addr().IsValid() {
		base = 1
	}
	if pos > base {
		res.Header = r.header
	}
	if !cur.IsValid() || r.masq.list == nil || !r.masq.containsCanon(cur) {
		if r.hops > 0 {
			return ReasonTooFewHops, ""
		}
		return ReasonAllTrusted, ""
	}
	res.Client, res.Masqueraded = cur, true
	switch {
	case pos == 0:
		res.Source, res.Via = SourceSocket, netip.Addr{}
	case pos == base:
		res.Source, res.Via = SourceProxyProtocol, canonicalHop(res.Peer.Addr())
	case pos-1 == base:
		// The header's one entry, reported by the outermost transport layer.
		res.Source, res.Via = r.source, canonicalHop(res.Peer.Addr())
		if base == 1 {
			res.Via = canonicalHop(res.Proxy.Addr())
		}
	default:
		// The header's leftmost entry, reported by the one to its right.
		res.Source, res.Via = r.source, r.secondEntry(lines)
	}
	return ReasonMasqueraded, ""
}

// canonicalHop returns a transport layer's address as the walk reads it:
// unmapped, without a zone, and invalid for a Unix peer.
func canonicalHop(a netip.Addr) netip.Addr {
	if !a.IsValid() {
		return a
	}
	return a.Unmap().WithZone("")
}

// secondEntry returns the address of the second entry from the left of a
// header whose entries the walk has read and found valid: the hop that
// reported the leftmost. It is only used when a walk ends on a masquerading
// node, so it reads the header again rather than slow the walk down.
func (r *Resolver) secondEntry(lines []string) netip.Addr {
	if r.kind == headerForwarded {
		var ring fwdRing
		ring.scan(lines)
		a, _ := parseForwardedElement(ring.element(lines, ring.n-2))
		return a
	}
	n := 0
	for _, l := range lines {
		for e := range strings.SplitSeq(l, ",") {
			if e = trimOWS(e); e == "" {
				continue
			}
			if n++; n == 2 {
				a, _ := parseListAddr(e)
				return a
			}
		}
	}
	return netip.Addr{}
}
