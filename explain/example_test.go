package explain_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/explain"
)

// An explain endpoint for operators on the admin network 192.0.2.0/24, who
// connect to the server directly. Here one of them asks, as curl does,
// about a request that carries a forged X-Forwarded-For.
func ExampleNew() {
	resolver := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	h, err := explain.New(explain.Config{
		Trust:      resolver,
		AllowPeers: clientip.MustParsePrefixSet("192.0.2.0/24"),
	})
	if err != nil {
		panic(err)
	}

	req := httptest.NewRequest("GET", "/debug/clientip", nil)
	req.RemoteAddr = "192.0.2.5:50000"
	req.Header.Set("Accept", "*/*")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	for line := range strings.Lines(w.Body.String()) {
		if strings.HasPrefix(line, "answer:") || strings.HasPrefix(line, "  0 ") || strings.HasPrefix(line, "  1 ") {
			fmt.Print(line)
		}
	}

	// Anyone else finds nothing there.
	req.RemoteAddr = "203.0.113.7:50000"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	fmt.Println(w.Code)
	// Output:
	// answer:  192.0.2.5 from socket (peer 192.0.2.5:50000)
	//   0    socket           -            192.0.2.5:50000  client   not in TrustedProxies: the client; nothing it sent is read
	//   1    X-Forwarded-For  203.0.113.7  203.0.113.7      unread   delivered by the client: not read, not believed (it may be forged)
	// 404
}

// An Advisor watches an application behind two nginx proxies that append
// X-Forwarded-For, while the configuration in force trusts nothing, and
// proposes the configuration that fits.
func ExampleAdvisor() {
	a, err := explain.NewAdvisor(explain.AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})})
	if err != nil {
		panic(err)
	}
	for i := range 400 {
		proxy := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i%2)}), 40000)
		client := netip.AddrFrom4([4]byte{203, 0, 113, byte(i % 200)})
		a.Observe(clientip.Transport{Peer: proxy}, http.Header{"X-Forwarded-For": {client.String()}})
	}
	adv := a.Advice()
	fmt.Print(adv.Go)
	for _, f := range adv.Findings {
		if f.Peer.IsValid() {
			fmt.Println(f.Severity, f.Kind, f.Peer)
		} else {
			fmt.Println(f.Severity, f.Kind)
		}
	}
	// Output:
	// cfg := clientip.Config{
	// 	TrustedProxies: clientip.MustParsePrefixSet("10.0.0.1/32,10.0.0.2/32"),
	// 	Header:         "X-Forwarded-For",
	// }
	// info proxy 10.0.0.1
	// info proxy 10.0.0.2
	// info header
}
