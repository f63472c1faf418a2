package presets_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/presets"
	"github.com/sourceip/sourceip/clientip/ranges"
	"github.com/sourceip/sourceip/middleware"
)

// request builds a request as the service receives it from peer, with
// header name-value pairs.
func request(peer string, kv ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = peer
	for i := 0; i < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

// serve runs h for r and prints the status and the body.
func serve(h http.Handler, r *http.Request) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Printf("%d %s", w.Code, w.Body.String())
}

// whoami answers with the client the middleware resolved.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	res, _ := clientip.FromContext(r.Context())
	fmt.Fprintf(w, "client %s from %s\n", res.Client, res.Source)
})

// Cloudflare connects to the service itself. The store starts from the
// dated snapshot of Cloudflare's ranges and a refresher keeps it current
// (go refresher.Run(ctx) in a service; here it only says where it starts).
// CF-Connecting-IP is believed from Cloudflare's addresses only.
func Example_cloudflare() {
	p, err := presets.New(presets.Config{Platform: presets.Cloudflare, Topology: presets.Direct()})
	if err != nil {
		panic(err)
	}
	trust, err := p.NewStore(clientip.StoreOptions{})
	if err != nil {
		panic(err)
	}
	refresher, err := p.NewRefresher(trust, ranges.RefresherConfig{}) // CacheFile: a path, to survive restarts offline
	if err != nil {
		panic(err)
	}
	st := refresher.Status()
	fmt.Println("ranges from", st.Provenance, "of", st.Confirmed.Format(time.DateOnly))

	resolve, err := middleware.New(middleware.Config{Trust: trust})
	if err != nil {
		panic(err)
	}
	app := p.Handler(resolve(whoami))
	serve(app, request("173.245.48.10:443", "CF-Connecting-IP", "198.51.100.7"))
	serve(app, request("203.0.113.66:50000", "CF-Connecting-IP", "192.0.2.1")) // not Cloudflare: the header is not read
	// Output:
	// ranges from snapshot of 2025-07-25
	// 200 client 198.51.100.7 from header
	// 200 client 203.0.113.66 from socket
}

// CloudFront in front of an Application Load Balancer in front of the
// service: X-Forwarded-For is walked through the ALB's subnets and then
// CloudFront's origin-facing ranges. A custom origin header set on the
// distribution proves the request came through yours, not another AWS
// customer's distribution.
func Example_cloudFrontALB() {
	p, err := presets.New(presets.Config{
		Platform:     presets.CloudFront,
		Topology:     presets.BehindIngress(clientip.MustParsePrefixSet("10.0.0.0/16")), // the ALB's subnets
		SharedSecret: presets.SharedSecret{Header: "X-Origin-Verify", Values: []string{"from-the-secrets-manager-2026"}},
	})
	if err != nil {
		panic(err)
	}
	trust, err := p.NewStore(clientip.StoreOptions{})
	if err != nil {
		panic(err)
	}
	resolve, err := middleware.New(middleware.Config{Trust: trust})
	if err != nil {
		panic(err)
	}
	app := p.Handler(resolve(whoami))
	// The viewer's own X-Forwarded-For, CloudFront's entry, the ALB's entry.
	serve(app, request("10.0.1.23:41000", "X-Forwarded-For", "192.0.2.1, 198.51.100.7, 3.172.0.10",
		"X-Origin-Verify", "from-the-secrets-manager-2026"))
	// Someone who found the ALB's name and skipped CloudFront.
	serve(app, request("10.0.1.23:41000", "X-Forwarded-For", "192.0.2.1, 203.0.113.66"))
	// Output:
	// 200 client 198.51.100.7 from x-forwarded-for
	// 403 forbidden: the request did not come through the configured edge
}

// Google Cloud's external Application Load Balancer appends the client and
// then its forwarding rule's address; its front ends connect from
// Google's documented ranges, which also send health checks without
// X-Forwarded-For: serve those beside the middleware.
func Example_googleLoadBalancer() {
	p, err := presets.New(presets.Config{
		Platform:        presets.GoogleLoadBalancer,
		Topology:        presets.Direct(),
		ForwardingRules: clientip.MustParsePrefixSet("203.0.113.200"), // gcloud compute forwarding-rules list
	})
	if err != nil {
		panic(err)
	}
	r, err := clientip.New(p.Config())
	if err != nil {
		panic(err)
	}
	res, err := r.ResolveRequest(request("35.191.10.20:40000", "X-Forwarded-For", "192.0.2.1, 198.51.100.7,203.0.113.200"))
	fmt.Println(res.Client, err)
	_, err = r.ResolveRequest(request("130.211.0.9:40000")) // a health check
	fmt.Println(clientip.ReasonOf(err))
	// Output:
	// 198.51.100.7 <nil>
	// all_trusted
}

// Azure Front Door: every profile connects from the same
// AzureFrontDoor.Backend ranges, so X-Azure-FDID must name yours. The
// client is the address Front Door appended to X-Forwarded-For, not
// X-Azure-ClientIP, which a client's X-Forwarded-For decides.
func Example_azureFrontDoor() {
	p, err := presets.New(presets.Config{
		Platform:     presets.AzureFrontDoor,
		Topology:     presets.Direct(),
		FrontDoorIDs: []string{"a0a0a0a0-bbbb-cccc-dddd-e1e1e1e1e1e1"}, // az afd profile show --query frontDoorId
	})
	if err != nil {
		panic(err)
	}
	trust, err := p.NewStore(clientip.StoreOptions{})
	if err != nil {
		panic(err)
	}
	resolve, err := middleware.New(middleware.Config{Trust: trust})
	if err != nil {
		panic(err)
	}
	app := p.Handler(resolve(whoami))
	serve(app, request("4.213.28.114:443", "X-Forwarded-For", "198.51.100.7",
		"X-Azure-ClientIP", "192.0.2.1", "X-Azure-FDID", "a0a0a0a0-bbbb-cccc-dddd-e1e1e1e1e1e1"))
	serve(app, request("4.213.28.114:443", "X-Forwarded-For", "198.51.100.7",
		"X-Azure-FDID", "b1b1b1b1-bbbb-cccc-dddd-e1e1e1e1e1e1")) // another tenant's profile
	fmt.Println(p.Check(request("4.213.28.114:443")))
	// Output:
	// 200 client 198.51.100.7 from x-forwarded-for
	// 403 forbidden: the request did not come through the configured edge
	// presets: edge identity header missing: X-Azure-FDID
}

// Fly.io's proxy reports the client in Fly-Client-IP. Fly.io publishes no
// list of the addresses it connects to machines from: give the ones your
// machines see (the explain package shows them), never everyone.
func Example_fly() {
	p, err := presets.New(presets.Config{
		Platform: presets.Fly,
		Topology: presets.Direct(),
		Ranges:   clientip.MustParsePrefixSet("172.16.0.0/16"), // what your machines see fly-proxy connect from
	})
	if err != nil {
		panic(err)
	}
	r, err := clientip.New(p.Config())
	if err != nil {
		panic(err)
	}
	res, _ := r.ResolveRequest(request("172.16.5.9:50000", "Fly-Client-IP", "2001:db8::7"))
	fmt.Println(res.Client, res.Source)
	_, err = presets.New(presets.Config{Platform: presets.Fly, Topology: presets.Direct()})
	fmt.Println(err)
	// Output:
	// 2001:db8::7 header
	// presets: invalid configuration: fly publishes no list of the addresses it connects from: Ranges is required
}

// Cloudflare in front of ingress-nginx on Kubernetes: the ingress pods
// (here the pod network 10.244.0.0/16) append the address Cloudflare
// connected from, with use-forwarded-headers and compute-full-forwarded-for
// in the controller's ConfigMap. A client that reaches the ingress without
// Cloudflare can forge CF-Connecting-IP, so behind the ingress it is not
// read.
func Example_ingressNginx() {
	p, err := presets.New(presets.Config{
		Platform: presets.Cloudflare,
		Topology: presets.BehindIngress(clientip.MustParsePrefixSet("10.244.0.0/16")),
	})
	if err != nil {
		panic(err)
	}
	r, err := clientip.New(p.Config())
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Config().Header, p.Config().MaxHops)
	res, _ := r.ResolveRequest(request("10.244.1.5:36000",
		"CF-Connecting-IP", "198.51.100.7", "X-Forwarded-For", "192.0.2.1, 198.51.100.7, 173.245.48.10"))
	fmt.Println(res.Client, "hop", res.Hop, "via", res.Via)
	res, _ = r.ResolveRequest(request("10.244.1.5:36000",
		"CF-Connecting-IP", "192.0.2.1", "X-Forwarded-For", "192.0.2.1, 203.0.113.66"))
	fmt.Println(res.Client, "hop", res.Hop, "via", res.Via)
	// Output:
	// X-Forwarded-For 8
	// 198.51.100.7 hop 2 via 173.245.48.10
	// 203.0.113.66 hop 1 via 10.244.1.5
}
