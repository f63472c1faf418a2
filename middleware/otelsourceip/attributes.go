package otelsourceip

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// Attribute keys of this package. Those marked "metrics" take a small fixed
// set of values and are the only ones put on metrics; the others may hold
// addresses and go on spans only.
const (
	// SourceKey is the layer the client came from, a [clientip.Source] name:
	// "socket", "proxy-protocol", "x-forwarded-for", "forwarded", "header",
	// or "none" when resolution failed. Spans and metrics.
	SourceKey = attribute.Key("sourceip.source")

	// OutcomeKey is the [middleware.Outcome] of a resolution: "resolved",
	// "masqueraded", "malformed", "all_trusted", and so on. Spans and metrics.
	OutcomeKey = attribute.Key("sourceip.outcome")

	// ReasonKey is why a request or connection was refused: for a policy
	// denial the [middleware.Outcome] of the policy's error ("not_allowed",
	// "unresolved", "masqueraded"); for a PROXY refusal the
	// [proxyproto.Reason] ("no_header", "untrusted_header", "timeout",
	// "incomplete", "invalid"); for a connection a PROXY listener shed the
	// [proxyproto.ShedReason] ("untrusted_budget", "source_budget"). Spans
	// and metrics.
	ReasonKey = attribute.Key("sourceip.reason")

	// ListenerKey is the name given to [Instrumentation.ObserveListener].
	// Metrics.
	ListenerKey = attribute.Key("sourceip.listener")

	// TrustedKey tells whether pending connections come from trusted
	// upstreams. Metrics.
	TrustedKey = attribute.Key("sourceip.trusted")

	// HopKey is the client's position in the chain, counted from the socket
	// peer (0); on failure, where the walk stopped. Spans.
	HopKey = attribute.Key("sourceip.hop")

	// HeaderKey is the forwarding header the client came from, or in which
	// resolution failed. Spans.
	HeaderKey = attribute.Key("sourceip.header")

	// ViaKey is the address of the trusted hop that reported the client. Spans.
	ViaKey = attribute.Key("sourceip.via")

	// ProxyAddressKey and ProxyPortKey are the source a PROXY protocol header
	// carried. Spans.
	ProxyAddressKey = attribute.Key("sourceip.proxy.address")
	ProxyPortKey    = attribute.Key("sourceip.proxy.port")

	// MasqueradedKey is true when the result is a masquerading node. Spans.
	MasqueradedKey = attribute.Key("sourceip.masqueraded")
)

// SpanAttributes returns the span attributes of a resolution: the resolved
// client as client.address (and client.port when its layer carries one), the
// socket peer (unmapped) as network.peer.address and network.peer.port, and this
// package's attributes for the source, outcome, hop, header, trusted hop,
// PROXY source and masquerade flag, leaving out what is empty.
//
// client.address names a client only: when resolution failed, and for a
// masqueraded result, whose address is a node standing in for a client who
// is lost (the layer attributes still show it), client.address is set to the
// empty string. The OpenTelemetry API cannot remove an attribute from a
// span, so this empty value is what overwrites one set earlier. Setting these
// attributes on a span that otelhttp started thus replaces the client.address
// it took from the leftmost X-Forwarded-For entry, a value the client wrote,
// on every path; see the package documentation.
func SpanAttributes(res clientip.Result, err error) []attribute.KeyValue {
	attrs := appendClient(make([]attribute.KeyValue, 0, 12), res)
	if res.Peer.IsValid() {
		attrs = append(attrs,
			semconv.NetworkPeerAddress(res.Peer.Addr().Unmap().String()),
			semconv.NetworkPeerPort(int(res.Peer.Port())))
	}
	attrs = append(attrs,
		SourceKey.String(res.Source.String()),
		OutcomeKey.String(middleware.OutcomeOf(err).String()),
		HopKey.Int(res.Hop))
	if res.Header != "" {
		attrs = append(attrs, HeaderKey.String(res.Header))
	}
	if res.Via.IsValid() {
		attrs = append(attrs, ViaKey.String(res.Via.String()))
	}
	if res.Proxy.IsValid() {
		attrs = append(attrs,
			ProxyAddressKey.String(res.Proxy.Addr().String()),
			ProxyPortKey.Int(int(res.Proxy.Port())))
	}
	if res.Masqueraded {
		attrs = append(attrs, MasqueradedKey.Bool(true))
	}
	return attrs
}

// appendClient appends client.address, and client.port when res's layer
// carries one, for the client res names: the empty client.address when it
// names none (a failure, or a masqueraded node), to overwrite the value
// otelhttp set.
func appendClient(attrs []attribute.KeyValue, res clientip.Result) []attribute.KeyValue {
	if !res.Client.IsValid() || res.Masqueraded {
		return append(attrs, semconv.ClientAddress(""))
	}
	attrs = append(attrs, semconv.ClientAddress(res.Client.String()))
	if p := res.ClientAddrPort().Port(); p != 0 {
		attrs = append(attrs, semconv.ClientPort(int(p)))
	}
	return attrs
}
