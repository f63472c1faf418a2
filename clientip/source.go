package clientip

import "github.com/sourceip/sourceip/internal/enumtext"

// Source says which layer of the chain a resolved address came from.
type Source uint8

const (
	// SourceNone is the zero Source: nothing was resolved.
	SourceNone Source = iota
	// SourceSocket: the socket peer, as the kernel reports it.
	SourceSocket
	// SourceProxyProtocol: the source address of a PROXY protocol header sent by a trusted upstream.
	SourceProxyProtocol
	// SourceXForwardedFor: an entry of X-Forwarded-For written by a trusted proxy.
	SourceXForwardedFor
	// SourceForwarded: the for= node of an RFC 7239 Forwarded element written by a trusted proxy.
	SourceForwarded
	// SourceHeader: a single-address header such as X-Real-IP set by a trusted proxy.
	SourceHeader
)

var sourceNames = []string{
	SourceNone:          "none",
	SourceSocket:        "socket",
	SourceProxyProtocol: "proxy-protocol",
	SourceXForwardedFor: "x-forwarded-for",
	SourceForwarded:     "forwarded",
	SourceHeader:        "header",
}

// String returns the Source's name: "none", "socket", "proxy-protocol",
// "x-forwarded-for", "forwarded" or "header".
func (s Source) String() string { return enumtext.String(sourceNames, s, "Source") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (s Source) MarshalText() ([]byte, error) {
	return enumtext.Marshal(sourceNames, s, "Source", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (s *Source) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(s, sourceNames, text, "Source", errUnknownName)
}

// FromHeader reports whether the address came from an HTTP header.
func (s Source) FromHeader() bool {
	return s == SourceXForwardedFor || s == SourceForwarded || s == SourceHeader
}
