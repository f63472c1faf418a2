package ranges_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// A refresher keeps a CDN's ranges current in the trust every layer reads:
// one line of wiring (OnUpdate: store.SetRangesFunc("cdn")), and the CDN's
// ranges live beside an ingress configured by hand. Here a local HTTPS
// server stands in for the CDN's published list.
func Example_store() {
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("198.51.100.0/24\n"))
	}))
	defer provider.Close()

	store, err := clientip.NewStore(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24"), // the ingress
		Header:         "X-Forwarded-For",
	}, clientip.StoreOptions{})
	if err != nil {
		panic(err)
	}
	src, err := ranges.NewSource(ranges.SourceConfig{
		Provider:  ranges.ProviderCIDRList,
		Locations: []string{provider.URL + "/cdn.txt"},
	})
	if err != nil {
		panic(err)
	}
	r, err := ranges.NewRefresher(ranges.RefresherConfig{
		Source:   src,
		Client:   provider.Client(),
		Clock:    func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
		OnUpdate: store.SetRangesFunc("cdn"),
	})
	if err != nil {
		panic(err)
	}
	// In a service: go r.Run(ctx). Here, one refresh.

	fromCDN := clientip.Transport{Peer: netip.MustParseAddrPort("198.51.100.7:443")}
	h := http.Header{"X-Forwarded-For": {"203.0.113.9"}}
	res, _ := store.Resolver().Resolve(fromCDN, h)
	fmt.Println("before:", res.Client, "from", res.Source)

	if err := r.Refresh(context.Background()); err != nil {
		panic(err)
	}
	res, _ = store.Resolver().Resolve(fromCDN, h)
	fmt.Println("after:", res.Client, "from", res.Source)
	fmt.Println("trusted:", store.Resolver().Config().TrustedProxies)
	// Output:
	// before: 198.51.100.7 from socket
	// after: 203.0.113.9 from x-forwarded-for
	// trusted: 10.0.0.0/24,198.51.100.0/24
}
