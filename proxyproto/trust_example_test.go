package proxyproto_test

import (
	"fmt"
	"log"
	"net"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// The chain trusts an ingress tier that writes X-Forwarded-For and a load
// balancer that speaks PROXY protocol; Upstreams narrows the PROXY listener
// to the load balancer. An upstream the chain does not trust is a
// configuration error, said when the listener is built.
func ExampleConfig_upstreams() {
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24, 10.0.1.0/24"), // load balancer, ingress
		Header:         "X-Forwarded-For",
	})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer inner.Close()

	_, err = proxyproto.NewListener(inner, proxyproto.Config{
		Trust:     trust,
		Upstreams: clientip.MustParsePrefixSet("10.0.0.0/24"),
	})
	fmt.Println(err)
	_, err = proxyproto.NewListener(inner, proxyproto.Config{
		Trust:     trust,
		Upstreams: clientip.MustParsePrefixSet("10.0.0.0/24, 192.0.2.0/24"),
	})
	fmt.Println(err)
	// Output:
	// <nil>
	// proxyproto: invalid config: Upstreams prefix 192.0.2.0/24 is not trusted by the Trust's resolver (not covered by its TrustedProxies)
}
