package clientip_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	"github.com/sourceip/sourceip/clientip"
)

// A reverse proxy behind a load balancer in 10.0.0.0/8 that appends
// X-Forwarded-For passes on only the chain it verified.
func ExampleForwarder() {
	fw, err := clientip.NewForwarder(clientip.ForwardConfig{
		Trust: clientip.MustNew(clientip.Config{
			TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
			Header:         "X-Forwarded-For",
		}),
		XForwardedFor: true,
		Forwarded:     true,
	})
	if err != nil {
		panic(err)
	}
	backend, _ := url.Parse("http://backend.internal:8080")
	_ = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(backend)
		fw.Rewrite(pr)
	}}

	// What Rewrite does to a request whose client forged a chain.
	in := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	in.RemoteAddr = "10.0.0.1:40000"
	in.Header.Set("X-Forwarded-For", "127.0.0.1, 198.51.100.7")
	in.Header.Set("X-Real-IP", "127.0.0.1")
	in.Header.Set("X_Forwarded_Host", "evil.example")
	out := in.Header.Clone()
	res, err := fw.Header(out, in)
	fmt.Println(res.Client, err)
	fmt.Println("X-Forwarded-For:", out.Get("X-Forwarded-For"))
	fmt.Println("Forwarded:", out.Get("Forwarded"))
	fmt.Println("others:", len(out)-2)
	// Output:
	// 198.51.100.7 <nil>
	// X-Forwarded-For: 198.51.100.7, 10.0.0.1
	// Forwarded: for=198.51.100.7, for=10.0.0.1
	// others: 0
}
