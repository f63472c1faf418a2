package clientip

import (
	"errors"
	"strconv"
	"strings"
)

// Errors reported by [Resolver.Resolve], wrapped in a [*ChainError] that says
// which hop and which header failed. Test for them with [errors.Is].
var (
	// ErrNoAddress means the socket peer has no IP address (a Unix-domain
	// socket) and Config.TrustUnixSocket is false, so nothing can be believed.
	ErrNoAddress = errors.New("clientip: socket peer has no IP address")

	// ErrMalformed means a hop that the walk had to read is not a plain IP
	// address: a host name, a CIDR prefix, a zone, leading zeros, garbage, or a
	// Forwarded element that breaks RFC 7239's syntax or repeats a parameter.
	ErrMalformed = errors.New("clientip: malformed address")

	// ErrUnknownHop means the walk reached an RFC 7239 node whose address cannot
	// be known: "unknown", an obfuscated identifier such as "_hidden", or an
	// element without a for= parameter.
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
	// as a client identity. It is also returned instead of ErrAllTrusted when the
	// outermost trusted hop is a masquerading node: a node trusted to deliver
	// PROXY headers that delivered a connection without one.
	ErrMasqueraded = errors.New("clientip: address is a masquerading node")

	// ErrInvalidPrefix is wrapped by errors from [ParsePrefixSet] and [NewPrefixSet].
	ErrInvalidPrefix = errors.New("clientip: invalid prefix")

	// ErrInvalidConfig is wrapped by errors from [New].
	ErrInvalidConfig = errors.New("clientip: invalid configuration")
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
	// attacker-controlled and is truncated in Error.
	Value string
	// Err is the sentinel.
	Err error
}

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
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		b.WriteString(": ")
		b.WriteString(strconv.Quote(v))
	}
	b.WriteByte(')')
	return b.String()
}

func (e *ChainError) Unwrap() error { return e.Err }

// failure is the hot path's error code; the error value is built once, by Resolve.
type failure uint8

const (
	ok failure = iota
	failNoAddress
	failMalformed
	failUnknown
	failUnspecified
	failAllTrusted
	failTooFew
	failTooMany
	failTooLarge
	failMultiple
	failMasqueraded
)

var failureErrors = [...]error{
	failNoAddress:   ErrNoAddress,
	failMalformed:   ErrMalformed,
	failUnknown:     ErrUnknownHop,
	failUnspecified: ErrUnspecified,
	failAllTrusted:  ErrAllTrusted,
	failTooFew:      ErrTooFewHops,
	failTooMany:     ErrTooManyHops,
	failTooLarge:    ErrHeaderTooLarge,
	failMultiple:    ErrMultipleValues,
	failMasqueraded: ErrMasqueraded,
}
