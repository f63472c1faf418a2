package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// Behind nginx in 10.0.0.0/8 that terminates TLS and sets X-Forwarded-Proto
// and X-Forwarded-Host, the application builds redirects and sets Secure
// cookies from the origin the client used, and a client that reaches the
// application directly cannot choose it.
func ExampleNewOrigin() {
	resolve, err := middleware.New(middleware.Config{Trust: clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})})
	if err != nil {
		panic(err)
	}
	origin, err := middleware.NewOrigin(middleware.OriginConfig{
		Reader: clientip.MustNewOriginReader(clientip.OriginConfig{
			Proto:        "X-Forwarded-Proto",
			Host:         "X-Forwarded-Host",
			AllowedHosts: []string{"example.com"},
		}),
		Apply: true, // r.URL.Scheme, r.URL.Host and r.Host become the origin's
	})
	if err != nil {
		panic(err)
	}
	app := resolve(origin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, _ := clientip.OriginFromContext(r.Context())
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cr3t", Secure: o.Secure(), HttpOnly: true})
		http.Redirect(w, r, r.URL.Scheme+"://"+r.Host+"/home", http.StatusFound)
	})))

	for _, req := range []struct{ remote, proto, host string }{
		{"10.0.0.1:4000", "https", "example.com"},     // through nginx
		{"203.0.113.9:5000", "https", "evil.example"}, // direct, forged
	} {
		r := httptest.NewRequest(http.MethodGet, "/login", nil)
		r.RemoteAddr, r.Host = req.remote, "example.com"
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		r.Header.Set("X-Forwarded-Proto", req.proto)
		r.Header.Set("X-Forwarded-Host", req.host)
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Location"), w.Header().Get("Set-Cookie"))
	}
	// Output:
	// 302 https://example.com/home session=s3cr3t; HttpOnly; Secure
	// 302 http://example.com/home session=s3cr3t; HttpOnly
}
