package proxyproto

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
)

// ForwardHeader returns the PROXY protocol v2 header that tells a TCP
// upstream about the client res verified, for a proxy that relays the
// connection: Source is the client, with the port of the layer that named
// it (the socket or a PROXY header; 0 for a client an HTTP header named,
// since header entries carry no port the walk believes), and Destination is
// dst, the address the client connected to. Zones are dropped. The header
// has no TLVs; add them to the result before writing it with [WriteHeader]
// or [DialContext].
//
// A res that names no client (its resolution failed) is an error wrapping
// [ErrInvalidHeaderValue]; a masquerading node (res.Masqueraded) is one
// wrapping ErrInvalidHeaderValue and [clientip.ErrMasqueraded], since a
// node address must not reach the upstream as a client; so is an invalid
// dst.
func ForwardHeader(res clientip.Result, dst netip.AddrPort) (Header, error) {
	switch {
	case res.Masqueraded:
		return Header{}, fmt.Errorf("%w: %w", ErrInvalidHeaderValue, clientip.ErrMasqueraded)
	case !res.IsValid():
		return Header{}, fmt.Errorf("%w: %w", ErrInvalidHeaderValue, errNoClient)
	case !dst.IsValid():
		return Header{}, fmt.Errorf("%w: no destination", ErrInvalidHeaderValue)
	}
	src := res.ClientAddrPort()
	return Header{
		Version:     2,
		Command:     CommandProxy,
		Source:      netip.AddrPortFrom(src.Addr().WithZone(""), src.Port()),
		Destination: netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port()),
	}, nil
}

// errNoClient is wrapped by ForwardHeader for a Result without a client.
var errNoClient = errors.New("no verified client")
