package middleware_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
)

// A net/http server behind reverse proxies in 10.0.0.0/8 that append
// X-Forwarded-For. Handlers read the client from the request context.
func Example() {
	resolver, err := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	if err != nil {
		log.Fatal(err)
	}
	resolve, err := middleware.New(middleware.Config{Trust: resolver})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		fmt.Fprintln(w, res.Client, "from", res.Source)
	})
	handler := resolve(mux) // http.ListenAndServe(addr, handler)

	for _, tc := range []struct{ peer, xff string }{
		{"10.0.0.2:40000", "6.6.6.6, 203.0.113.7"}, // through a proxy: its entry counts
		{"198.51.100.9:40000", "6.6.6.6"},          // direct: the header is ignored
		{"10.0.0.2:40000", "203.0.113.7, garbage"}, // unreadable: refused, not guessed
	} {
		r := httptest.NewRequest("GET", "/whoami", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	// Output:
	// 200 203.0.113.7 from x-forwarded-for
	// 200 198.51.100.9 from socket
	// 400 cannot determine the client address: malformed address in X-Forwarded-For
}

// Behind a PROXY-protocol load balancer: one trust configuration for the
// chain, handed to both layers; the listener reads the header from trusted
// balancers, and ConnContext hands it to the middleware.
func ExampleNew_proxyProtocol() {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24")})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: trust})
	if err != nil {
		log.Fatal(err)
	}
	resolve, err := middleware.New(middleware.Config{Trust: trust})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler: resolve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, _ := clientip.FromContext(r.Context())
			fmt.Fprintln(w, res) // e.g. 203.0.113.7 from proxy-protocol hop 1 via 10.0.0.5 (peer 10.0.0.5:41234, proxy 203.0.113.7:5555)
		})),
		ConnContext: proxyproto.ConnContext,
	}
	go srv.Serve(ln)
	srv.Close()
}

// Legacy code that reads r.RemoteAddr sees the client with SetRemoteAddr.
func ExampleConfig_setRemoteAddr() {
	resolve, err := middleware.New(middleware.Config{
		Trust: clientip.MustNew(clientip.Config{
			TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
			Header:         "X-Forwarded-For",
		}),
		SetRemoteAddr: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	legacy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("legacy handler sees", r.RemoteAddr)
	})
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:40000"
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	resolve(legacy).ServeHTTP(httptest.NewRecorder(), r)
	fmt.Println("caller's request keeps", r.RemoteAddr)
	// Output:
	// legacy handler sees 203.0.113.7:0
	// caller's request keeps 10.0.0.2:40000
}

// An allowlist of client ranges behind the resolve middleware, which stores
// the Result the policy then reads.
func ExampleNewSourceRanges() {
	resolve, _ := middleware.New(middleware.Config{
		Trust: clientip.MustNew(clientip.Config{
			TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
			Header:         "X-Forwarded-For",
			Masquerade:     clientip.MustParsePrefixSet("192.168.0.0/16"), // the nodes
		}),
	})
	office, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow: clientip.MustParsePrefixSet("198.51.100.0/24"),
	})
	if err != nil {
		log.Fatal(err)
	}
	admin := resolve(office.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome\n")
	})))
	for _, tc := range []struct{ peer, xff string }{
		{"10.0.0.2:40000", "198.51.100.7"},
		{"10.0.0.2:40000", "203.0.113.7"},
		{"192.168.1.10:40000", ""}, // a node that masqueraded the client
	} {
		r := httptest.NewRequest("GET", "/admin", nil)
		r.RemoteAddr = tc.peer
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body.String())
	}
	// Output:
	// 200 welcome
	// 403 forbidden: the client address is not in an allowed source range
	// 403 forbidden: the client address was masqueraded by a node and cannot be verified
}

// The pure check, for code that resolves without HTTP.
func ExamplePolicy_Check() {
	p, _ := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow: clientip.MustParsePrefixSet("198.51.100.0/24"),
	})
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.5")})
	for _, t := range []clientip.Transport{
		{Peer: netip.MustParseAddrPort("10.0.0.5:41234"), Proxy: netip.MustParseAddrPort("198.51.100.7:5555")},
		{Peer: netip.MustParseAddrPort("10.0.0.5:41234"), Proxy: netip.MustParseAddrPort("203.0.113.7:5555")},
		{Peer: netip.MustParseAddrPort("10.0.0.5:41234")}, // the balancer itself
	} {
		res, err := r.Resolve(t, nil)
		err = p.Check("", res, err)
		fmt.Println(middleware.OutcomeOf(err), err)
	}
	// Output:
	// resolved <nil>
	// not_allowed middleware: client address not in an allowed source range (rule source-ranges)
	// unresolved middleware: client address unresolved (rule source-ranges): clientip: every hop is trusted (hop 0)
}

// A raw TCP server behind a PROXY-protocol load balancer: each connection
// carries its resolution, read back with ResultFromConn and judged before the
// protocol starts.
func ExampleNewListener() {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}) // the load balancer
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: trust})
	if err != nil {
		log.Fatal(err)
	}
	ln := middleware.NewListener(pl, trust)
	defer ln.Close()
	policy, _ := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow: clientip.MustParsePrefixSet("198.51.100.0/24"),
	})

	// The load balancer's side.
	go func() {
		c, err := proxyproto.DialContext(context.Background(), nil, "tcp", ln.Addr().String(), proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy,
			Source:      netip.MustParseAddrPort("198.51.100.7:5555"),
			Destination: netip.MustParseAddrPort("192.0.2.10:1883"),
		})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "hello")
		io.Copy(io.Discard, c)
	}()

	c, err := ln.Accept()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := middleware.ResultFromConn(c)
	fmt.Println("client:", res.Client, "from", res.Source)
	fmt.Println("socket peer:", res.Peer.Addr())
	fmt.Println("policy:", middleware.OutcomeOf(policy.Check("", res, err)))
	// Output:
	// client: 198.51.100.7 from proxy-protocol
	// socket peer: 127.0.0.1
	// policy: resolved
}

// A connection whose client was resolved from something the listener never
// sees: the HTTP request a WebSocket was upgraded from, where a trusted
// ingress wrote X-Forwarded-For. The upgraded connection carries that
// resolution to the protocol server (an MQTT broker, say), which reads it
// back as it would for a connection from NewListener.
func ExampleWithResult() {
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24"), // the ingress
		Header:         "X-Forwarded-For",
	})
	// The upgrade request, as the ingress passed it on.
	req := httptest.NewRequest(http.MethodGet, "/mqtt", nil)
	req.RemoteAddr = "10.0.0.5:40000"
	req.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7") // a forged entry, then what the ingress appended
	res, err := trust.Resolver().ResolveRequest(req)

	// The upgraded connection (a pipe here) with its resolution.
	server, client := net.Pipe()
	defer client.Close()
	c := middleware.WithResult(server, res, err)
	defer c.Close()

	res, err = middleware.ResultFromConn(c)
	fmt.Println("client:", res.Client, "from", res.Source, "via", res.Via, "error:", err)
	// Output:
	// client: 203.0.113.7 from x-forwarded-for via 10.0.0.5 error: <nil>
}

// One log line per connection with every layer and the decision.
func ExampleLog() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // for a stable example
			}
			return a
		},
	}))
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24")})
	res, err := r.Resolve(clientip.Transport{
		Peer:  netip.MustParseAddrPort("10.0.0.5:41234"),
		Proxy: netip.MustParseAddrPort("203.0.113.7:5555"),
	}, nil)
	middleware.Log(context.Background(), logger, "mqtt connect", res, err, slog.String("client_id", "sensor-17"))
	// Output:
	// level=INFO msg="mqtt connect" decision=resolved clientip.client=203.0.113.7 clientip.source=proxy-protocol clientip.hop=1 clientip.via=10.0.0.5 clientip.peer=10.0.0.5:41234 clientip.proxy=203.0.113.7:5555 client_id=sensor-17
}
