package clientip

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sourceip/sourceip/internal/enumtext"
)

// Errors reported by [Resolver.Resolve] and [OriginReader.Read], wrapped in
// a [*ChainError] that says which hop and which header failed. Test for them
// with [errors.Is].
var (
	// ErrNoAddress means the socket peer has no IP address (a Unix-domain
	// socket) and Config.TrustUnixSocket is false, so nothing can be believed.
	ErrNoAddress = errors.New("clientip: socket peer has no IP address")

	// ErrMalformed means a hop that the walk had to read is not a plain IP
	// address: a host name, a CIDR prefix, a zone other than a link-local
	// address's in X-Forwarded-For or a single-address header (1 to 15
	// unreserved characters), leading zeros, garbage, an
	// empty single-address header, or a Forwarded element that breaks RFC
	// 7239's syntax, repeats a parameter or has more than 16 parameters (a
	// deliberate bound; see the package documentation).
	ErrMalformed = errors.New("clientip: malformed address")

	// ErrUnknownHop means the walk reached an RFC 7239 node whose address cannot
	// be known: "unknown", an obfuscated identifier such as "_hidden" (of any
	// length), or an element without a for= parameter.
	ErrUnknownHop = errors.New("clientip: hop address is unknown")

	// ErrUnspecified means the walk reached 0.0.0.0 or ::, which is never a client.
	ErrUnspecified = errors.New("clientip: unspecified address is not a client")

	// ErrAllTrusted means every hop of the chain is a trusted proxy, so no
	// client can be named. The [Result] still carries the outermost trusted hop
	// in Via for callers that deliberately accept internal origins.
	ErrAllTrusted = errors.New("clientip: every hop is trusted")

	// ErrTooFewHops means the chain is shorter than Config.TrustedHops + 1.
	ErrTooFewHops = errors.New("clientip: fewer hops than trusted proxies")

	// ErrTooManyHops means the walk would step over more than Config.MaxHops hops.
	ErrTooManyHops = errors.New("clientip: too many hops")

	// ErrHeaderTooLarge means the configured header is longer than
	// Config.MaxHeaderBytes.
	ErrHeaderTooLarge = errors.New("clientip: header too large")

	// ErrMultipleValues means a single-IP header (such as X-Real-IP) arrived
	// more than once or carried a list; a trusted edge that sets such a header
	// writes exactly one address.
	ErrMultipleValues = errors.New("clientip: single-address header has several values")

	// ErrMasqueraded means the resolved address is in Config.Masquerade: a node
	// address that stands in for clients under externalTrafficPolicy: Cluster.
	// The [Result] names the address and has Masqueraded set; it must not be used
	// as a client identity. It is also returned instead of ErrAllTrusted or
	// ErrTooFewHops when the outermost hop the walk stepped over is a
	// masquerading node: a node trusted to deliver PROXY headers that
	// delivered a connection without one. Unlike the other errors it is
	// returned bare, not in a [*ChainError].
	ErrMasqueraded = errors.New("clientip: address is a masquerading node")

	// ErrNoTrust means [FromRequest] found neither a stored Result nor a
	// Trust in the request's context: the server's ConnContext does not
	// attach one (see [NewConnContext]). The request is refused rather than
	// resolved under a guess. Unlike the errors above it is not a
	// resolution failure of a chain but of the server's wiring, and has no
	// [Reason].
	ErrNoTrust = errors.New("clientip: the request's connection carries no trust (set http.Server.ConnContext)")

	// ErrOriginMalformed means an origin value is outside the syntax
	// [OriginReader] accepts: a scheme other than http or https, a host that
	// is not a DNS-style name, an IPv4 address or a bracketed IPv6 address,
	// a port outside 1..65535, a path prefix that is not a clean absolute
	// path, a quoted-pair in a Forwarded value, or a header longer than
	// DefaultMaxHeaderBytes.
	ErrOriginMalformed = errors.New("clientip: malformed origin")

	// ErrOriginAmbiguous means the origin headers cannot be tied to the hop
	// that reported the client: a list with more than one entry but fewer
	// than the hops the walk stepped over to the client, more than one path
	// prefix, or a port header that disagrees with the port in the host.
	ErrOriginAmbiguous = errors.New("clientip: origin cannot be tied to the hop that reported the client")

	// ErrOriginMissing means no origin can be read: a proxied request lacks
	// a scheme or host header the [OriginConfig] names, its client was not
	// named by a Forwarded element whose parameter the configuration names,
	// a request has no Host, or the client was not resolved.
	ErrOriginMissing = errors.New("clientip: origin missing")

	// ErrHostNotAllowed means the origin's host is valid but not in
	// [OriginConfig].AllowedHosts.
	ErrHostNotAllowed = errors.New("clientip: host not allowed")

	// ErrInvalidPrefix is wrapped by errors from [ParsePrefixSet] and [NewPrefixSet].
	ErrInvalidPrefix = errors.New("clientip: invalid prefix")

	// ErrInvalidConfig is wrapped by errors from [New] and the package's other
	// constructors.
	ErrInvalidConfig = errors.New("clientip: invalid configuration")
)

// Errors that wrap ErrNoTrust, built once.
var (
	errNoTrustTransport = fmt.Errorf("%w: its context holds only a Transport, as proxyproto.ConnContext stores it; use a ConnContext that attaches the trust too", ErrNoTrust)
	errNilResolver      = fmt.Errorf("%w: the Trust returned a nil resolver", ErrNoTrust)
)

// ChainError reports where resolution failed. It wraps one of the sentinel
// errors of this package.
type ChainError struct {
	// Hop is the position in the chain counted from the socket peer (0) outward.
	Hop int
	// Header is the canonical name of the header being walked, or "" when the
	// failure is at the socket or PROXY layer.
	Header string
	// Value is the offending entry, as it appeared in the header; it may be
	// attacker-controlled and is truncated in Error. For an origin header
	// whose lines cannot be tied to one hop it is the lines joined with
	// ", ", cut to one byte more than Error quotes, so that an error keeps
	// no more of a hostile header than that.
	Value string
	// Err is the sentinel.
	Err error
}

// Error returns the sentinel's message followed by the hop, the header and
// the offending value, quoted and cut to 64 bytes:
// `clientip: malformed address (hop 1 in X-Forwarded-For: "nonsense")`.
func (e *ChainError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	b.WriteString(" (hop ")
	b.WriteString(strconv.Itoa(e.Hop))
	if e.Header != "" {
		b.WriteString(" in ")
		b.WriteString(e.Header)
	}
	if e.Value != "" {
		v := e.Value
		if len(v) > maxErrorValue {
			v = v[:maxErrorValue] + "…"
		}
		b.WriteString(": ")
		b.WriteString(strconv.Quote(v))
	}
	b.WriteByte(')')
	return b.String()
}

// Unwrap returns the sentinel, for [errors.Is].
func (e *ChainError) Unwrap() error { return e.Err }

// maxErrorValue is how many bytes of a ChainError's Value its Error quotes.
const maxErrorValue = 64

// joinForError returns lines joined with ", " as one header value, cut to
// maxErrorValue+1 bytes (Error then still marks the cut): the Value of an
// error about a list of lines, built without copying more of them.
func joinForError(lines []string) string {
	const n = maxErrorValue + 1
	b := make([]byte, 0, n+2)
	for i, l := range lines {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, l[:min(len(l), max(0, n-len(b)))]...)
		if len(b) >= n {
			return string(b[:n])
		}
	}
	return string(b)
}

// Reason is the kind of a resolution failure: one for each sentinel error
// that [Resolver.Resolve] reports, named in a small fixed set fit for log
// fields and metric attributes. It never holds an address or anything a
// client wrote. This is the package's one list of failure kinds: packages
// that classify errors read it with [ReasonOf] rather than testing each
// sentinel themselves.
//
// The zero Reason, ReasonNone, means no failure. Reasons added later are
// appended after ReasonMultipleValues.
type Reason uint8

const (
	// ReasonNone: no failure.
	ReasonNone Reason = iota
	// ReasonMasqueraded: [ErrMasqueraded].
	ReasonMasqueraded
	// ReasonNoAddress: [ErrNoAddress].
	ReasonNoAddress
	// ReasonMalformed: [ErrMalformed].
	ReasonMalformed
	// ReasonUnknownHop: [ErrUnknownHop].
	ReasonUnknownHop
	// ReasonUnspecified: [ErrUnspecified].
	ReasonUnspecified
	// ReasonAllTrusted: [ErrAllTrusted].
	ReasonAllTrusted
	// ReasonTooFewHops: [ErrTooFewHops].
	ReasonTooFewHops
	// ReasonTooManyHops: [ErrTooManyHops].
	ReasonTooManyHops
	// ReasonHeaderTooLarge: [ErrHeaderTooLarge].
	ReasonHeaderTooLarge
	// ReasonMultipleValues: [ErrMultipleValues].
	ReasonMultipleValues
)

var reasonNames = []string{
	ReasonNone:           "none",
	ReasonMasqueraded:    "masqueraded",
	ReasonNoAddress:      "no_address",
	ReasonMalformed:      "malformed",
	ReasonUnknownHop:     "unknown_hop",
	ReasonUnspecified:    "unspecified",
	ReasonAllTrusted:     "all_trusted",
	ReasonTooFewHops:     "too_few_hops",
	ReasonTooManyHops:    "too_many_hops",
	ReasonHeaderTooLarge: "header_too_large",
	ReasonMultipleValues: "multiple_values",
}

var reasonErrs = [...]error{
	ReasonMasqueraded:    ErrMasqueraded,
	ReasonNoAddress:      ErrNoAddress,
	ReasonMalformed:      ErrMalformed,
	ReasonUnknownHop:     ErrUnknownHop,
	ReasonUnspecified:    ErrUnspecified,
	ReasonAllTrusted:     ErrAllTrusted,
	ReasonTooFewHops:     ErrTooFewHops,
	ReasonTooManyHops:    ErrTooManyHops,
	ReasonHeaderTooLarge: ErrHeaderTooLarge,
	ReasonMultipleValues: ErrMultipleValues,
}

// ReasonOf returns the Reason of err, an error returned by
// [Resolver.Resolve] or one that wraps it: ReasonNone when err is nil or
// wraps none of the resolution sentinels (an [ErrInvalidConfig], say). When
// err wraps several, the first in the order of the constants wins, so a
// masqueraded result is never classified by another cause. It does not
// allocate.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	for r, e := range reasonErrs {
		if e != nil && errors.Is(err, e) {
			return Reason(r)
		}
	}
	return ReasonNone
}

// Err returns the sentinel error of r, or nil for ReasonNone and for a value
// without a name.
func (r Reason) Err() error {
	if int(r) < len(reasonErrs) {
		return reasonErrs[r]
	}
	return nil
}

// String returns the Reason's name: "none", "masqueraded", "no_address",
// "malformed", "unknown_hop", "unspecified", "all_trusted", "too_few_hops",
// "too_many_hops", "header_too_large" or "multiple_values".
func (r Reason) String() string { return enumtext.String(reasonNames, r, "Reason") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (r Reason) MarshalText() ([]byte, error) {
	return enumtext.Marshal(reasonNames, r, "Reason", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (r *Reason) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(r, reasonNames, text, "Reason", errUnknownName)
}

// errUnknownName is wrapped by UnmarshalText and MarshalText of this
// package's enums for a name or a value they do not know.
var errUnknownName = errors.New("clientip: unknown name")
