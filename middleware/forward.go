package middleware

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// DialForward dials the TCP upstream at address for c, a connection
// accepted through [NewListener], and writes a PROXY protocol v2 header
// naming the client c's resolution verified before returning the upstream
// connection ([proxyproto.ForwardHeader]): a relay's way of passing the
// verified client on to a backend that reads PROXY headers, as the
// Forwarder in clientip does for HTTP. The header's destination is the
// address the client connected to: the destination of the PROXY header
// that named the client, or else c's local address. d nil means a zero
// net.Dialer.
//
// A connection whose client was not resolved, or was masqueraded, is not
// dialled: the error wraps its resolution error (and [ErrNoResult] for a
// connection that did not come from NewListener), so nothing unverified
// reaches the upstream.
func DialForward(ctx context.Context, c net.Conn, d *net.Dialer, network, address string) (net.Conn, error) {
	res, err := ResultFromConn(c)
	if err != nil {
		return nil, fmt.Errorf("middleware: forward: %w", err)
	}
	var dst netip.AddrPort
	if f, ok := proxyproto.FactsFromConn(c); ok && res.Source == clientip.SourceProxyProtocol {
		dst = f.Destination
	} else if ta, ok := c.LocalAddr().(*net.TCPAddr); ok {
		dst = ta.AddrPort()
	}
	h, err := proxyproto.ForwardHeader(res, dst)
	if err != nil {
		return nil, fmt.Errorf("middleware: forward: %w", err)
	}
	return proxyproto.DialContext(ctx, d, network, address, h)
}
