package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/ratelimit"
)

func ExampleLimiter_AllowAt() {
	limiter, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1, Burst: 2}})
	if err != nil {
		panic(err)
	}
	// Both addresses of one IPv6 /64 share a key.
	a, _ := ratelimit.KeyFor(clientip.Keyer{}, netip.MustParseAddr("2001:db8:1:2::10"))
	b, _ := ratelimit.KeyFor(clientip.Keyer{}, netip.MustParseAddr("2001:db8:1:2::20"))
	now := time.Unix(0, 0)
	fmt.Println(a, limiter.AllowAt(a, now), limiter.AllowAt(b, now), limiter.AllowAt(a, now))
	fmt.Println("a second later:", limiter.AllowAt(b, now.Add(time.Second)))
	// Output:
	// 2001:db8:1:2::/64 true true false
	// a second later: true
}

func ExampleLimiter_ReserveAt() {
	limiter, _ := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 10, Burst: 1}})
	key := ratelimit.Key{Prefix: netip.MustParsePrefix("192.0.2.7/32"), Identity: "sensor-42"}
	now := time.Unix(0, 0)
	for range 3 {
		// Slow a publisher down instead of refusing it: wait up to 150ms.
		d := limiter.ReserveAt(key, now, 150*time.Millisecond)
		fmt.Println(d.Allowed, d.Delay)
	}
	// Output:
	// true 0s
	// true 100ms
	// false 0s
}

func ExampleHTTP() {
	trust, _ := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), // your proxies
		Header:         "X-Forwarded-For",
	})
	store, _ := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1, Burst: 2}})
	limiter, err := ratelimit.NewHTTP(ratelimit.HTTPConfig{Trust: trust, Store: store, Name: "per-client"})
	if err != nil {
		panic(err)
	}
	handler := limiter.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:4711"                          // the proxy
		r.Header.Set("X-Forwarded-For", "1.1.1.1, 203.0.113.7") // the leftmost entry is forged
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	fmt.Println(store.Len(), "bucket")
	// Output:
	// 200 RateLimit: "per-client";a=1;w=1 Retry-After: ""
	// 200 RateLimit: "per-client";a=0;w=1 Retry-After: ""
	// 429 RateLimit: "per-client";a=0;w=1 Retry-After: "1"
	// 1 bucket
}
