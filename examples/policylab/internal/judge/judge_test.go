package judge

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/policylab/internal/backend"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	client1 = netip.AddrPortFrom(topo.ClientAddr(1).V4, 40000)
	lbPeer  = netip.AddrPortFrom(topo.LBInternal.V4, 50000)
	n3Peer  = netip.AddrPortFrom(topo.NodeAddr(3).V4, 40000)
)

func delivered(client, peer, proxy netip.AddrPort, resolved netip.Addr, source clientip.Source, errKind string) backend.Attempt {
	o := &backend.Observation{Peer: peer, ProxyCommand: "none", Client: resolved, Source: source.String(), Err: errKind}
	if proxy.IsValid() {
		o.ProxyCommand, o.ProxySource, o.ProxyVersion = "proxy", proxy, 2
	}
	if errKind == "masqueraded" {
		o.Masqueraded = true
	}
	return backend.Attempt{Client: client, Obs: o}
}

func TestExpectedWords(t *testing.T) {
	tests := []struct {
		name     string
		c        trafficpolicy.Case
		deployed *trafficpolicy.Case
		want     Layers
	}{
		{"passthrough Cluster", lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBPassthrough), nil,
			Layers{OutDelivered, "node", "none", "lost", ClientFlag}},
		{"passthrough Local", lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough), nil,
			Layers{OutDelivered, "client", "none", "socket", "client (socket)"}},
		{"PROXY Local", lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBProxyProtocol), nil,
			Layers{OutDelivered, "load balancer", "client", "PROXY header", "client (proxy-protocol)"}},
		{"full proxy Local", lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBFullProxy), nil,
			Layers{OutDelivered, "load balancer", "none", "lost", ClientFlag}},
		{"node port without endpoint, Local", trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: trafficpolicy.ExternalLocal, Path: trafficpolicy.PathNodePort},
			nil, Layers{OutDropped, Dash, Dash, Dash, Dash}},
		{"pod to VIP, Cluster, backend for the PROXY path", podToVIP(trafficpolicy.ExternalCluster), ptr(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol)),
			Layers{OutRefusedPP, "node", Dash, Dash, Dash}},
		{"pod to VIP, Local, backend for the PROXY path", podToVIP(trafficpolicy.ExternalLocal), ptr(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBProxyProtocol)),
			Layers{OutDelivered, "client", "none", "socket", "client (socket)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d *trafficpolicy.Expectation
			if tt.deployed != nil {
				e := trafficpolicy.Expect(*tt.deployed)
				d = &e
			}
			assert.Equal(t, tt.want, Expected(trafficpolicy.Expect(tt.c), d))
		})
	}
}

// The refusal of scenario 7's short-circuited pod under Cluster is the
// model's prediction (CaveatNoProxyHeaderFromNode), not one the lab derives
// for itself: a model without the caveat says the pod is served, so a
// kernel that shows the refusal fails the row. (The lab predicted the
// refusal from the recipes alone, and a model that lost the caveat still
// passed, with a note in the report.)
func TestRefusalIsTheModels(t *testing.T) {
	deployed := trafficpolicy.Expect(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol))
	uncaveated := trafficpolicy.Expect(podToVIP(trafficpolicy.ExternalCluster))
	require.NotZero(t, uncaveated.Caveats&trafficpolicy.CaveatNoProxyHeaderFromNode, "the model's caveat")
	uncaveated.Caveats &^= trafficpolicy.CaveatNoProxyHeaderFromNode
	want := Expected(uncaveated, &deployed)
	assert.Equal(t, Layers{OutDelivered, "node", "none", "lost", ClientFlag}, want)
	refused := []backend.Attempt{{Fail: backend.FailClosed}}
	rej := []proxyproto.Rejection{{Peer: n3Peer, Reason: proxyproto.ReasonNoHeader, Err: proxyproto.ErrNoHeader}}
	assert.NotEmpty(t, Judge(refused, rej, client1.Addr(), want, topo.Network()).Problems, "the kernel's refusal against a model without the caveat")
}

func ptr[T any](v T) *T { return &v }

func podToVIP(p trafficpolicy.ExternalTrafficPolicy) trafficpolicy.Case {
	return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathPodToLoadBalancerIP, LB: trafficpolicy.LBProxyProtocol}
}

func TestJudge(t *testing.T) {
	n := topo.Network()
	local := Expected(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough)), nil)
	pp := Expected(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBProxyProtocol)), nil)
	tests := []struct {
		name       string
		atts       []backend.Attempt
		rejections []proxyproto.Rejection
		want       Layers
		problems   []string // substrings, one per Expected problem
	}{
		{"client kept", []backend.Attempt{delivered(client1, client1, netip.AddrPort{}, client1.Addr(), clientip.SourceSocket, "")}, nil, local, nil},
		{"client lost where the model keeps it", []backend.Attempt{delivered(client1, n3Peer, netip.AddrPort{}, n3Peer.Addr(), clientip.SourceNone, "masqueraded")}, nil, local,
			[]string{`socket peer: kernel "node"`, `client address survives in: kernel "lost"`, `clientip: kernel "masqueraded (flagged)"`}},
		{"PROXY header restores the client", []backend.Attempt{delivered(client1, lbPeer, client1, client1.Addr(), clientip.SourceProxyProtocol, "")}, nil, pp, nil},
		{"PROXY header from a stranger", []backend.Attempt{delivered(client1, lbPeer, netip.AddrPortFrom(topo.ClientAddr(2).V4, 1), topo.ClientAddr(2).V4, clientip.SourceProxyProtocol, "")}, nil, pp,
			[]string{"PROXY header", "client address survives in", "clientip"}},
		{"one dropped among delivered", []backend.Attempt{delivered(client1, client1, netip.AddrPort{}, client1.Addr(), clientip.SourceSocket, ""), {Fail: backend.FailTimeout}}, nil, local,
			[]string{"outcome", "PROXY header", "survives", "clientip"}},
		{"dropped as Expected", []backend.Attempt{{Fail: backend.FailTimeout}, {Fail: backend.FailTimeout}}, nil, Layers{OutDropped, Dash, Dash, Dash, Dash}, nil},
		{"refused by the PROXY listener", []backend.Attempt{{Fail: backend.FailClosed}}, []proxyproto.Rejection{{Peer: n3Peer, Reason: proxyproto.ReasonNoHeader, Err: proxyproto.ErrNoHeader}},
			Layers{OutRefusedPP, "node", Dash, Dash, Dash}, nil},
		{"refused for another reason", []backend.Attempt{{Fail: backend.FailClosed}}, []proxyproto.Rejection{{Peer: n3Peer, Reason: proxyproto.ReasonInvalid, Err: errors.New("bad")}},
			Layers{OutRefusedPP, "node", Dash, Dash, Dash}, []string{"PROXY listener refused"}},
		{"nothing attempted", nil, nil, local, []string{"no connection", "outcome", "socket peer", "PROXY header", "survives", "clientip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Judge(tt.atts, tt.rejections, client1.Addr(), tt.want, n)
			require.Len(t, j.Problems, len(tt.problems), "want problems matching %q", tt.problems)
			for i, p := range tt.problems {
				assert.Contains(t, j.Problems[i], p, "problem %d", i)
			}
		})
	}
}

func TestPeerClass(t *testing.T) {
	n := topo.Network()
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
		assert.Equal(t, want, PeerClass(netip.MustParseAddr(addr), client1.Addr(), n), "PeerClass(%s)", addr)
	}
}

func lbCase(p trafficpolicy.ExternalTrafficPolicy, k trafficpolicy.LBKind) trafficpolicy.Case {
	return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathLoadBalancer, LB: k, LocalEndpoint: true}
}
