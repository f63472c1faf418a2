package clientip_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sourceip/sourceip/clientip"
)

// Behind nginx in 10.0.0.0/8, configured with
//
//	proxy_set_header X-Forwarded-For   $proxy_add_x_forwarded_for;
//	proxy_set_header X-Forwarded-Proto $scheme;
//	proxy_set_header X-Forwarded-Host  $host;
//
// the origin comes from the headers nginx set, and only for requests nginx
// delivered.
func ExampleOriginReader() {
	resolver := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	origins, err := clientip.NewOriginReader(clientip.OriginConfig{
		Proto:        "X-Forwarded-Proto",
		Host:         "X-Forwarded-Host",
		AllowedHosts: []string{"example.com", "*.example.com"},
	})
	if err != nil {
		panic(err)
	}
	read := func(remoteAddr string, header ...string) {
		req := httptest.NewRequest(http.MethodGet, "http://backend:8080/login", nil)
		req.RemoteAddr = remoteAddr
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		res, err := resolver.ResolveRequest(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		o, err := origins.ReadRequest(req, res)
		if err != nil {
			fmt.Println(res.Client, err)
			return
		}
		fmt.Println(res.Client, o, "secure:", o.Secure())
	}

	// Through nginx: the scheme and host the client used.
	read("10.0.0.1:40000", "X-Forwarded-For", "203.0.113.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "www.example.com")
	// A direct client forging the headers gets its own request's origin.
	read("203.0.113.9:5555", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example")
	// A host the service does not answer to.
	read("10.0.0.1:40000", "X-Forwarded-For", "203.0.113.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example")
	// Output:
	// 203.0.113.7 https://www.example.com secure: true
	// 203.0.113.9 clientip: host not allowed (hop 0 in Host: "backend")
	// 203.0.113.7 clientip: host not allowed (hop 1 in X-Forwarded-Host: "evil.example")
}

// An origin check for state-changing requests: the browser's Origin header
// must name the origin the client used to reach the service.
func ExampleParseOrigin() {
	site := clientip.Origin{Scheme: "https", Host: "example.com"} // from OriginReader.ReadRequest
	for _, h := range []string{"https://example.com", "https://EXAMPLE.com:443", "https://evil.example", "http://example.com", "null"} {
		o, err := clientip.ParseOrigin(h)
		fmt.Printf("%-24s same origin: %v (err: %v)\n", h, err == nil && site.SameOrigin(o), err != nil)
	}
	// Output:
	// https://example.com      same origin: true (err: false)
	// https://EXAMPLE.com:443  same origin: true (err: false)
	// https://evil.example     same origin: false (err: false)
	// http://example.com       same origin: false (err: false)
	// null                     same origin: false (err: true)
}
