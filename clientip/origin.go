package clientip

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// Origin is the scheme, host, port and path prefix a client used to reach
// the service, as the hop that reported the client saw them: what redirects,
// absolute links, cookies' Secure attribute and CSRF origin checks need. It
// is a small comparable value; the zero Origin is not valid.
type Origin struct {
	// Scheme is "http" or "https".
	Scheme string

	// Host is the host in canonical form: a lower-case DNS-style name (IDNA
	// not decoded), an IPv4 address, or an IPv6 address in brackets
	// ("[2001:db8::1]"). It never has a port.
	Host string

	// Port is the port the client connected to when one was reported and
	// is not the scheme's default (443 for https, 80 for http); 0 otherwise.
	Port uint16

	// Prefix is the path prefix a proxy removed before passing the request
	// on ("/app"), without a trailing "/", or "".
	Prefix string
}

// IsValid reports whether o has a scheme and a host.
func (o Origin) IsValid() bool { return o.Scheme != "" && o.Host != "" }

// Secure reports whether the client used https: set cookies' Secure
// attribute and HSTS on it.
func (o Origin) Secure() bool { return o.Scheme == "https" }

// HostPort returns the host with its port, as a Host header carries it:
// "example.com" or "example.com:8443".
func (o Origin) HostPort() string {
	if o.Port == 0 {
		return o.Host
	}
	return o.Host + ":" + strconv.Itoa(int(o.Port))
}

// String returns the origin serialised as browsers send it in the Origin
// header (RFC 6454 §6.2), "https://example.com:8443", without the prefix; ""
// for the zero Origin.
func (o Origin) String() string {
	if !o.IsValid() {
		return ""
	}
	return o.Scheme + "://" + o.HostPort()
}

// SameOrigin reports whether o and p are the same web origin (RFC 6454
// §5): the same scheme, host and port. The prefix is not part of an origin.
// Compare an Origin header with it through [ParseOrigin].
func (o Origin) SameOrigin(p Origin) bool {
	return o.IsValid() && o.Scheme == p.Scheme && o.Host == p.Host && o.Port == p.Port
}

// LogValue implements [slog.LogValuer]: the serialised origin and the prefix
// when there is one.
func (o Origin) LogValue() slog.Value {
	if o.Prefix == "" {
		return slog.StringValue(o.String())
	}
	return slog.GroupValue(slog.String("origin", o.String()), slog.String("prefix", o.Prefix))
}

// normalPort returns port, or 0 when it is the scheme's default.
func (o Origin) normalPort(port uint16) uint16 {
	if o.Scheme == "https" && port == 443 || o.Scheme == "http" && port == 80 {
		return 0
	}
	return port
}

// OriginConfig configures an [OriginReader]: which headers the deployment's
// trusted proxies write to report the origin, and which hosts the service
// answers to. Name a header only if every trusted proxy that can report a
// client sets it (overwriting or appending) on every request: a header that
// some trusted proxy passes on untouched carries whatever the client wrote,
// and no rule applied to it can tell. The zero OriginConfig reads no header:
// every request's origin is its own (its TLS state and Host), and any valid
// host is allowed.
type OriginConfig struct {
	// Proto names the header that reports the scheme: "X-Forwarded-Proto"
	// (or another name, such as "X-Forwarded-Scheme", whose value is http
	// or https), or "Forwarded" for the proto= parameter of the element that
	// named the client. Declared and absent from a proxied request, it is
	// ErrOriginMissing. "" (the default) reads none: a proxied request's
	// scheme is that of the connection it arrived on.
	Proto string

	// Host names the header that reports the host, with an optional port:
	// "X-Forwarded-Host", or "Forwarded" for the host= parameter. Declared
	// and absent from a proxied request, it is ErrOriginMissing. "" reads
	// none: the host is the request's Host as the proxy passed it on.
	Host string

	// Port names the header that reports the port, such as
	// "X-Forwarded-Port". A port it reports must agree with one in the host.
	// Absent, the port is the host's, if any. "" reads none.
	Port string

	// Prefix names the header that reports the path prefix a proxy removed,
	// such as "X-Forwarded-Prefix". It must hold one value: hops that each
	// remove a prefix compose theirs, so no entry of a list would be the
	// whole prefix, and a list is ErrOriginAmbiguous. Absent, there is no
	// prefix. "" reads none.
	Prefix string

	// AllowedHosts lists the hosts the service answers to: names (in any
	// case), "*.example.com" (exactly one more label, as in a TLS
	// certificate: not example.com, not a.b.example.com), IPv4 addresses
	// and IPv6 addresses with or without brackets, all without ports. Any
	// other host, including the Host of a direct client, is
	// ErrHostNotAllowed. Empty (the default) allows any valid host.
	AllowedHosts []string
}

// OriginReader reads the origin of requests whose client a [Resolver] has
// resolved, from the headers written by the same trusted hop that reported
// the client, never from a client. It is immutable and safe for concurrent
// use.
//
// # Which hop's value is read
//
// A direct client (a Result from the socket) and a client named by a PROXY
// protocol header (an L4 hop writes no HTTP header) get the request's own
// origin: https when the request arrived over TLS, and its Host. No header
// is read: everything in them came from the client.
//
// A client named by a header entry was reported by the trusted hop that
// wrote that entry, k hops from the right of the header (k = 0 for the
// rightmost entry and for a single-address header). Proxies write origin
// headers in one of two ways: they set them, replacing what came in (nginx
// proxy_set_header, HAProxy http-request set-header, Go's
// ProxyRequest.SetXForwarded), or they append an entry per hop, as for
// X-Forwarded-For (HAProxy http-request add-header). A list header
// (Proto, Host, Port) is read as one list over all its lines, empty
// elements skipped, and its n entries decide:
//
//   - n = 1: the one value, which a setting proxy wrote. When inner proxies
//     set it too rather than pass the outer one on, it describes the inner
//     connection; it never comes from the client, which cannot remove what
//     a trusted proxy wrote.
//   - n > 1 and n ≥ k+1: the entry k from the right, appended by the hop
//     that reported the client, as its X-Forwarded-For entry was. Entries
//     further left are the client's and are never read.
//   - 1 < n < k+1: ErrOriginAmbiguous. Appending hops would have written at
//     least k+1 entries and setting hops one, so the list cannot be tied to
//     the hop that reported the client.
//
// Forwarded is exact: with Proto or Host set to "Forwarded", the proto= and
// host= parameters are read from the element whose for= named the client,
// which the walk has already found well formed. A client named by any other
// header has no such element: ErrOriginMissing.
//
// # What is accepted
//
// The scheme is http or https in any case; the host is a DNS-style name,
// an IPv4 address or a bracketed IPv6 address with an optional port (see
// [ParseOrigin]); the port is 1 to 65535 without leading zeros; the prefix
// is an absolute path of clean segments (no "//", ".", "..", "%", ";" or
// ","), at most 1024 bytes. A quoted Forwarded value with a quoted-pair is
// refused rather than unescaped. An origin header longer than
// DefaultMaxHeaderBytes is refused before it is parsed. The host is then
// checked against AllowedHosts.
type OriginReader struct {
	proto, host, port, prefix string // canonical header names
	allow                     hostAllow
	cfg                       OriginConfig
}

// NewOriginReader returns an OriginReader for cfg, or an error wrapping
// [ErrInvalidConfig] that says which field is wrong.
func NewOriginReader(cfg OriginConfig) (*OriginReader, error) {
	cfg.AllowedHosts = slices.Clone(cfg.AllowedHosts)
	o := &OriginReader{cfg: cfg}
	fields := []struct {
		field, name string
		dst         *string
		forwarded   bool // may be "Forwarded"
	}{
		{"Proto", cfg.Proto, &o.proto, true},
		{"Host", cfg.Host, &o.host, true},
		{"Port", cfg.Port, &o.port, false},
		{"Prefix", cfg.Prefix, &o.prefix, false},
	}
	seen := map[string]string{}
	for _, f := range fields {
		if f.name == "" {
			continue
		}
		if !isToken(f.name) {
			return nil, fmt.Errorf("%w: %s %q is not a valid field name", ErrInvalidConfig, f.field, f.name)
		}
		name := textproto.CanonicalMIMEHeaderKey(f.name)
		switch {
		case name == "Forwarded" && !f.forwarded:
			return nil, fmt.Errorf("%w: %s cannot be read from Forwarded: RFC 7239 has no parameter for it", ErrInvalidConfig, f.field)
		case name == "X-Forwarded-For" || name == "Host":
			return nil, fmt.Errorf("%w: %s %q does not report an origin", ErrInvalidConfig, f.field, name)
		case seen[name] != "" && name != "Forwarded":
			return nil, fmt.Errorf("%w: %s and %s both name %q", ErrInvalidConfig, seen[name], f.field, name)
		}
		seen[name] = f.field
		*f.dst = name
	}
	var ok bool
	var bad string
	if o.allow, ok, bad = newHostAllow(cfg.AllowedHosts); !ok {
		return nil, fmt.Errorf("%w: AllowedHosts: %q is not a host name, an IP address or *.name", ErrInvalidConfig, bad)
	}
	return o, nil
}

// MustNewOriginReader is like [NewOriginReader] but panics on error. Use it
// only for static configuration.
func MustNewOriginReader(cfg OriginConfig) *OriginReader {
	o, err := NewOriginReader(cfg)
	if err != nil {
		panic(err)
	}
	return o
}

// Config returns the configuration o was built from, with its own copy of
// AllowedHosts.
func (o *OriginReader) Config() OriginConfig {
	cfg := o.cfg
	cfg.AllowedHosts = slices.Clone(cfg.AllowedHosts)
	return cfg
}

// ReadRequest is Read for req: tls is req.TLS != nil and host is req.Host.
// res must be the Result of resolving req. ReadRequest never modifies req.
func (o *OriginReader) ReadRequest(req *http.Request, res Result) (Origin, error) {
	return o.Read(res, req.Header, req.TLS != nil, req.Host)
}

// Read returns the origin of a request whose client res names (a Result of
// resolving that request, successful or flagged ErrMasqueraded), from its
// headers h, whether it arrived over TLS, and its Host, under the rules of
// [OriginReader]. On failure the error wraps ErrOriginMalformed,
// ErrOriginAmbiguous, ErrOriginMissing or ErrHostNotAllowed in a
// [*ChainError] whose Hop is res.Hop and whose Header names the header read
// ("Host" for the request's own).
//
// It does not allocate unless it fails, the host has upper-case letters, or
// the host is an IPv6 literal.
func (o *OriginReader) Read(res Result, h http.Header, tls bool, host string) (Origin, error) {
	if !res.Client.IsValid() {
		return Origin{}, &ChainError{Hop: res.Hop, Err: ErrOriginMissing}
	}
	if !res.Source.FromHeader() {
		return o.own(res.Hop, tls, host)
	}
	k := res.Hop - 1 // the client's entry, counted from the right of its header
	if res.Proxy.Addr().IsValid() {
		k--
	}
	rd := reported{res: res, h: h, k: k}
	fail := func(header, value string, e error) (Origin, error) {
		return Origin{}, &ChainError{Hop: res.Hop, Header: header, Value: value, Err: e}
	}

	// The scheme.
	var org Origin
	if o.proto == "" {
		org.Scheme = "http"
		if tls {
			org.Scheme = "https"
		}
	} else {
		v, err := rd.value(o.proto, "proto")
		if err != nil {
			return fail(o.proto, v, err)
		}
		var ok bool
		if org.Scheme, ok = parseScheme(v); !ok {
			return fail(o.proto, v, ErrOriginMalformed)
		}
	}

	// The host and its port.
	hostHeader, v := "Host", host
	if o.host != "" {
		hostHeader = o.host
		var err error
		if v, err = rd.value(o.host, "host"); err != nil {
			return fail(hostHeader, v, err)
		}
	} else if host == "" {
		return fail(hostHeader, "", ErrOriginMissing)
	}
	hostPort, port, hasPort, ok := parseHostPort(v)
	if !ok {
		return fail(hostHeader, v, ErrOriginMalformed)
	}
	org.Host = hostPort

	// The port header, which must agree with the host's port.
	if o.port != "" {
		switch v, err := rd.value(o.port, ""); {
		case err == ErrOriginMissing:
		case err != nil:
			return fail(o.port, v, err)
		default:
			p, ok := parseOriginPort(v)
			if !ok {
				return fail(o.port, v, ErrOriginMalformed)
			}
			if hasPort && p != port {
				return fail(o.port, v, ErrOriginAmbiguous)
			}
			port = p
		}
	}
	org.Port = org.normalPort(port)

	// The prefix: one value or none.
	if o.prefix != "" {
		if lines := h[o.prefix]; len(lines) > 0 {
			v = trimOWS(lines[0])
			switch {
			case len(lines) > 1 || strings.IndexByte(v, ',') >= 0:
				return fail(o.prefix, joinForError(lines), ErrOriginAmbiguous)
			case v != "":
				if org.Prefix, ok = parsePrefix(v); !ok {
					return fail(o.prefix, v, ErrOriginMalformed)
				}
			}
		}
	}

	if !o.allow.allows(org.Host) {
		return fail(hostHeader, org.Host, ErrHostNotAllowed)
	}
	return org, nil
}

// own is the request's own origin, for a client no header reported.
func (o *OriginReader) own(hop int, tls bool, host string) (Origin, error) {
	org := Origin{Scheme: "http"}
	if tls {
		org.Scheme = "https"
	}
	if host == "" {
		return Origin{}, &ChainError{Hop: hop, Header: "Host", Err: ErrOriginMissing}
	}
	h, port, _, ok := parseHostPort(host)
	if !ok {
		return Origin{}, &ChainError{Hop: hop, Header: "Host", Value: host, Err: ErrOriginMalformed}
	}
	if !o.allow.allows(h) {
		return Origin{}, &ChainError{Hop: hop, Header: "Host", Value: h, Err: ErrHostNotAllowed}
	}
	org.Host, org.Port = h, org.normalPort(port)
	return org, nil
}

// listEntry returns the entry of a list header that the hop k positions
// from the right wrote (see [OriginReader]): the only entry, or the entry k
// from the right. It reports ErrOriginMissing for an absent or empty header,
// ErrOriginAmbiguous for a list that cannot be tied to hop k, and
// ErrOriginMalformed for a header longer than DefaultMaxHeaderBytes.
func listEntry(lines []string, k int) (string, error) {
	if !withinBudget(lines, DefaultMaxHeaderBytes) {
		return "", ErrOriginMalformed
	}
	var at, last string // the entry k from the right, and the rightmost
	n := 0
	for li := len(lines) - 1; li >= 0; li-- {
		l := lines[li]
		for end := len(l); end >= 0; {
			i := strings.LastIndexByte(l[:end], ',')
			e := trimOWS(l[i+1 : end])
			end = i
			if e == "" {
				continue // RFC 9110 §5.6.1: empty list elements do not count
			}
			if n == 0 {
				last = e
			}
			if n == k {
				at = e
			}
			n++
		}
	}
	switch {
	case n == 0:
		return "", ErrOriginMissing
	case n == 1:
		return last, nil
	case n > k:
		return at, nil
	}
	return joinForError(lines), ErrOriginAmbiguous
}

// reported reads what the hop that reported a client wrote into the
// request's origin headers.
type reported struct {
	res Result
	h   http.Header
	k   int    // the client's entry, counted from the right of its header
	fwd string // the Forwarded element that named the client, once found
}

// value returns the value of header name that hop k wrote: the entry of a
// list header, or for "Forwarded" the parameter param of the element that
// named the client.
func (r *reported) value(name, param string) (string, error) {
	if r.k < 0 {
		return "", ErrOriginMissing // not a header's client; never for a Result of Resolve
	}
	if name != "Forwarded" {
		return listEntry(r.h[name], r.k)
	}
	if r.fwd == "" {
		lines := r.h["Forwarded"]
		var ring fwdRing
		if r.res.Source != SourceForwarded || r.k >= maxHopsLimit || !ring.scan(lines) || r.k >= ring.n {
			return "", ErrOriginMissing
		}
		r.fwd = ring.element(lines, r.k)
	}
	return forwardedValue(r.fwd, param)
}

// forwardedValue returns the value of parameter name in a Forwarded element,
// unquoted. A missing parameter is ErrOriginMissing; a quoted value with a
// quoted-pair, which would need unescaping, and anything the walk would not
// have found well formed are ErrOriginMalformed.
func forwardedValue(e, name string) (string, error) {
	for i := 0; i < len(e); {
		for i < len(e) && (e[i] == ';' || e[i] == ' ' || e[i] == '\t') {
			i++
		}
		ns := i
		for i < len(e) && e[i] != '=' {
			i++
		}
		if i == len(e) {
			break
		}
		key := e[ns:i]
		i++ // "="
		vs := i
		if i < len(e) && e[i] == '"' {
			for i++; i < len(e) && e[i] != '"'; i++ {
				if e[i] == '\\' {
					i++
				}
			}
			if i >= len(e) {
				return e, ErrOriginMalformed // an open quote
			}
			i++ // the closing quote
		} else {
			for i < len(e) && isTchar(e[i]) {
				i++
			}
		}
		if !equalFold(key, name) {
			continue
		}
		v := e[vs:i]
		if len(v) >= 2 && v[0] == '"' {
			v = v[1 : len(v)-1]
			if strings.IndexByte(v, '\\') >= 0 {
				return v, ErrOriginMalformed
			}
		}
		return v, nil
	}
	return "", ErrOriginMissing
}

var originCtxKey = &ctxKey{"clientip.Origin"}

// NewOriginContext returns a copy of ctx that carries o. It allocates once.
func NewOriginContext(ctx context.Context, o Origin) context.Context {
	return &carrier[Origin]{ctx, originCtxKey, o}
}

// OriginFromContext returns the Origin stored in ctx by [NewOriginContext],
// if any. It does not allocate.
func OriginFromContext(ctx context.Context) (Origin, bool) {
	return fromCarrier[Origin](ctx, originCtxKey)
}
