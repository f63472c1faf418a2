package clientip

import (
	"context"
	"net/netip"
)

// Transport is what one connection tells about its origin, before any header
// is read: the socket peer and, when a trusted upstream sent a PROXY protocol
// header, the source address it carried. Protocols without headers (MQTT, raw
// TCP) resolve from a Transport alone.
type Transport struct {
	// Peer is the socket peer as the kernel reports it, for example
	// [net.TCPAddr.AddrPort] of the connection's remote address. The zero
	// value means the peer has no IP address: a Unix-domain socket.
	Peer netip.AddrPort

	// Proxy is the source address of a PROXY protocol header accepted from
	// Peer, or the zero value when there was none (or it was a LOCAL command).
	// The proxyproto package fills it; code that parses PROXY headers itself
	// must only set it for headers from upstreams it trusts.
	Proxy netip.AddrPort
}

// transportKey is the context key for a Transport.
type transportKey struct{}

func (*transportKey) String() string { return "clientip.Transport" }

var transportCtxKey = &transportKey{}

// transportCtx carries a Transport in one allocation, like resultCtx.
type transportCtx struct {
	context.Context
	t Transport
}

func (c *transportCtx) Value(key any) any {
	if key == transportCtxKey {
		return &c.t
	}
	return c.Context.Value(key)
}

func (c *transportCtx) String() string {
	return contextName(c.Context) + ".WithValue(clientip.Transport)"
}

// NewTransportContext returns a copy of ctx that carries t, for connection
// wrappers that hand a connection's layers to per-request code (see
// [Resolver.ResolveRequest]). It allocates once.
func NewTransportContext(ctx context.Context, t Transport) context.Context {
	return &transportCtx{ctx, t}
}

// TransportFromContext returns the Transport stored in ctx by
// [NewTransportContext], if any. It does not allocate.
func TransportFromContext(ctx context.Context) (Transport, bool) {
	p, ok := ctx.Value(transportCtxKey).(*Transport)
	if !ok {
		return Transport{}, false
	}
	return *p, true
}
