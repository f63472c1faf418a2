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
//   - for a grpc.Server served as an http.Handler (ServeHTTP), the Transport
//     a connection wrapper stored in the request's context
//     (proxyproto.ConnContext), if any;
//   - otherwise the peer's address: a TCP peer's address and port
//     (IPv4-mapped addresses unmapped), or no IP address for a Unix-domain
//     listener — whatever the peer's address reads like, since on a Unix
//     socket it is a path the client chose and may read "127.0.0.1:9".
//
// It fails with an error wrapping [clientip.ErrNoAddress] when ctx carries
// no peer, or a peer whose address is not an IP network's. It does not
// allocate.
func TransportFromContext(ctx context.Context) (clientip.Transport, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return clientip.Transport{}, errNoPeer
	}
	if a, ok := p.AuthInfo.(AuthInfo); ok && a.Proxied {
		return a.Facts.Transport(), nil
	}
	if t, ok := clientip.TransportFromContext(ctx); ok {
		return t, nil
	}
	if p.LocalAddr != nil && strings.HasPrefix(p.LocalAddr.Network(), "unix") {
		return clientip.Transport{}, nil
	}
	var ap netip.AddrPort
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case nil:
		return clientip.Transport{}, errNoPeer
	default:
		// A Unix-domain peer has no IP address. ServeHTTP reports the
		// request's RemoteAddr as text on network "tcp"; any other network
		// names no IP peer.
		switch n := a.Network(); {
		case strings.HasPrefix(n, "unix"):
			return clientip.Transport{}, nil
		case !strings.HasPrefix(n, "tcp"):
			return clientip.Transport{}, errNoPeer
		}
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return clientip.Transport{}, errNoPeer
		}
	}
	return clientip.Transport{Peer: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
}
