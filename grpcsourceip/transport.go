package grpcsourceip

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/peer"

	"github.com/sourceip/sourceip/clientip"
)

// errNoPeer is the error of an RPC whose context carries no peer, or a peer
// whose address is not an IP address and port on an IP network (an
// in-memory listener's, say): nothing can be believed about it. Built
// once; it carries nothing a client wrote.
var errNoPeer = &clientip.ChainError{Err: clientip.ErrNoAddress}

// TransportFromContext returns the layers of the connection an RPC came on,
// which is what clientip resolves before it reads any metadata:
//
//   - through [Credentials] from a proxyproto.Listener, the listener's facts:
//     the load balancer as the socket peer and the PROXY source;
//   - otherwise, under grpc.Server.Serve, the connection's peer: a TCP
//     peer's address and port (IPv4-mapped addresses unmapped), or no IP
//     address for a Unix-domain peer;
//   - for a grpc.Server served as an http.Handler (ServeHTTP), which
//     reports the request's RemoteAddr as text, the Transport a connection
//     wrapper stored in the request's context (proxyproto.ConnContext) if
//     there is one, no IP address on a Unix-domain listener — whatever
//     RemoteAddr reads like, since on a Unix socket it is a path the client
//     chose and may read "127.0.0.1:9" — and otherwise the address and port
//     RemoteAddr holds.
//
// It fails with an error wrapping [clientip.ErrNoAddress] when ctx carries
// no peer, or a peer whose address is not an IP network's (an in-memory
// listener's). It does not allocate.
func TransportFromContext(ctx context.Context) (clientip.Transport, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return clientip.Transport{}, errNoPeer
	}
	if a, ok := p.AuthInfo.(AuthInfo); ok && a.Proxied {
		return a.Facts.Transport(), nil
	}
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		return peerTransport(a.AddrPort()), nil
	case *net.UnixAddr:
		return clientip.Transport{}, nil
	case nil:
		return clientip.Transport{}, errNoPeer
	}
	// ServeHTTP, or a listener with an address type of its own.
	if t, ok := clientip.TransportFromContext(ctx); ok {
		return t, nil
	}
	if p.LocalAddr != nil && strings.HasPrefix(p.LocalAddr.Network(), "unix") {
		return clientip.Transport{}, nil
	}
	switch n := p.Addr.Network(); {
	case strings.HasPrefix(n, "unix"):
		return clientip.Transport{}, nil
	case !strings.HasPrefix(n, "tcp"):
		return clientip.Transport{}, errNoPeer
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return clientip.Transport{}, errNoPeer
	}
	return peerTransport(ap), nil
}

// peerTransport is the Transport of a socket peer at ap, unmapped.
func peerTransport(ap netip.AddrPort) clientip.Transport {
	return clientip.Transport{Peer: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
}
