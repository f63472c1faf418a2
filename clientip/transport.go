package clientip

import "net/netip"

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
