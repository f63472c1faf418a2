package proxyproto

// HeaderlessPolicy says what a [Listener] does with a connection from a
// trusted upstream that does not start with a PROXY protocol header.
//
// The zero value is [HeaderlessRefuse]: the PROXY protocol specification
// (section 2) says a receiver "MUST not try to guess whether the protocol
// header is present", so a listener that expects headers from an upstream
// refuses that upstream's connections without one.
type HeaderlessPolicy uint8

const (
	// HeaderlessRefuse closes a trusted upstream's connection that has no
	// header and reports it with [ErrNoHeader]. This is the default.
	HeaderlessRefuse HeaderlessPolicy = iota

	// HeaderlessAllow serves a trusted upstream's connection without a
	// header with its socket addresses, as if the upstream were the client.
	// It is for load balancers whose health checks send no header. The
	// connection's [Facts] then have Version 0, so the upstream itself is the
	// socket peer clientip sees, and clientip reports it as a trusted hop with
	// no client (ErrAllTrusted) rather than passing the load balancer off as
	// a client. That holds for an HTTP request on the connection only when
	// the upstream is listed in Config.Upstreams ([Facts].NoHeaderFromUpstream);
	// otherwise the walk steps over the upstream into the request's forwarding
	// header, as it would for a proxy that writes one (see the package
	// documentation).
	HeaderlessAllow
)

var headerlessNames = []string{"refuse", "allow"}

// String returns "refuse" or "allow".
func (p HeaderlessPolicy) String() string {
	return enumString(p, headerlessNames, "HeaderlessPolicy")
}

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (p HeaderlessPolicy) MarshalText() ([]byte, error) {
	return enumMarshal(p, headerlessNames, "HeaderlessPolicy")
}

// UnmarshalText implements [encoding.TextUnmarshaler] for "refuse" and "allow".
func (p *HeaderlessPolicy) UnmarshalText(text []byte) error {
	return enumUnmarshal(p, text, headerlessNames, "HeaderlessPolicy")
}

// UntrustedPolicy says what a [Listener] does with a PROXY protocol header
// sent by a peer that is not a trusted upstream (see Config.Trust). Under
// every policy the header is never believed: such a connection's [Facts]
// never carry its addresses or TLVs.
//
// The zero value is [UntrustedClose]. A connection from an untrusted peer
// without a header is always served with its socket addresses: it is a
// direct client.
type UntrustedPolicy uint8

const (
	// UntrustedClose closes the connection as soon as the header's signature
	// is seen and reports it with [ErrUntrustedHeader]. This is the default:
	// a client that forges a header learns nothing and gets nothing.
	UntrustedClose UntrustedPolicy = iota

	// UntrustedIgnore reads the header to its end, validates it as it would
	// a trusted upstream's, discards it, and serves the connection with its
	// socket addresses. A header that is invalid, or incomplete by the
	// deadline, still closes the connection (ReasonInvalid, ReasonTimeout,
	// ReasonIncomplete). Use it where peers that send a header must be
	// served without being believed: with [HeaderlessAllow] it is the
	// listener's optional-header mode, described in the package
	// documentation.
	UntrustedIgnore
)

var untrustedNames = []string{"close", "ignore"}

// String returns "close" or "ignore".
func (p UntrustedPolicy) String() string {
	return enumString(p, untrustedNames, "UntrustedPolicy")
}

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (p UntrustedPolicy) MarshalText() ([]byte, error) {
	return enumMarshal(p, untrustedNames, "UntrustedPolicy")
}

// UnmarshalText implements [encoding.TextUnmarshaler] for "close" and "ignore".
func (p *UntrustedPolicy) UnmarshalText(text []byte) error {
	return enumUnmarshal(p, text, untrustedNames, "UntrustedPolicy")
}
