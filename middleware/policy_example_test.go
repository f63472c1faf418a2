package middleware_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// A server that resolves on demand: ConnContext attaches the trust and the
// socket peer once per connection, RequireClient refuses unresolvable
// chains, and handlers read the client with clientip.FromRequest. No request
// is copied.
func ExampleConnContext() {
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"), // the reverse proxy
		Header:         "X-Forwarded-For",
	})
	require, err := middleware.RequireClient(middleware.Config{})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromRequest(r)
		fmt.Fprintln(w, res.Client, "from", res.Source)
	})))
	srv.Config.ConnContext = middleware.ConnContext(trust)
	srv.Start()
	defer srv.Close()

	for _, xff := range []string{"203.0.113.7", "203.0.113.7, garbage"} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-Forwarded-For", xff) // as the proxy on 127.0.0.1 would write it
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 203.0.113.7 from x-forwarded-for
	// 400 cannot determine the client address: malformed address in X-Forwarded-For
}

// Rules per route, as the application's ServeMux routes: the most specific
// pattern decides, Deny before Allow within a rule, and the Default (whose
// zero value refuses everyone) takes what no rule matches. Here the policy
// resolves under its own Trust, from r.RemoteAddr; behind ConnContext it
// needs none.
func ExampleNewPolicy() {
	office := clientip.MustParsePrefixSet("198.51.100.0/24")
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetPatterns,
		Rules: []middleware.Rule{
			{Name: "admin", Target: "/admin/", Allow: office, Deny: clientip.MustParsePrefixSet("198.51.100.66/32")},
			{Name: "health", Target: "GET /healthz", Allow: clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")},
		},
		Default: middleware.Rule{Name: "site", Allow: clientip.MustParsePrefixSet("0.0.0.0/0, ::/0"), Deny: clientip.MustParsePrefixSet("203.0.113.0/24")},
		Trust:   clientip.MustNew(clientip.Config{}),
	})
	if err != nil {
		log.Fatal(err)
	}
	h := policy.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	for _, tc := range []struct{ peer, path string }{
		{"198.51.100.7:1", "/admin/users"},
		{"198.51.100.66:1", "/admin/users"},
		{"192.0.2.1:1", "/admin/users"},
		{"203.0.113.9:1", "/healthz"},
		{"203.0.113.9:1", "/index.html"},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		r.RemoteAddr = tc.peer
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Print(tc.peer, " ", tc.path, ": ", w.Code, " ", w.Body.String())
	}
	// Output:
	// 198.51.100.7:1 /admin/users: 200 ok
	// 198.51.100.66:1 /admin/users: 403 forbidden: the client address is in a denied source range
	// 192.0.2.1:1 /admin/users: 403 forbidden: the client address is not in an allowed source range
	// 203.0.113.9:1 /healthz: 200 ok
	// 203.0.113.9:1 /index.html: 403 forbidden: the client address is in a denied source range
}

// Rules per MQTT topic for a broker's ACL hook: the first filter that covers
// the topic decides, a subscription is judged by every rule whose topics it
// would receive, and every decision names its rule.
func ExamplePolicy_Decide() {
	fleet := clientip.MustParsePrefixSet("198.51.100.0/24")
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetTopics,
		Rules: []middleware.Rule{
			{Name: "firmware", Target: "devices/+/firmware", Allow: clientip.MustParsePrefixSet("198.51.100.0/28")},
			{Name: "telemetry", Target: "devices/+/telemetry/#", Allow: fleet},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// In the hook, res and err come from middleware.ResultFromConn.
	res := clientip.Result{Client: netip.MustParseAddr("198.51.100.77"), Source: clientip.SourceProxyProtocol}
	for _, topic := range []string{"devices/d1/telemetry/temp", "devices/d1/firmware", "devices/d1/telemetry/#", "devices/+/#", "$SYS/broker/load", "devices/#/x"} {
		d := policy.Decide(topic, res, nil)
		fmt.Printf("%s: rule %q, %v\n", topic, d.Rule, d.Outcome())
	}
	// Output:
	// devices/d1/telemetry/temp: rule "telemetry", resolved
	// devices/d1/firmware: rule "firmware", not_allowed
	// devices/d1/telemetry/#: rule "telemetry", resolved
	// devices/+/#: rule "firmware", not_allowed
	// $SYS/broker/load: rule "default", not_allowed
	// devices/#/x: rule "", not_allowed
}

// The allowlist for a raw TCP or MQTT listener, judged once per connection.
func ExampleNewSourceRanges_connection() {
	allow, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{Allow: clientip.MustParsePrefixSet("198.51.100.0/24")})
	if err != nil {
		log.Fatal(err)
	}
	check := func(c net.Conn) error {
		res, err := middleware.ResultFromConn(c)
		return allow.Check("", res, err)
	}
	_ = check // in the accept loop: if err := check(c); err != nil { c.Close() }
	fmt.Println(allow.Check("", clientip.Result{Client: netip.MustParseAddr("203.0.113.9")}, nil))
	// Output:
	// middleware: client address not in an allowed source range (rule source-ranges)
}

// Serve guards the handler that uses the client and hands it the resolution
// the policy admitted: one walk, nothing held, no request copy.
func ExamplePolicy_Serve() {
	policy, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow: clientip.MustParsePrefixSet("198.51.100.0/24"),
	})
	if err != nil {
		log.Fatal(err)
	}
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"), // the reverse proxy
		Header:         "X-Forwarded-For",
	})
	srv := httptest.NewUnstartedServer(policy.Serve(func(w http.ResponseWriter, r *http.Request, res clientip.Result, _ error) {
		fmt.Fprintln(w, "quota of", res.Client)
	}))
	srv.Config.ConnContext = middleware.ConnContext(trust)
	srv.Start()
	defer srv.Close()

	for _, xff := range []string{"198.51.100.7", "203.0.113.9"} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 quota of 198.51.100.7
	// 403 forbidden: the client address is not in an allowed source range
}
