package proxyproto_test

import (
	"fmt"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// The PROXY v2 header a relay sends its backend for a client it verified,
// and its refusal to speak for a client it could not.
func ExampleForwardHeader() {
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8")})
	dst := netip.MustParseAddrPort("192.0.2.10:8883")

	res, _ := r.Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4000"), Proxy: netip.MustParseAddrPort("198.51.100.7:5555")}, nil)
	h, err := proxyproto.ForwardHeader(res, dst)
	fmt.Println(h.Source, "->", h.Destination, err)

	res, _ = r.Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4000")}, nil) // every hop trusted
	_, err = proxyproto.ForwardHeader(res, dst)
	fmt.Println(err)
	// Output:
	// 198.51.100.7:5555 -> 192.0.2.10:8883 <nil>
	// proxyproto: header cannot be encoded: no verified client
}
