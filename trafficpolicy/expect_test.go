package trafficpolicy

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answer is the part of an Expectation a table row pins; the Case is the row's.
type answer struct {
	out     Outcome
	peer    Peer
	client  clientip.Source
	eps     Endpoints
	health  HealthCheck
	pp      bool
	trust   Trust
	header  string
	caveats Caveat
	rule    string
}

func (a answer) expectation(c Case) Expectation {
	return Expectation{
		Case: c, Outcome: a.out, Peer: a.peer, Client: a.client, Endpoints: a.eps, Health: a.health,
		ProxyHeader: a.pp, Trust: a.trust, Header: a.header, Caveats: a.caveats, Rule: a.rule,
	}
}

const (
	sock  = clientip.SourceSocket
	ppSrc = clientip.SourceProxyProtocol
	xff   = clientip.SourceXForwardedFor
	lost  = clientip.SourceNone
)

var notExposedAnswer = answer{out: NotExposed, rule: ruleNotExposed}

// TestExpect pins one answer per path × policy × load-balancer kind (and the
// local-endpoint and trafficDistribution variations that change it). Each
// name cites the kube-proxy rule (pkg/proxy/iptables/proxier.go) it encodes.
func TestExpect(t *testing.T) {
	lb := func(etp ExternalTrafficPolicy, k LBKind, local bool) Case {
		return Case{Type: TypeLoadBalancer, External: etp, Path: PathLoadBalancer, LB: k, LocalEndpoint: local}
	}
	np := func(typ ServiceType, etp ExternalTrafficPolicy, local bool) Case {
		return Case{Type: typ, External: etp, Path: PathNodePort, LocalEndpoint: local}
	}
	cip := func(itp InternalTrafficPolicy, d TrafficDistribution, local bool) Case {
		return Case{Type: TypeClusterIP, Internal: itp, Distribution: d, Path: PathClusterIP, LocalEndpoint: local}
	}
	pod := func(etp ExternalTrafficPolicy, m IPMode, k LBKind, local bool) Case {
		return Case{Type: TypeLoadBalancer, External: etp, IPMode: m, Path: PathPodToLoadBalancerIP, LB: k, LocalEndpoint: local}
	}
	withTD := func(c Case, d TrafficDistribution) Case { c.Distribution = d; return c }

	extCluster := answer{out: Delivered, peer: PeerNode, client: lost, eps: EndpointsCluster, health: HealthNodeProxy, rule: ruleExtCluster}
	extLocal := answer{out: Delivered, eps: EndpointsLocal, health: HealthCheckNodePort, rule: ruleExtLocal}
	extDrop := answer{out: Dropped, health: HealthCheckNodePort, rule: ruleExtDrop}
	with := func(a answer, f func(*answer)) answer { f(&a); return a }
	proxyMode := func(a answer) answer {
		a.caveats |= CaveatEgressSNAT
		a.rule = ruleIPModeProxy + a.rule
		return a
	}

	tests := []struct {
		name string
		c    Case
		want answer
	}{
		// Cluster IP, governed by internalTrafficPolicy.
		{"clusterIP/ITP Cluster: KUBE-SVC, masquerade only ! IfLocal, so the pod's address is kept", cip(InternalCluster, DistributionDefault, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIP}},
		{"clusterIP/ITP Cluster: no local endpoint does not matter", cip(InternalCluster, DistributionDefault, false),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIP}},
		{"clusterIP/ITP Local: KUBE-SVL, node-local endpoints", cip(InternalLocal, DistributionDefault, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsLocal, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIPSVL}},
		{"clusterIP/ITP Local without local endpoint: filter DROP \"has no local endpoints\"", cip(InternalLocal, DistributionDefault, false),
			answer{out: Dropped, health: HealthReadiness, rule: ruleClusterIPDrop}},
		{"clusterIP/PreferSameZone: topology narrows KUBE-SVC, address kept", cip(InternalCluster, PreferSameZone, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsPreferSameZone, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIP}},
		{"clusterIP/PreferClose is the deprecated alias of PreferSameZone", cip(InternalCluster, PreferClose, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsPreferSameZone, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIP}},
		{"clusterIP/PreferSameNode", cip(InternalCluster, PreferSameNode, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsPreferSameNode, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIP}},
		{"clusterIP/ITP Local ignores trafficDistribution (CategorizeEndpoints: topology only for cluster endpoints)", cip(InternalLocal, PreferSameNode, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsLocal, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIPSVL}},
		{"clusterIP/LoadBalancer Services have a cluster IP too", Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathClusterIP, LocalEndpoint: true},
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, caveats: CaveatHairpin, rule: ruleClusterIP}},
		{"clusterIP/ExternalName has no cluster IP", Case{Type: TypeExternalName, Path: PathClusterIP}, notExposedAnswer},

		// Node port, governed by externalTrafficPolicy; no load balancer involved.
		{"nodePort/ClusterIP type opens no node port", np(TypeClusterIP, ExternalCluster, true), notExposedAnswer},
		{"nodePort/ETP Cluster: KUBE-EXT -j KUBE-MARK-MASQ, client lost", np(TypeNodePort, ExternalCluster, true),
			answer{out: Delivered, peer: PeerNode, client: lost, eps: EndpointsCluster, rule: ruleExtCluster}},
		{"nodePort/ETP Cluster: a node without endpoints forwards to others", np(TypeNodePort, ExternalCluster, false),
			answer{out: Delivered, peer: PeerNode, client: lost, eps: EndpointsCluster, rule: ruleExtCluster}},
		{"nodePort/ETP Local: KUBE-EXT -j KUBE-SVL, no masquerade, client on the socket", np(TypeNodePort, ExternalLocal, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsLocal, rule: ruleExtLocal}},
		{"nodePort/ETP Local without local endpoint: KUBE-EXTERNAL-SERVICES DROP", np(TypeNodePort, ExternalLocal, false),
			answer{out: Dropped, rule: ruleExtDrop}},
		{"nodePort/LoadBalancer type: a client dialling the node port bypasses the LB, so no PROXY header",
			Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathNodePort, LB: LBProxyProtocol, LocalEndpoint: true},
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsLocal, rule: ruleExtLocal}},
		{"nodePort/ETP Cluster + PreferSameZone", withTD(np(TypeNodePort, ExternalCluster, true), PreferSameZone),
			answer{out: Delivered, peer: PeerNode, client: lost, eps: EndpointsPreferSameZone, rule: ruleExtCluster}},

		// Through the load balancer, ETP Cluster: always masqueraded to the node.
		{"lb/NodePort type has no load balancer", Case{Type: TypeNodePort, Path: PathLoadBalancer, LB: LBPassthrough}, notExposedAnswer},
		{"lb/ETP Cluster/passthrough: KUBE-MARK-MASQ replaces the client with the node", lb(ExternalCluster, LBPassthrough, true), extCluster},
		{"lb/ETP Cluster/PROXY: header survives the SNAT, only believable by trusting nodes", lb(ExternalCluster, LBProxyProtocol, true),
			with(extCluster, func(a *answer) { a.client, a.pp, a.trust, a.caveats = ppSrc, true, TrustNodes, CaveatNodePortsOpen })},
		{"lb/ETP Cluster/XFF: header survives the SNAT, only believable by trusting nodes", lb(ExternalCluster, LBXForwardedFor, true),
			with(extCluster, func(a *answer) {
				a.client, a.trust, a.header, a.caveats = xff, TrustNodes|TrustLoadBalancers, "X-Forwarded-For", CaveatNodePortsOpen
			})},
		{"lb/ETP Cluster/full proxy: nothing survives", lb(ExternalCluster, LBFullProxy, true), extCluster},
		{"lb/ETP Cluster/unknown LB: node address, client unknown", lb(ExternalCluster, LBUnknown, true),
			with(extCluster, func(a *answer) { a.caveats = CaveatUnknownLB })},
		{"lb/ETP Cluster: no local endpoint does not matter", lb(ExternalCluster, LBPassthrough, false), extCluster},
		{"lb/ETP Cluster + PreferSameNode: topology narrows KUBE-SVC", withTD(lb(ExternalCluster, LBPassthrough, true), PreferSameNode),
			with(extCluster, func(a *answer) { a.eps = EndpointsPreferSameNode })},

		// Through the load balancer, ETP Local: KUBE-SVL, no masquerade.
		{"lb/ETP Local/passthrough: KUBE-SVL, client is the socket peer", lb(ExternalLocal, LBPassthrough, true),
			with(extLocal, func(a *answer) { a.peer, a.client = PeerClient, sock })},
		{"lb/ETP Local/PROXY: socket is the LB, client in the PROXY header", lb(ExternalLocal, LBProxyProtocol, true),
			with(extLocal, func(a *answer) { a.peer, a.client, a.pp, a.trust = PeerLoadBalancer, ppSrc, true, TrustLoadBalancers })},
		{"lb/ETP Local/XFF: socket is the LB, client in X-Forwarded-For", lb(ExternalLocal, LBXForwardedFor, true),
			with(extLocal, func(a *answer) {
				a.peer, a.client, a.trust, a.header = PeerLoadBalancer, xff, TrustLoadBalancers, "X-Forwarded-For"
			})},
		// AWS NLB instance targets keep the client's address (client IP
		// preservation, on by default for them) and, with proxy protocol v2,
		// send a header from it too. The ProxyProtocol recipe (trust the
		// load balancers) met that header from an untrusted client: a PROXY
		// listener closed every connection.
		{"lb/ETP Local/NLB instance targets with PROXY v2: the client is the socket peer and sends the header", lb(ExternalLocal, LBPassthroughProxyProtocol, true),
			with(extLocal, func(a *answer) {
				a.peer, a.client, a.pp, a.trust, a.caveats = PeerClient, sock, true, TrustLoadBalancers, CaveatProxyHeaderFromClient
			})},
		{"lb/ETP Cluster/NLB instance targets with PROXY v2: masqueraded, header believable by trusting nodes", lb(ExternalCluster, LBPassthroughProxyProtocol, true),
			with(extCluster, func(a *answer) { a.client, a.pp, a.trust, a.caveats = ppSrc, true, TrustNodes, CaveatNodePortsOpen })},
		{"lb/ETP Local/NLB instance targets with PROXY v2 without local endpoint: dropped", lb(ExternalLocal, LBPassthroughProxyProtocol, false), extDrop},
		{"lb/ETP Local/full proxy: socket is the LB, client lost", lb(ExternalLocal, LBFullProxy, true),
			with(extLocal, func(a *answer) { a.peer = PeerLoadBalancer })},
		{"lb/ETP Local/unknown LB: cannot tell", lb(ExternalLocal, LBUnknown, true),
			with(extLocal, func(a *answer) { a.peer, a.caveats = PeerUnknown, CaveatUnknownLB })},
		{"lb/ETP Local/passthrough without local endpoint: KUBE-EXTERNAL-SERVICES DROP", lb(ExternalLocal, LBPassthrough, false), extDrop},
		{"lb/ETP Local/PROXY without local endpoint: dropped before any header is read", lb(ExternalLocal, LBProxyProtocol, false), extDrop},
		{"lb/ETP Local/XFF without local endpoint: dropped", lb(ExternalLocal, LBXForwardedFor, false), extDrop},
		{"lb/ETP Local/full proxy without local endpoint: dropped", lb(ExternalLocal, LBFullProxy, false), extDrop},
		{"lb/ETP Local ignores trafficDistribution", withTD(lb(ExternalLocal, LBPassthrough, true), PreferSameZone),
			with(extLocal, func(a *answer) { a.peer, a.client = PeerClient, sock })},
		{"lb/ipMode Proxy does not change the external path (KUBE-NODEPORTS -> KUBE-EXT)",
			Case{Type: TypeLoadBalancer, External: ExternalLocal, IPMode: IPModeProxy, Path: PathLoadBalancer, LB: LBProxyProtocol, LocalEndpoint: true},
			with(extLocal, func(a *answer) { a.peer, a.client, a.pp, a.trust = PeerLoadBalancer, ppSrc, true, TrustLoadBalancers })},

		// Pods to the load-balancer IP.
		{"pod→LB/NodePort type has no LB IP", Case{Type: TypeNodePort, Path: PathPodToLoadBalancerIP}, notExposedAnswer},
		{"pod→LB/VIP/ETP Cluster: captured on the pod's node, KUBE-EXT masquerades; no PROXY header", pod(ExternalCluster, IPModeVIP, LBProxyProtocol, true),
			answer{out: Delivered, peer: PeerNode, client: lost, eps: EndpointsCluster, health: HealthReadiness, caveats: CaveatNoProxyHeaderFromNode, rule: rulePodLBCluster}},
		{"pod→LB/VIP/ETP Cluster/passthrough: masqueraded, no header caveat", pod(ExternalCluster, IPModeVIP, LBPassthrough, true),
			answer{out: Delivered, peer: PeerNode, client: lost, eps: EndpointsCluster, health: HealthReadiness, rule: rulePodLBCluster}},
		{"pod→LB/VIP/ETP Local: \"pod traffic for external destinations\" -> KUBE-SVC, pod address kept, no PROXY header", pod(ExternalLocal, IPModeVIP, LBProxyProtocol, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, caveats: CaveatNoProxyHeader, rule: rulePodLBLocal}},
		{"pod→LB/VIP/ETP Local/NLB with PROXY v2: bypassed, no header", pod(ExternalLocal, IPModeVIP, LBPassthroughProxyProtocol, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, caveats: CaveatNoProxyHeader, rule: rulePodLBLocal}},
		{"pod→LB/VIP/ETP Local without local endpoint: short-circuit ignores Local, never dropped", pod(ExternalLocal, IPModeVIP, LBPassthrough, false),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, rule: rulePodLBLocal}},
		{"pod→LB/VIP/ETP Local/XFF: the L7 LB is bypassed, the pod is the socket peer", pod(ExternalLocal, IPModeVIP, LBXForwardedFor, true),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsCluster, health: HealthReadiness, rule: rulePodLBLocal}},
		{"pod→LB/VIP/ETP Local + PreferSameZone: the cluster chain uses topology", withTD(pod(ExternalLocal, IPModeVIP, LBPassthrough, true), PreferSameZone),
			answer{out: Delivered, peer: PeerClient, client: sock, eps: EndpointsPreferSameZone, health: HealthReadiness, rule: rulePodLBLocal}},
		{"pod→LB/ipMode Proxy/ETP Cluster/PROXY: not captured (IsVIPMode false), through the LB, then masqueraded", pod(ExternalCluster, IPModeProxy, LBProxyProtocol, true),
			proxyMode(with(extCluster, func(a *answer) { a.client, a.pp, a.trust, a.caveats = ppSrc, true, TrustNodes, CaveatNodePortsOpen }))},
		{"pod→LB/ipMode Proxy/ETP Cluster/passthrough", pod(ExternalCluster, IPModeProxy, LBPassthrough, true), proxyMode(extCluster)},
		{"pod→LB/ipMode Proxy/ETP Local/PROXY: through the LB with its header", pod(ExternalLocal, IPModeProxy, LBProxyProtocol, true),
			proxyMode(with(extLocal, func(a *answer) { a.peer, a.client, a.pp, a.trust = PeerLoadBalancer, ppSrc, true, TrustLoadBalancers }))},
		{"pod→LB/ipMode Proxy/ETP Local/XFF", pod(ExternalLocal, IPModeProxy, LBXForwardedFor, true),
			proxyMode(with(extLocal, func(a *answer) {
				a.peer, a.client, a.trust, a.header = PeerLoadBalancer, xff, TrustLoadBalancers, "X-Forwarded-For"
			}))},
		{"pod→LB/ipMode Proxy/ETP Local/full proxy", pod(ExternalLocal, IPModeProxy, LBFullProxy, true),
			proxyMode(with(extLocal, func(a *answer) { a.peer = PeerLoadBalancer }))},
		{"pod→LB/ipMode Proxy/ETP Local without local endpoint: dropped like external traffic", pod(ExternalLocal, IPModeProxy, LBPassthrough, false), proxyMode(extDrop)},

		{"unknown path value: not exposed", Case{Type: TypeLoadBalancer, Path: Path(200)}, notExposedAnswer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want.expectation(tt.c), Expect(tt.c), "Expect(%+v)", tt.c)
		})
	}
}

// allCases enumerates every combination of the model's inputs.
func allCases(yield func(Case) bool) {
	for typ := range ServiceType(len(serviceTypeNames)) {
		for etp := range ExternalTrafficPolicy(2) {
			for itp := range InternalTrafficPolicy(2) {
				for td := range TrafficDistribution(len(distributionNames)) {
					for m := range IPMode(2) {
						for p := range Path(len(pathNames)) {
							for lb := range LBKind(len(lbKindNames)) {
								for _, local := range []bool{false, true} {
									if !yield(Case{typ, etp, itp, td, m, p, lb, local}) {
										return
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

var (
	testClient = netip.MustParseAddrPort("203.0.113.7:40001")
	testForged = netip.MustParseAddrPort("198.51.100.66:1")
	testNode   = netip.MustParseAddrPort("10.0.0.11:31883")
	testLB     = netip.MustParseAddrPort("192.0.2.10:5000")
	testNet    = Network{
		Nodes:         clientip.MustParsePrefixSet("10.0.0.0/24"),
		LoadBalancers: clientip.MustParsePrefixSet("192.0.2.0/24"),
	}
)

// simulate builds what the backend receives on e's path from testClient,
// and the same with forged layers from a client that dials the backend
// directly.
func simulate(e Expectation) (real, forged clientip.Transport, realH, forgedH http.Header) {
	switch e.Peer {
	case PeerClient:
		real.Peer = testClient
	case PeerNode:
		real.Peer = testNode
	case PeerLoadBalancer, PeerUnknown:
		real.Peer = testLB
	}
	if e.ProxyHeader {
		real.Proxy = testClient
	}
	realH = http.Header{}
	if e.Client == xff {
		realH.Set("X-Forwarded-For", testClient.Addr().String())
	}
	forged = clientip.Transport{Peer: testClient, Proxy: testForged}
	forgedH = http.Header{"X-Forwarded-For": {testForged.Addr().String()}}
	return
}

// TestExpectEveryCase checks invariants over every combination, and uses
// clientip itself as the oracle: the recipe recovers the client from the
// layers the path delivers, flags a lost client instead of naming a node or
// a load balancer, and never believes layers forged by a client that dials
// the backend directly.
func TestExpectEveryCase(t *testing.T) {
	n := 0
	for c := range allCases {
		n++
		e := Expect(c)
		require.Equal(t, c, e.Case, "%+v: Case not echoed", c)
		for _, s := range []string{e.Rule, e.String(), e.Route(), e.Fallback()} {
			require.NotEmpty(t, s, "%+v: empty rule or description", c)
		}
		delivered := e.Outcome == Delivered
		require.Equal(t, delivered, e.Peer != PeerNone, "%+v: outcome %v with peer %v", c, e.Outcome, e.Peer)
		require.Equal(t, delivered, e.Endpoints != EndpointsNone, "%+v: outcome %v with endpoints %v", c, e.Outcome, e.Endpoints)
		if !delivered {
			require.Equal(t, lost, e.Client, "%+v: %v but a client", c, e.Outcome)
			require.Zero(t, e.Trust, "%+v: %v but trust", c, e.Outcome)
			require.False(t, e.ProxyHeader, "%+v: %v but a PROXY header", c, e.Outcome)
		}
		if e.Outcome == Dropped {
			require.Contains(t, e.Rule, "DROP", "%+v: dropped without a DROP rule", c)
		}
		if e.Caveats&CaveatProxyHeaderFromClient != 0 {
			require.True(t, e.ProxyHeader && e.Client == sock && e.Trust == TrustLoadBalancers, "%+v: a header from the client is discarded", c)
		} else {
			require.Equal(t, e.Client == ppSrc, e.ProxyHeader, "%+v: client in %v, PROXY header", c, e.Client)
		}
		if e.Trust&TrustNodes != 0 {
			require.NotZero(t, e.Caveats&CaveatNodePortsOpen, "%+v: trusts nodes without the node-port caveat", c)
		}
		cfg, err := e.Config(testNet)
		require.NoError(t, err, "%+v: Config", c)
		r, err := clientip.New(cfg)
		require.NoError(t, err, "%+v: clientip.New", c)
		if !delivered {
			continue
		}
		real, forged, realH, forgedH := simulate(e)
		res, err := r.Resolve(real, realH)
		switch {
		case e.Recoverable():
			require.NoError(t, err, "%+v: recipe", c)
			require.Equal(t, testClient.Addr(), res.Client, "%+v: recipe resolves the client", c)
			require.Equal(t, e.Client, res.Source, "%+v: recipe resolves the client from", c)
		case e.Peer == PeerClient:
			require.Failf(t, "client on the socket but not recoverable", "%+v", c)
		default:
			require.ErrorIs(t, err, clientip.ErrMasqueraded, "%+v: lost client resolves to %v", c, res.Client)
		}
		res, err = r.Resolve(forged, forgedH)
		require.NoError(t, err, "%+v: forged layers from a direct client", c)
		require.Equal(t, testClient.Addr(), res.Client, "%+v: forged layers from a direct client", c)
	}
	require.Equal(t, 4*2*2*4*2*4*6*2, n, "enumerated cases")
}

func TestConfigMissingAddresses(t *testing.T) {
	tests := []struct {
		name string
		c    Case
		n    Network
	}{
		{"Local/PROXY needs the load balancers", Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathLoadBalancer, LB: LBProxyProtocol, LocalEndpoint: true},
			Network{Nodes: testNet.Nodes}},
		{"Cluster/PROXY needs the nodes", Case{Type: TypeLoadBalancer, Path: PathLoadBalancer, LB: LBProxyProtocol, LocalEndpoint: true},
			Network{LoadBalancers: testNet.LoadBalancers}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Expect(tt.c).Config(tt.n)
			require.ErrorIs(t, err, ErrMissingAddresses)
		})
	}
	// A lost client needs no addresses: the zero Network gives the zero Config.
	cfg, err := Expect(Case{Type: TypeNodePort, Path: PathNodePort}).Config(Network{})
	require.NoError(t, err)
	require.Zero(t, cfg.TrustedProxies.Len(), "want the zero Config: %+v", cfg)
	require.Zero(t, cfg.Masquerade.Len(), "want the zero Config: %+v", cfg)
	require.Empty(t, cfg.Header, "want the zero Config: %+v", cfg)
}

func TestExpectNoAllocs(t *testing.T) {
	c := Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathPodToLoadBalancerIP, IPMode: IPModeProxy, LB: LBXForwardedFor, LocalEndpoint: true}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = Expect(c) }), "Expect allocates")
}

func TestEnumText(t *testing.T) {
	type textEnum interface {
		MarshalText() ([]byte, error)
		String() string
	}
	check := func(t *testing.T, v textEnum, unmarshal func([]byte) (textEnum, error)) {
		t.Helper()
		b, err := v.MarshalText()
		require.NoError(t, err, "%v: MarshalText", v)
		require.Equal(t, v.String(), string(b), "MarshalText and String")
		back, err := unmarshal(b)
		require.NoError(t, err, "round trip of %q", b)
		require.Equal(t, v, back, "round trip of %q", b)
	}
	for v := range ServiceType(len(serviceTypeNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x ServiceType; err := x.UnmarshalText(b); return x, err })
	}
	for v := range ExternalTrafficPolicy(2) {
		check(t, v, func(b []byte) (textEnum, error) {
			var x ExternalTrafficPolicy
			err := x.UnmarshalText(b)
			return x, err
		})
	}
	for v := range InternalTrafficPolicy(2) {
		check(t, v, func(b []byte) (textEnum, error) {
			var x InternalTrafficPolicy
			err := x.UnmarshalText(b)
			return x, err
		})
	}
	for v := range TrafficDistribution(len(distributionNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x TrafficDistribution; err := x.UnmarshalText(b); return x, err })
	}
	for v := range IPMode(2) {
		check(t, v, func(b []byte) (textEnum, error) { var x IPMode; err := x.UnmarshalText(b); return x, err })
	}
	for v := range Path(len(pathNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x Path; err := x.UnmarshalText(b); return x, err })
	}
	for v := range LBKind(len(lbKindNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x LBKind; err := x.UnmarshalText(b); return x, err })
	}
	for v := range Outcome(len(outcomeNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x Outcome; err := x.UnmarshalText(b); return x, err })
	}
	for v := range Peer(len(peerNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x Peer; err := x.UnmarshalText(b); return x, err })
	}
	for v := range Endpoints(len(endpointsNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x Endpoints; err := x.UnmarshalText(b); return x, err })
	}
	for v := range HealthCheck(len(healthNames)) {
		check(t, v, func(b []byte) (textEnum, error) { var x HealthCheck; err := x.UnmarshalText(b); return x, err })
	}

	// The Kubernetes defaults: an empty field means the zero value.
	var etp ExternalTrafficPolicy = ExternalLocal
	require.NoError(t, etp.UnmarshalText(nil))
	require.Equal(t, ExternalCluster, etp, "empty externalTrafficPolicy")
	var lbk LBKind
	require.ErrorIs(t, lbk.UnmarshalText([]byte("proxyprotocol")), ErrUnknownValue, "spellings are case-sensitive, like the API")
	_, err := LBKind(99).MarshalText()
	require.ErrorIs(t, err, ErrUnknownValue, "MarshalText of an out-of-range value")
	require.Equal(t, "Path(99)", Path(99).String(), "String of an out-of-range value")
}

func TestExpectationSentences(t *testing.T) {
	tests := []struct {
		c    Case
		want []string
	}{
		{Case{Type: TypeLoadBalancer, Path: PathLoadBalancer, LB: LBPassthrough, LocalEndpoint: true},
			[]string{"External client via the load balancer, LoadBalancer Service (L4 passthrough load balancer, ipMode VIP), externalTrafficPolicy Cluster:", "the backend sees the node address (masqueraded)", "cannot be recovered", "Rule: KUBE-EXT-<svc>: -j KUBE-MARK-MASQ"}},
		{Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathLoadBalancer, LB: LBUnknown, LocalEndpoint: true},
			[]string{"depends on the load balancer's kind", "Note: the load balancer's kind is unknown"}},
		{Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathLoadBalancer, LB: LBProxyProtocol, LocalEndpoint: true},
			[]string{"survives in the PROXY header; clientip: trust load-balancers, PROXY listener."}},
		{Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathLoadBalancer, LB: LBProxyProtocol},
			[]string{"dropped: the node has no local endpoint.", "KUBE-EXTERNAL-SERVICES"}},
		{Case{Type: TypeClusterIP, Path: PathNodePort}, []string{"the path does not exist."}},
		{Case{Type: TypeClusterIP, Internal: InternalLocal, Distribution: PreferSameNode, Path: PathClusterIP, LocalEndpoint: true},
			[]string{"internalTrafficPolicy Local, trafficDistribution PreferSameNode: delivered to node-local endpoints only"}},
	}
	for _, tt := range tests {
		s := Expect(tt.c).String()
		for _, w := range tt.want {
			assert.Contains(t, s, w, "%+v", tt.c)
		}
	}
}

func TestExpectationLogValue(t *testing.T) {
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("expect", "answer", Expect(Case{Type: TypeNodePort, Path: PathNodePort}))
	for _, w := range []string{"answer.outcome=Delivered", "answer.peer=Node", "answer.client=none", "answer.trust=none"} {
		assert.Contains(t, b.String(), w, "log line")
	}
}

// TestNLBInstanceTargetsBothFamilies pins the recipe for an AWS NLB with
// instance targets and proxy protocol v2 under externalTrafficPolicy Local
// against clientip itself: an IPv4 client connects from its own address
// with a header naming itself, which only the socket may vouch for; an
// IPv6 client of a dual-stack NLB reaches an IPv4 target from the load
// balancer's address ("Load balancer IPv4 address", AWS's client IP
// preservation table), named only in the header.
func TestNLBInstanceTargetsBothFamilies(t *testing.T) {
	e := Expect(Case{Type: TypeLoadBalancer, External: ExternalLocal, Path: PathLoadBalancer, LB: LBPassthroughProxyProtocol, LocalEndpoint: true})
	cfg, err := e.Config(testNet)
	require.NoError(t, err)
	r, err := clientip.New(cfg)
	require.NoError(t, err)
	v6 := netip.MustParseAddrPort("[2001:db8::7]:40001")
	for _, tt := range []struct {
		name   string
		tr     clientip.Transport
		client netip.Addr
		source clientip.Source
	}{
		{"IPv4 client, its own address", clientip.Transport{Peer: testClient, Proxy: testClient}, testClient.Addr(), sock},
		{"IPv6 client, from the load balancer", clientip.Transport{Peer: testLB, Proxy: v6}, v6.Addr(), ppSrc},
		{"a client forging a header", clientip.Transport{Peer: testClient, Proxy: testForged}, testClient.Addr(), sock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Resolve(tt.tr, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.client, res.Client)
			assert.Equal(t, tt.source, res.Source)
		})
	}
}
