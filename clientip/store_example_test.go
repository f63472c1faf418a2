package clientip_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"

	"github.com/sourceip/sourceip/clientip"
)

// A Store is the trust of a running service: every layer reads it, a swap
// changes all of them from the next connection or request on, a bad
// configuration is refused, and each change is logged as a diff.
func ExampleStore() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // steady output for the example
			}
			return a
		},
	}))
	store, err := clientip.NewStore(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24"), // the load balancers
	}, clientip.StoreOptions{Logger: log})
	if err != nil {
		panic(err)
	}
	// Hand store to every layer: proxyproto.Config{Trust: store},
	// middleware.Config{Trust: store}, middleware.NewListener(ln, store).

	peer := clientip.Transport{Peer: netip.MustParseAddrPort("10.0.1.5:40000"), Proxy: netip.MustParseAddrPort("203.0.113.7:5555")}
	res, _ := store.Resolver().Resolve(peer, nil)
	fmt.Println("before:", res.Client, "from", res.Source)

	// A new load balancer joins.
	store.Update(func(c *clientip.Config) {
		c.TrustedProxies = c.TrustedProxies.Union(clientip.MustParsePrefixSet("10.0.1.0/24"))
	})
	res, _ = store.Resolver().Resolve(peer, nil)
	fmt.Println("after:", res.Client, "from", res.Source)

	// A header with nothing trusted to deliver it is refused; the trust in
	// force stays.
	_, err = store.Swap(clientip.Config{Header: "X-Forwarded-For"})
	fmt.Println("refused:", err != nil, store.Resolver().Config().TrustedProxies)
	// Output:
	// before: 10.0.1.5 from socket
	// level=INFO msg="trust changed" change.trusted_proxies_added=10.0.1.0/24
	// after: 203.0.113.7 from proxy-protocol
	// level=WARN msg="trust change refused" change.trusted_proxies_removed=10.0.0.0/24,10.0.1.0/24 change.header="none → X-Forwarded-For" error="clientip: invalid configuration: Header \"X-Forwarded-For\" is set but no proxy is trusted to deliver it (set TrustedProxies, TrustedHops or TrustUnixSocket)"
	// refused: true 10.0.0.0/24,10.0.1.0/24
}

// Range sets kept current by refreshers compose with the static trust: each
// has a name, their union with Config.TrustedProxies is the trust in force,
// and each change names the set it came from. A clientip/ranges Refresher
// feeds one with OnUpdate: store.SetRangesFunc("cloudflare").
func ExampleStore_SetRanges() {
	store, err := clientip.NewStore(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24"), // the ingress, by hand
		Header:         "X-Forwarded-For",
	}, clientip.StoreOptions{})
	if err != nil {
		panic(err)
	}
	ch, _ := store.SetRanges("cloudflare", clientip.MustParsePrefixSet("173.245.48.0/20, 103.21.244.0/22"))
	fmt.Println(ch)
	ch, _ = store.SetRanges("cloudflare", clientip.MustParsePrefixSet("173.245.48.0/20, 103.22.200.0/22"))
	fmt.Println(ch)
	fmt.Println(store.Resolver().Config().TrustedProxies)
	fmt.Println(store.Config().TrustedProxies)
	// Output:
	// ranges=cloudflare trusted_proxies_added=103.21.244.0/22,173.245.48.0/20
	// ranges=cloudflare trusted_proxies_added=103.22.200.0/22 trusted_proxies_removed=103.21.244.0/22
	// 10.0.0.0/24,103.22.200.0/22,173.245.48.0/20
	// 10.0.0.0/24
}
