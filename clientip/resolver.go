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
	// A single-address header is believed only from a trusted hop and must
	// appear exactly once, holding one address: a second instance or a list is
	// ErrMultipleValues. An edge that sets such a header overwrites it, so a
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
	// that would need more is ErrTooManyHops. Zero means DefaultMaxHops; at
	// most 64.
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
	trusted   PrefixSet
	masq      PrefixSet
	hops      int
	trustUnix bool
	header    string // canonical
	kind      headerKind
	source    Source
	maxHops   int
	maxBytes  int
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
		default:
			r.kind, r.source = headerSingle, SourceHeader
		}
		if r.trusted.Len() == 0 && r.hops == 0 && !r.trustUnix {
			return nil, fmt.Errorf("%w: Header %q is set but no proxy is trusted to deliver it (set TrustedProxies, TrustedHops or TrustUnixSocket)", ErrInvalidConfig, r.header)
		}
	}
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

// Header returns the canonical name of the header r reads, or "".
func (r *Resolver) Header() string { return r.header }

// TrustedProxies returns r's trusted set.
func (r *Resolver) TrustedProxies() PrefixSet { return r.trusted }

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
	case ok:
		return nil
	case failMasqueraded:
		return ErrMasqueraded
	}
	return &ChainError{Hop: res.Hop, Header: res.Header, Value: val, Err: failureErrors[f]}
}

// ResolveRequest resolves the client of an HTTP request. The transport is
// the one a connection wrapper stored with [NewTransportContext] (the proxyproto
// package's ConnContext helper does so, keeping the PROXY layer apart from the
// load balancer's socket address); otherwise it is parsed from req.RemoteAddr.
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
	t, ok := TransportFromContext(ctx)
	if !ok {
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

func (r *Resolver) found(res *Result, a netip.Addr, src Source, pos int, via netip.Addr) failure {
	res.Client, res.Source, res.Hop, res.Via = a, src, pos, via
	if src.FromHeader() {
		res.Header = r.header
	}
	if r.masq.list != nil && r.masq.containsCanon(a) {
		res.Masqueraded = true
		return failMasqueraded
	}
	return ok
}

// walk fills res and reports how the walk ended; on failure it also returns
// the offending header entry.
func (r *Resolver) walk(res *Result, t *Transport, h http.Header) (failure, string) {
	res.Peer, res.Proxy = t.Peer, t.Proxy

	// Hop 0: the socket peer.
	var cur netip.Addr // the hop just stepped over
	if pa := t.Peer.Addr(); pa.IsValid() {
		if pa.Is6() {
			pa = pa.Unmap().WithZone("")
		}
		if pa.IsUnspecified() {
			return failUnspecified, ""
		}
		var trusted bool
		switch {
		case r.hops > 0 && r.trusted.Len() == 0:
			trusted = true
		case pa.Is4():
			trusted = r.trusted.v4 != nil && r.trusted.v4.contains4(as4(pa))
		default:
			trusted = r.trusted.containsCanon(pa)
		}
		if !trusted {
			return r.found(res, pa, SourceSocket, 0, netip.Addr{}), ""
		}
		cur = pa
	} else if !r.trustUnix {
		return failNoAddress, ""
	}
	pos := 0

	// Hop 1: the PROXY protocol source.
	if pa := t.Proxy.Addr(); pa.IsValid() {
		pos = 1
		a, f := canonical(pa.WithZone(""))
		if f != ok {
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
		return r.exhausted(res, pos, cur)
	}
	lines := h[r.header]
	res.Via = cur // handed to the header walk; set again when the walk ends
	switch {
	case len(lines) == 0:
		return r.exhausted(res, pos, cur)
	case !withinBudget(lines, r.maxBytes):
		return r.fail(res, pos+1, failTooLarge, "")
	case r.kind == headerXFF:
		return r.walkXFF(res, lines, pos)
	case r.kind == headerForwarded:
		return r.walkForwarded(res, lines, pos)
	}
	return r.walkSingle(res, lines, pos)
}

// fail records where a header walk failed.
func (r *Resolver) fail(res *Result, pos int, f failure, entry string) (failure, string) {
	res.Hop, res.Header, res.Via = pos, r.header, netip.Addr{}
	return f, entry
}

// walkSingle continues the walk over a single-address header.
func (r *Resolver) walkSingle(res *Result, lines []string, pos int) (failure, string) {
	cur := res.Via // the hop last stepped over
	pos++
	e := trimOWS(lines[0])
	switch {
	case len(lines) > 1:
		return r.fail(res, pos, failMultiple, lines[1])
	case e == "":
		return r.fail(res, pos, failMalformed, e)
	case strings.IndexByte(e, ',') >= 0:
		return r.fail(res, pos, failMultiple, e)
	case pos > r.maxHops:
		return r.fail(res, pos, failTooMany, "")
	}
	a, f := parseListAddr(e)
	if f != ok {
		return r.fail(res, pos, f, e)
	}
	if r.client(a, pos) {
		return r.found(res, a, r.source, pos, cur), ""
	}
	res.Header = r.header
	return r.exhausted(res, pos, a)
}

// exhausted ends a walk in which every hop was trusted. When the last hop
// stepped over is a masquerading node (a node address trusted to deliver
// PROXY headers under externalTrafficPolicy: Cluster, reached by a connection
// that node masqueraded), the client was lost to masquerading, which says more
// than ErrAllTrusted.
func (r *Resolver) exhausted(res *Result, pos int, cur netip.Addr) (failure, string) {
	res.Hop, res.Via = pos, cur
	if cur.IsValid() && r.masq.list != nil && r.masq.containsCanon(cur) {
		res.Client, res.Via, res.Masqueraded = cur, netip.Addr{}, true
		switch {
		case pos == 0:
			res.Source = SourceSocket
		case pos == 1 && res.Proxy.Addr().IsValid():
			res.Source = SourceProxyProtocol
		default:
			res.Source, res.Header = r.source, r.header
		}
		return failMasqueraded, ""
	}
	if r.hops > 0 {
		return failTooFew, ""
	}
	return failAllTrusted, ""
}
