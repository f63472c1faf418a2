package trafficpolicy_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Ask one question and get a ready-to-use clientip configuration.
func ExampleExpect() {
	e := trafficpolicy.Expect(trafficpolicy.Case{
		Type:          trafficpolicy.TypeLoadBalancer,
		External:      trafficpolicy.ExternalCluster,
		Path:          trafficpolicy.PathLoadBalancer,
		LB:            trafficpolicy.LBPassthrough,
		LocalEndpoint: true,
	})
	fmt.Println(e.Peer, e.Recoverable())

	cfg, err := e.Config(trafficpolicy.Network{Nodes: clientip.MustParsePrefixSet("10.0.0.0/24")})
	if err != nil {
		log.Fatal(err)
	}
	r := clientip.MustNew(cfg)
	_, err = r.Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.11:41234")}, nil)
	fmt.Println(err)
	// Output:
	// Node false
	// clientip: address is a masquerading node
}

// Answer a load balancer's health check the way kube-proxy does.
// An AWS NLB with instance targets keeps the client's address and, with
// proxy protocol v2, sends a header naming it as well. Under
// externalTrafficPolicy Local an IPv4 client is the socket peer, and the
// PROXY listener must discard the header from a peer it does not trust
// (proxyproto.UntrustedIgnore); an IPv6 client of a dual-stack NLB arrives
// from the load balancer's IPv4 address, so the recipe trusts the load
// balancers for its header.
func ExampleLBKind_awsNLBInstanceTargets() {
	e := trafficpolicy.Expect(trafficpolicy.Case{
		Type:          trafficpolicy.TypeLoadBalancer,
		External:      trafficpolicy.ExternalLocal,
		Path:          trafficpolicy.PathLoadBalancer,
		LB:            trafficpolicy.LBPassthroughProxyProtocol,
		LocalEndpoint: true,
	})
	fmt.Println(e.Peer, e.Client, e.ProxyHeader)
	fmt.Println(e.Recipe())
	fmt.Println(e.Caveats)
	// Output:
	// Client socket true
	// trust load-balancers, PROXY listener
	// proxy-header-from-client
}

func ExampleHealthServer() {
	var endpoints trafficpolicy.Registry
	endpoints.Set(netip.MustParseAddrPort("10.244.1.5:8883"), trafficpolicy.EndpointReady)
	hs, err := trafficpolicy.NewHealthServer(trafficpolicy.HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &endpoints})
	if err != nil {
		log.Fatal(err)
	}
	rec := httptest.NewRecorder()
	hs.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println(rec.Code, rec.Header().Get("X-Load-Balancing-Endpoint-Weight"))
	fmt.Println(rec.Body.String())

	endpoints.Set(netip.MustParseAddrPort("10.244.1.5:8883"), trafficpolicy.EndpointTerminating)
	fmt.Println(hs.Status().Code())
	// Output:
	// 200 1
	// {
	// 	"service": {
	// 		"namespace": "iot",
	// 		"name": "mqtt-gw"
	// 	},
	// 	"localEndpoints": 1,
	// 	"serviceProxyHealthy": true
	// }
	// 503
}

// Serve the health answer on a node's healthCheckNodePort behind an AWS NLB
// with proxy protocol v2, which puts a PROXY header in front of its health
// checks too.
func ExampleOptionalProxyHeader() {
	var endpoints trafficpolicy.Registry // kept up to date by the caller
	hs, err := trafficpolicy.NewHealthServer(trafficpolicy.HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &endpoints})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":32123")
	if err != nil {
		log.Fatal(err)
	}
	pl, err := trafficpolicy.OptionalProxyHeader(ln, 0)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: hs, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.Serve(pl))
}

// Replay a load balancer's view with injected time: how long does it keep
// sending traffic to a node whose last endpoint went away?
func ExampleProber_ObserveAt() {
	timing := trafficpolicy.HAProxyTiming() // inter 2s, rise 2, fall 3
	p, err := trafficpolicy.NewProber(trafficpolicy.ProberConfig{
		Targets: []trafficpolicy.Target{{Name: "node1", URL: "http://10.0.0.11:32123/healthz"}},
		Timing:  timing,
		StartUp: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	gone := start.Add(5 * time.Second) // the last local endpoint goes away
	for at := start; at.Before(start.Add(20 * time.Second)); at = at.Add(timing.Interval) {
		if c, changed, _ := p.ObserveAt("node1", at.Before(gone), at); changed {
			fmt.Printf("%s down after %v\n", c.Target, c.At.Sub(gone))
		}
	}
	fmt.Println("black hole:", timing.BlackHole())
	// Output:
	// node1 down after 5s
	// black hole: 4s…6s
}

// Probe real health endpoints and log membership changes.
func ExampleProber_Run() {
	p, err := trafficpolicy.NewProber(trafficpolicy.ProberConfig{
		Targets: []trafficpolicy.Target{
			{Name: "node1", URL: "http://10.0.0.11:32123/healthz"},
			{Name: "node2", URL: "http://10.0.0.12:32123/healthz"},
		},
		Timing: trafficpolicy.AWSNLBTiming(),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.Run(ctx, func(c trafficpolicy.Change) { log.Println(c) })
}

// Answer a load balancer's node health checks as kube-proxy does on :10256,
// with the node's state from its Node object and a data-path check that
// kube-proxy cannot make.
func ExampleNodeHealthServer() {
	t0 := time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)
	cniReady := true
	nh, err := trafficpolicy.NewNodeHealthServer(trafficpolicy.NodeHealthConfig{
		HealthTimeout: time.Minute,
		Checks: []trafficpolicy.DataPathCheck{{Name: "cni", Check: func(context.Context) error {
			if !cniReady {
				return errors.New("cni plugin not initialized")
			}
			return nil
		}}},
		Now: func() time.Time { return t0 }, // a fixed clock for the example's output
	})
	if err != nil {
		log.Fatal(err)
	}
	nh.SetNode(trafficpolicy.NodeState{Known: true}) // from a watch on this node's Node object
	nh.Updated(trafficpolicy.IPv4)                   // after every successful sync of the data path

	ask := func(path string) {
		rec := httptest.NewRecorder()
		nh.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code, rec.Body.String())
	}
	ask("/healthz")
	nh.SetNode(trafficpolicy.NodeState{Known: true, Taints: []string{trafficpolicy.ToBeDeletedTaint}})
	ask("/healthz") // the autoscaler is about to delete the node: drain it
	ask("/livez")   // but do not restart its proxy
	nh.SetNode(trafficpolicy.NodeState{Known: true})
	cniReady = false
	ask("/healthz")
	// Output:
	// /healthz 200 {"lastUpdated":"2026-05-04T03:02:01Z","currentTime":"2026-05-04T03:02:01Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-05-04T03:02:01Z","healthy":true}}}
	// /healthz 503 {"lastUpdated":"2026-05-04T03:02:01Z","currentTime":"2026-05-04T03:02:01Z","nodeEligible":false,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-05-04T03:02:01Z","healthy":true}}}
	// /livez 200 {"lastUpdated":"2026-05-04T03:02:01Z","currentTime":"2026-05-04T03:02:01Z","healthy":true,"status":{"IPv4":{"lastUpdated":"2026-05-04T03:02:01Z","healthy":true}}}
	// /healthz 503 {"lastUpdated":"2026-05-04T03:02:01Z","currentTime":"2026-05-04T03:02:01Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-05-04T03:02:01Z","healthy":true}},"failedChecks":["cni"]}
}
