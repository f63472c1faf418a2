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

	// PeerUntrusted reports that the layer that accepted the connection
	// judged Peer not to be a trusted proxy: the trust in force when the
	// connection arrived did not trust it, or it sent a PROXY header that was
	// discarded, so the bytes after the header are someone else's. The walk
	// then takes Peer for the client whatever the resolver in force now
	// says, so that a trust change made while a connection is open never
	// turns what its client wrote into a trusted proxy's report. The proxyproto
	// package sets it; false makes no claim.
	PeerUntrusted bool

	// ProxyLocal reports that Peer sent a PROXY header that names no client:
	// a v2 LOCAL command (the upstream's own connection, a health check) or
	// v1 "PROXY UNKNOWN" (its own, or one it relayed from a client whose
	// address it could not express). Nothing on such a connection was
	// vouched for by a hop beyond Peer, and a layer 4 upstream writes no
	// forwarding header, so a walk that trusts Peer ends there as for a
	// request without a forwarding header ([ErrAllTrusted] with Result.Via
	// Peer, which middleware's Rule.AdmitInternal can admit, as health checks
	// need) rather than read a header its client wrote. The proxyproto
	// package sets it, also for a connection without a header from an
	// upstream listed as a PROXY load balancer (proxyproto's
	// Config.Upstreams under HeaderlessAllow: its bytes are relayed as they
	// came); false makes no claim.
	ProxyLocal bool
}
