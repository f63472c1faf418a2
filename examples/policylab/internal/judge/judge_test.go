package main

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

var (
	client1 = netip.AddrPortFrom(clientAddr(1).v4, 40000)
	lbPeer  = netip.AddrPortFrom(lbInternal.v4, 50000)
	n3Peer  = netip.AddrPortFrom(nodeAddr(3).v4, 40000)
)

func delivered(client, peer, proxy netip.AddrPort, resolved netip.Addr, source clientip.Source, errKind string) attempt {
	o := &observation{Peer: peer, ProxyCommand: "none", Client: resolved, Source: source.String(), Err: errKind}
	if proxy.IsValid() {
		o.ProxyCommand, o.ProxySource, o.ProxyVersion = "proxy", proxy, 2
	}
	if errKind == "masqueraded" {
		o.Masqueraded = true
	}
	return attempt{Client: client, Obs: o}
}

func TestExpectedWords(t *testing.T) {
	tests := []struct {
		name     string
		c        trafficpolicy.Case
		deployed *trafficpolicy.Case
		want     layers
	}{
		{"passthrough Cluster", lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBPassthrough), nil,
			layers{outDelivered, "node", "none", "lost", clientFlag}},
		{"passthrough Local", lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough), nil,
			layers{outDelivered, "client", "none", "socket", "client (socket)"}},
		{"PROXY Local", lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBProxyProtocol), nil,
			layers{outDelivered, "load balancer", "client", "PROXY header", "client (proxy-protocol)"}},
		{"full proxy Local", lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBFullProxy), nil,
			layers{outDelivered, "load balancer", "none", "lost", clientFlag}},
		{"node port without endpoint, Local", trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: trafficpolicy.ExternalLocal, Path: trafficpolicy.PathNodePort},
			nil, layers{outDropped, dash, dash, dash, dash}},
		{"pod to VIP, Cluster, backend for the PROXY path", podToVIP(trafficpolicy.ExternalCluster), ptr(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol)),
			layers{outRefusedPP, "node", dash, dash, dash}},
		{"pod to VIP, Local, backend for the PROXY path", podToVIP(trafficpolicy.ExternalLocal), ptr(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBProxyProtocol)),
			layers{outDelivered, "client", "none", "socket", "client (socket)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d *trafficpolicy.Expectation
			if tt.deployed != nil {
				e := trafficpolicy.Expect(*tt.deployed)
				d = &e
			}
			if got := expected(trafficpolicy.Expect(tt.c), d); got != tt.want {
				t.Errorf("expected = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func podToVIP(p trafficpolicy.ExternalTrafficPolicy) trafficpolicy.Case {
	return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathPodToLoadBalancerIP, LB: trafficpolicy.LBProxyProtocol}
}

func TestJudge(t *testing.T) {
	n := labNetwork()
	local := expected(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough)), nil)
	pp := expected(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBProxyProtocol)), nil)
	tests := []struct {
		name       string
		atts       []attempt
		rejections []proxyproto.Rejection
		want       layers
		problems   []string // substrings, one per expected problem
	}{
		{"client kept", []attempt{delivered(client1, client1, netip.AddrPort{}, client1.Addr(), clientip.SourceSocket, "")}, nil, local, nil},
		{"client lost where the model keeps it", []attempt{delivered(client1, n3Peer, netip.AddrPort{}, n3Peer.Addr(), clientip.SourceNone, "masqueraded")}, nil, local,
			[]string{`socket peer: kernel "node"`, `client address survives in: kernel "lost"`, `clientip: kernel "masqueraded (flagged)"`}},
		{"PROXY header restores the client", []attempt{delivered(client1, lbPeer, client1, client1.Addr(), clientip.SourceProxyProtocol, "")}, nil, pp, nil},
		{"PROXY header from a stranger", []attempt{delivered(client1, lbPeer, netip.AddrPortFrom(clientAddr(2).v4, 1), clientAddr(2).v4, clientip.SourceProxyProtocol, "")}, nil, pp,
			[]string{"PROXY header", "client address survives in", "clientip"}},
		{"one dropped among delivered", []attempt{delivered(client1, client1, netip.AddrPort{}, client1.Addr(), clientip.SourceSocket, ""), {Fail: failTimeout}}, nil, local,
			[]string{"outcome", "PROXY header", "survives", "clientip"}},
		{"dropped as expected", []attempt{{Fail: failTimeout}, {Fail: failTimeout}}, nil, layers{outDropped, dash, dash, dash, dash}, nil},
		{"refused by the PROXY listener", []attempt{{Fail: failClosed}}, []proxyproto.Rejection{{Peer: n3Peer, Reason: proxyproto.ReasonNoHeader, Err: proxyproto.ErrNoHeader}},
			layers{outRefusedPP, "node", dash, dash, dash}, nil},
		{"refused for another reason", []attempt{{Fail: failClosed}}, []proxyproto.Rejection{{Peer: n3Peer, Reason: proxyproto.ReasonInvalid, Err: errors.New("bad")}},
			layers{outRefusedPP, "node", dash, dash, dash}, []string{"PROXY listener refused"}},
		{"nothing attempted", nil, nil, local, []string{"no connection", "outcome", "socket peer", "PROXY header", "survives", "clientip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := judge(tt.atts, tt.rejections, client1.Addr(), tt.want, n)
			if len(j.Problems) != len(tt.problems) {
				t.Fatalf("problems = %q, want %d matching %q", j.Problems, len(tt.problems), tt.problems)
			}
			for i, p := range tt.problems {
				if !strings.Contains(j.Problems[i], p) {
					t.Errorf("problem %d = %q, want it to mention %q", i, j.Problems[i], p)
				}
			}
		})
	}
}

func TestPeerClass(t *testing.T) {
	n := labNetwork()
	for addr, want := range map[string]string{
		"192.0.2.11":           "client",
		"198.51.100.12":        "node",
		"203.0.113.161":        "node", // n2's pod gateway: masquerade to a local pod
		"2001:db8:244:3::1":    "node",
		"::ffff:198.51.100.13": "node",
		"198.51.100.1":         "load balancer",
		"2001:db8:100::1":      "load balancer",
		"203.0.113.138":        "other", // a pod is nobody's masquerade address
		"192.0.2.12":           "other",
	} {
		if got := peerClass(netip.MustParseAddr(addr), client1.Addr(), n); got != want {
			t.Errorf("peerClass(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestSetupFor(t *testing.T) {
	n := labNetwork()
	s, err := setupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol)), n)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ProxyTrusted.Contains(nodeAddr(2).v4) || !s.Resolver.TrustedProxies.Contains(podGateway(1).v6) || s.ProxyTrusted.Contains(lbInternal.v4) {
		t.Errorf("Cluster + PROXY: trusted %v, resolver %+v, want the nodes", s.ProxyTrusted, s.Resolver)
	}
	s, err = setupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBFullProxy)), n)
	if err != nil {
		t.Fatal(err)
	}
	if s.ProxyTrusted.Len() != 0 || s.Resolver.TrustedProxies.Len() != 0 || !s.Resolver.Masquerade.Contains(lbInternal.v4) {
		t.Errorf("Local + full proxy: %+v, want nothing trusted and the load balancer flagged", s)
	}
}
