package explain

import (
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// visit is one simulated request: its transport and headers, and the
// address of the real client (invalid when the client is lost, as behind a
// masquerading node).
type visit struct {
	t      clientip.Transport
	h      http.Header
	client netip.Addr
	forged bool // the client wrote forwarding headers of its own
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// clientAddr returns the i-th simulated client: documentation addresses.
func clientAddr(i int) netip.Addr {
	if i%2 == 0 {
		return netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i/2%250)})
	}
	return netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i/2%250)})
}

func ap(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

// inSnapshot returns the n-th address inside the named snapshot's prefixes.
func inSnapshot(t *testing.T, name string, n int) netip.Addr {
	s, ok := ranges.SnapshotNamed(name)
	require.True(t, ok, name)
	ps := s.Set.Prefixes()
	var v4 []netip.Prefix
	for _, p := range ps {
		if p.Addr().Is4() && p.Bits() <= 24 {
			v4 = append(v4, p)
		}
	}
	require.NotEmpty(t, v4, name)
	return v4[n%len(v4)].Addr().Next().Next()
}

// traffic simulates n requests of a deployment: gen(i) builds the i-th.
func traffic(n int, gen func(i int, rng *rand.Rand) visit) []visit {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]visit, n)
	for i := range out {
		out[i] = gen(i, rng)
	}
	return out
}

func watch(t *testing.T, cfg AdvisorConfig, vs []visit) Advice {
	a, err := NewAdvisor(cfg)
	require.NoError(t, err)
	// A fixed sketch key, so that the distinct-client estimates (within
	// about 13% for a random key) are the same on every run.
	a.seed = 0x9e3779b97f4a7c15
	for i, v := range vs {
		a.ObserveAt(t0.Add(time.Duration(i)*time.Millisecond), v.t, v.h)
	}
	adv := a.Advice()
	_, err = clientip.New(adv.Config)
	require.NoError(t, err, "the proposal is a valid configuration")
	return adv
}

// checkProposal resolves every visit with the proposal: each client that
// can be known is named, and nothing a client forged is ever the answer.
func checkProposal(t *testing.T, adv Advice, vs []visit) {
	t.Helper()
	r := clientip.MustNew(adv.Config)
	for _, v := range vs {
		res, err := r.Resolve(v.t, v.h)
		if !v.client.IsValid() {
			assert.True(t, err != nil || res.Masqueraded, "a lost client must not be named: %v for %v %q", res, v.t, v.h)
			continue
		}
		require.NoError(t, err, "%v %q\nproposal:\n%s", v.t, v.h, adv.Go)
		require.Equal(t, v.client, res.Client, "%v %q\nproposal:\n%s", v.t, v.h, adv.Go)
	}
}

func kinds(adv Advice) map[FindingKind]Severity {
	m := map[FindingKind]Severity{}
	for _, f := range adv.Findings {
		if s, ok := m[f.Kind]; !ok || f.Severity > s {
			m[f.Kind] = f.Severity
		}
	}
	return m
}

var (
	nginx1 = netip.MustParseAddr("10.0.0.1")
	nginx2 = netip.MustParseAddr("10.0.0.2")
)

// Behind two nginx proxies that append X-Forwarded-For, with health checks
// and clients that forge the header.
func nginxTraffic() []visit {
	return traffic(2000, func(i int, rng *rand.Rand) visit {
		peer := nginx1
		if i%2 == 1 {
			peer = nginx2
		}
		if i%100 == 0 { // a health check from the proxy itself
			return visit{t: clientip.Transport{Peer: ap(peer, 40000)}, h: http.Header{}}
		}
		c := clientAddr(rng.IntN(400))
		xff := c.String()
		forged := i%7 == 0
		if forged {
			xff = "127.0.0.1, " + xff
		}
		return visit{t: clientip.Transport{Peer: ap(peer, 40000)}, h: http.Header{"X-Forwarded-For": {xff}}, client: c, forged: forged}
	})
}

func TestAdviseNginx(t *testing.T) {
	vs := nginxTraffic()
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, "10.0.0.1/32,10.0.0.2/32", adv.Config.TrustedProxies.String())
	assert.Equal(t, "X-Forwarded-For", adv.Config.Header)
	assert.Empty(t, adv.Preset)
	require.Len(t, adv.Peers, 2)
	distinct := map[netip.Addr]map[netip.Addr]bool{}
	for _, v := range vs {
		if v.client.IsValid() {
			if distinct[v.t.Peer.Addr()] == nil {
				distinct[v.t.Peer.Addr()] = map[netip.Addr]bool{}
			}
			distinct[v.t.Peer.Addr()][v.client] = true
		}
	}
	for _, p := range adv.Peers {
		assert.Equal(t, "proxy", p.Role)
		want := len(distinct[p.Address])
		assert.InDelta(t, want, p.Clients, float64(want)/4, "distinct clients behind %v", p.Address)
	}
	assert.Contains(t, kinds(adv), FindingProxy)
	assert.Contains(t, kinds(adv), FindingHeader)
	assert.NotContains(t, kinds(adv), FindingFewSamples)
	// Health checks have no client; every other request resolves to its own.
	var proxied []visit
	for _, v := range vs {
		if v.client.IsValid() {
			proxied = append(proxied, v)
		}
	}
	checkProposal(t, adv, proxied)
}

// Cloudflare connects to the origin itself and sets CF-Connecting-IP.
func TestAdviseCloudflareEdge(t *testing.T) {
	vs := traffic(1000, func(i int, rng *rand.Rand) visit {
		c := clientAddr(rng.IntN(300))
		edge := inSnapshot(t, "cloudflare", i%5)
		return visit{t: clientip.Transport{Peer: ap(edge, 443)},
			h: http.Header{"Cf-Connecting-Ip": {c.String()}, "X-Forwarded-For": {c.String()}}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, "cloudflare", adv.Preset)
	assert.Equal(t, "Cf-Connecting-Ip", adv.Config.Header)
	cf, _ := ranges.SnapshotNamed("cloudflare")
	assert.Equal(t, cf.Set.String(), adv.Config.TrustedProxies.String())
	assert.Contains(t, adv.Go, "TrustedProxies: presets.Cloudflare.Ranges(),")
	assert.Contains(t, adv.Go, "presets.New(presets.Config{Platform: presets.Cloudflare, Topology: presets.Direct()})")
	assert.Contains(t, adv.Go, `Header:         "CF-Connecting-IP"`)
	assert.Contains(t, kinds(adv), FindingPreset)
	checkProposal(t, adv, vs)
}

// nginx behind Cloudflare: nginx appends Cloudflare's edge address.
func TestAdviseBehindCloudflare(t *testing.T) {
	vs := traffic(1000, func(i int, rng *rand.Rand) visit {
		c := clientAddr(rng.IntN(300))
		edge := inSnapshot(t, "cloudflare", i%7)
		return visit{t: clientip.Transport{Peer: ap(nginx1, 40000)},
			h: http.Header{"Cf-Connecting-Ip": {c.String()}, "X-Forwarded-For": {c.String() + ", " + edge.String()}}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, "cloudflare", adv.Preset)
	assert.Equal(t, "X-Forwarded-For", adv.Config.Header, "a list header walks through both layers")
	assert.True(t, adv.Config.TrustedProxies.Contains(nginx1))
	assert.Contains(t, adv.Go, "Topology: presets.BehindIngress(ingress)")
	checkProposal(t, adv, vs)
	// A client that reaches nginx without Cloudflare and forges
	// CF-Connecting-IP gets nowhere under the proposal.
	r := clientip.MustNew(adv.Config)
	res, err := r.Resolve(clientip.Transport{Peer: ap(nginx1, 1)}, http.Header{
		"Cf-Connecting-Ip": {"192.0.2.66"}, "X-Forwarded-For": {"192.0.2.66, 203.0.113.250"}})
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("203.0.113.250"), res.Client)
}

// Azure Front Door connects from its shared ranges and appends the
// client's socket address to X-Forwarded-For; X-Azure-ClientIP, which it
// takes from a client's X-Forwarded-For, is not what the proposal reads.
func TestAdviseAzureFrontDoor(t *testing.T) {
	vs := traffic(1000, func(i int, rng *rand.Rand) visit {
		c := clientAddr(rng.IntN(300))
		edge := inSnapshot(t, "azure-frontdoor-backend", i%9)
		return visit{t: clientip.Transport{Peer: ap(edge, 443)},
			h: http.Header{"X-Azure-Clientip": {c.String()}, "X-Forwarded-For": {c.String()}}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, "azure-front-door", adv.Preset)
	assert.Equal(t, "X-Forwarded-For", adv.Config.Header)
	assert.Contains(t, adv.Go, "presets.New(presets.Config{Platform: presets.AzureFrontDoor, Topology: presets.Direct(), FrontDoorIDs: []string{id}})")
	checkProposal(t, adv, vs)
	// A client whose own X-Forwarded-For decides X-Azure-ClientIP gets
	// nowhere under the proposal.
	res, err := clientip.MustNew(adv.Config).Resolve(clientip.Transport{Peer: ap(inSnapshot(t, "azure-frontdoor-backend", 0), 443)},
		http.Header{"X-Azure-Clientip": {"192.0.2.66"}, "X-Forwarded-For": {"192.0.2.66, 203.0.113.250"}})
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("203.0.113.250"), res.Client)
}

// Google's external Application Load Balancer appends "client, lb-ip" and
// connects from its front ends' ranges.
func TestAdviseGoogleLoadBalancer(t *testing.T) {
	lbIP := netip.MustParseAddr("203.0.113.200")
	gfe := []netip.Addr{netip.MustParseAddr("35.191.10.20"), netip.MustParseAddr("130.211.1.9")}
	vs := traffic(1000, func(i int, rng *rand.Rand) visit {
		c := clientAddr(2*rng.IntN(300) + 1) // 198.51.100.0/24: never the LB address
		return visit{t: clientip.Transport{Peer: ap(gfe[i%2], 40000)},
			h: http.Header{"X-Forwarded-For": {c.String() + ", " + lbIP.String()}}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, "google-load-balancer", adv.Preset)
	assert.True(t, adv.Config.TrustedProxies.Contains(lbIP), "the load balancer's own address\n%s", adv.Go)
	assert.Equal(t, "X-Forwarded-For", adv.Config.Header)
	checkProposal(t, adv, vs)
}

func TestAdviseProxyProtocol(t *testing.T) {
	lb := netip.MustParseAddr("192.0.2.10")
	vs := traffic(500, func(i int, rng *rand.Rand) visit {
		c := clientAddr(rng.IntN(300))
		return visit{t: clientip.Transport{Peer: ap(lb, 33000), Proxy: ap(c, 50000)}, h: http.Header{}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, "192.0.2.10/32", adv.Config.TrustedProxies.String())
	assert.Empty(t, adv.Config.Header)
	checkProposal(t, adv, vs)
}

func TestAdviseDirect(t *testing.T) {
	vs := traffic(500, func(i int, rng *rand.Rand) visit {
		c := clientAddr(rng.IntN(300))
		return visit{t: clientip.Transport{Peer: ap(c, 50000)}, h: http.Header{}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.Equal(t, clientip.Config{}, adv.Config)
	assert.Equal(t, "cfg := clientip.Config{\n}\n", adv.Go)
	assert.Contains(t, kinds(adv), FindingDirect)
	checkProposal(t, adv, vs)
}

// externalTrafficPolicy: Cluster without a PROXY header: the nodes stand
// in for clients who are lost.
func TestAdviseNodeSNAT(t *testing.T) {
	nodes := clientip.MustParsePrefixSet("10.1.0.0/24")
	vs := traffic(500, func(i int, rng *rand.Rand) visit {
		return visit{t: clientip.Transport{Peer: ap(netip.AddrFrom4([4]byte{10, 1, 0, byte(7 + i%3)}), 61000)}, h: http.Header{}}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), Nodes: nodes}, vs)
	assert.Equal(t, nodes, adv.Config.Masquerade)
	assert.Equal(t, SeverityWarning, kinds(adv)[FindingNodeSNAT])
	checkProposal(t, adv, vs)
}

func TestAdviseDangers(t *testing.T) {
	t.Run("a trusted peer that sends no forwarding headers", func(t *testing.T) {
		vs := append(nginxTraffic(), traffic(300, func(i int, rng *rand.Rand) visit {
			return visit{t: clientip.Transport{Peer: ap(netip.MustParseAddr("10.0.0.50"), 1)}, h: http.Header{}}
		})...)
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(xffConfig)}, vs)
		assert.Equal(t, SeverityDanger, kinds(adv)[FindingTrustedWithoutHeaders])
		found := false
		for _, f := range adv.Findings {
			if f.Kind == FindingTrustedWithoutHeaders && f.Peer == netip.MustParseAddr("10.0.0.50") {
				found = f.Severity == SeverityDanger
			}
		}
		assert.True(t, found, "the danger names 10.0.0.50: %+v", adv.Findings)
		assert.Equal(t, SeverityDanger, adv.Findings[0].Severity, "dangers come first")
	})
	t.Run("a configured header the proxies never write", func(t *testing.T) {
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{TrustedProxies: proxies10, Header: "X-Real-IP"})}, nginxTraffic())
		assert.Equal(t, SeverityDanger, kinds(adv)[FindingHeaderNeverWritten])
		assert.Equal(t, "X-Forwarded-For", adv.Config.Header)
	})
	t.Run("a trusted set that contains the clients: leftmost answers", func(t *testing.T) {
		wide := clientip.Config{TrustedProxies: proxies10.Union(clientip.MustParsePrefixSet("203.0.113.0/24, 198.51.100.0/24")), Header: "X-Forwarded-For"}
		vs := traffic(1000, func(i int, rng *rand.Rand) visit {
			c := clientAddr(rng.IntN(300))
			xff := c.String()
			if i%5 == 0 {
				xff = "192.0.2.77, " + xff // forged: the walk steps over the real client
			}
			return visit{t: clientip.Transport{Peer: ap(nginx1, 1)}, h: http.Header{"X-Forwarded-For": {xff}}, client: c}
		})
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(wide)}, vs)
		k := kinds(adv)
		assert.Equal(t, SeverityDanger, k[FindingLeftmost])
		assert.Equal(t, SeverityDanger, k[FindingTooWide], "most requests had every hop trusted")
		checkProposal(t, adv, vs) // the proposal trusts nginx alone
	})
	t.Run("public space in TrustedProxies", func(t *testing.T) {
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("0.0.0.0/1, 10.0.0.0/8"), Header: "X-Forwarded-For"})}, nginxTraffic())
		assert.Equal(t, SeverityDanger, kinds(adv)[FindingTooWide])
	})
	t.Run("a client that forges X-Forwarded-For is not taken for a proxy", func(t *testing.T) {
		forger := netip.MustParseAddr("203.0.113.66")
		vs := append(nginxTraffic(), traffic(200, func(i int, rng *rand.Rand) visit {
			return visit{t: clientip.Transport{Peer: ap(forger, 1)}, h: http.Header{"X-Forwarded-For": {"10.0.0.9"}}, client: forger}
		})...)
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
		assert.False(t, adv.Config.TrustedProxies.Contains(forger))
		assert.Equal(t, SeverityWarning, kinds(adv)[FindingUnclear])
	})
	t.Run("hop-count mode trusts direct peers", func(t *testing.T) {
		vs := append(nginxTraffic(), traffic(200, func(i int, rng *rand.Rand) visit {
			c := clientAddr(i)
			return visit{t: clientip.Transport{Peer: ap(c, 1)}, h: http.Header{}, client: c}
		})...)
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{TrustedHops: 1, Header: "X-Forwarded-For"})}, vs)
		assert.Equal(t, SeverityDanger, kinds(adv)[FindingTrustedWithoutHeaders])
	})
	t.Run("few samples", func(t *testing.T) {
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, nginxTraffic()[:20])
		assert.Equal(t, SeverityWarning, kinds(adv)[FindingFewSamples])
	})
}

// The leftmost finding compares the hop that answered with the depth of
// the header the configuration reads. When the proxies write both
// X-Forwarded-For and Forwarded (RFC 7239) and the configuration reads
// Forwarded, counting X-Forwarded-For instead missed a client-written
// Forwarded entry the walk stepped over (the trusted set holds clients), and
// took a correct answer for a leftmost one when a client lengthened
// X-Forwarded-For alone.
func TestAdviseLeftmostCountsTheConfiguredHeader(t *testing.T) {
	t.Run("a forged Forwarded entry answered, X-Forwarded-For untouched", func(t *testing.T) {
		wide := clientip.Config{TrustedProxies: proxies10.Union(clientip.MustParsePrefixSet("198.51.100.0/24")), Header: "Forwarded"}
		vs := traffic(1000, func(i int, rng *rand.Rand) visit {
			c := clientAddr(rng.IntN(300))
			fwd := "for=" + c.String()
			if i%5 == 0 {
				fwd = "for=192.0.2.77, " + fwd // forged: the walk steps over a client in the trusted set
			}
			return visit{t: clientip.Transport{Peer: ap(nginx1, 1)}, h: http.Header{"X-Forwarded-For": {c.String()}, "Forwarded": {fwd}}, client: c}
		})
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(wide)}, vs)
		assert.Equal(t, SeverityDanger, kinds(adv)[FindingLeftmost], "%+v", adv.Findings)
	})
	t.Run("a forged X-Forwarded-For entry, Forwarded answered correctly", func(t *testing.T) {
		cfg := clientip.Config{TrustedProxies: proxies10, Header: "Forwarded"}
		vs := traffic(1000, func(i int, rng *rand.Rand) visit {
			c := clientAddr(rng.IntN(300))
			xff := c.String()
			if i%5 == 0 {
				xff = "192.0.2.77, " + xff // the client's own X-Forwarded-For, which the configuration does not read
			}
			// An inner proxy, 10.0.0.9, writes Forwarded; nginx appends.
			return visit{t: clientip.Transport{Peer: ap(nginx1, 1)}, h: http.Header{"X-Forwarded-For": {xff}, "Forwarded": {"for=" + c.String() + ", for=10.0.0.9"}}, client: c}
		})
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(cfg)}, vs)
		_, found := kinds(adv)[FindingLeftmost]
		assert.False(t, found, "%+v", adv.Findings)
		checkProposal(t, adv, vs)
	})
}

// The peer table never grows beyond MaxPeers, and a busy proxy keeps its
// place among a flood of one-off direct clients.
func TestAdvisorBoundedMemory(t *testing.T) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), MaxPeers: 8})
	require.NoError(t, err)
	for i := range 20_000 {
		if i%3 == 0 {
			a.ObserveAt(t0, clientip.Transport{Peer: ap(nginx1, 1)}, http.Header{"X-Forwarded-For": {clientAddr(i).String()}})
			continue
		}
		peer := netip.AddrFrom4([4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)})
		a.ObserveAt(t0, clientip.Transport{Peer: ap(peer, 1)}, nil)
	}
	a.mu.Lock()
	n := len(a.peers)
	var ups int
	for _, p := range a.peers {
		ups += len(p.ups)
	}
	a.mu.Unlock()
	assert.LessOrEqual(t, n, 8)
	assert.LessOrEqual(t, ups, 8*maxUpstreams)
	adv := a.Advice()
	assert.Equal(t, nginx1, adv.Peers[0].Address)
	assert.Positive(t, adv.EvictedPeers)
	assert.Contains(t, kinds(adv), FindingFewSamples, "the overflow is reported")
}

func TestAdvisorSampling(t *testing.T) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), SampleEvery: 10, Window: time.Minute})
	require.NoError(t, err)
	for i := range 1000 {
		a.ObserveAt(t0.Add(time.Duration(i)*10*time.Millisecond), clientip.Transport{Peer: ap(nginx1, 1)}, nil)
	}
	adv := a.Advice()
	assert.Equal(t, uint64(1000), adv.Seen)
	assert.Equal(t, uint64(100), adv.Sampled)
	assert.Equal(t, 10, adv.SampleEvery)

	// Past the window, nothing is counted.
	for range 100 {
		a.ObserveAt(t0.Add(2*time.Minute), clientip.Transport{Peer: ap(nginx1, 1)}, nil)
	}
	assert.Equal(t, uint64(1000), a.Advice().Seen)
	a.Reset()
	assert.Zero(t, a.Advice().Seen)
	assert.Empty(t, a.Advice().Peers)
}

func TestAdvisorConcurrent(t *testing.T) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), MaxPeers: 4})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				a.Observe(clientip.Transport{Peer: ap(clientAddr(g*1000+i), 1)}, http.Header{"X-Forwarded-For": {"198.51.100.1"}})
				if i%100 == 0 {
					a.Advice()
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, uint64(2000), a.Advice().Sampled)
}

func TestNewAdvisorValidation(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{})
	for _, cfg := range []AdvisorConfig{
		{},
		{Trust: trust, SampleEvery: -1},
		{Trust: trust, MaxPeers: maxMaxPeers + 1},
		{Trust: trust, MinClients: -1},
		{Trust: trust, Window: -time.Second},
	} {
		_, err := NewAdvisor(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", cfg)
	}
}

func TestSketch(t *testing.T) {
	seed := uint64(0x5eed)
	for _, n := range []int{0, 1, 2, 3, 5, 10, 50, 200, 1000, 5000} {
		var s sketch
		for i := range n {
			for range 3 { // repeats do not count
				s.add(seed, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
			}
		}
		got := s.estimate()
		tolerance := max(1, n*30/100)
		assert.InDelta(t, n, got, float64(tolerance), "distinct %d", n)
	}
}

func TestPresetClasses(t *testing.T) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})})
	require.NoError(t, err)
	require.Len(t, a.presets, classInternal, "every preset has a snapshot and a class below classInternal")
	for i, p := range a.presets {
		assert.Equal(t, i, a.classify(p.set.Prefixes()[0].Addr()), p.name)
		assert.Equal(t, p.name, a.className(i))
	}
	assert.Equal(t, classInternal, a.classify(netip.MustParseAddr("10.1.2.3")))
	assert.Equal(t, classPublic, a.classify(netip.MustParseAddr("203.0.113.9")))
	assert.Equal(t, classUnreadable, a.classify(netip.Addr{}))
}

func TestAdviceText(t *testing.T) {
	vs := nginxTraffic()
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{TrustedProxies: proxies10, Header: "X-Real-IP"})})
	require.NoError(t, err)
	a.seed = 1 // sketches estimate the same on every run
	for i, v := range vs {
		a.ObserveAt(t0.Add(time.Duration(i)*time.Millisecond), v.t, v.h)
	}
	adv := a.Advice()
	var b strings.Builder
	require.NoError(t, adv.WriteText(&b))
	golden(t, "advice-nginx.txt", []byte(b.String()))
}

// ObserveConn records a connection accepted through middleware.NewListener
// and ignores any other.
func TestAdvisorObserveConn(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{})
	c := acceptedConn(t, trust)
	a, err := NewAdvisor(AdvisorConfig{Trust: trust})
	require.NoError(t, err)
	a.ObserveConnAt(t0, c)
	other, peer := net.Pipe()
	defer other.Close()
	defer peer.Close()
	a.ObserveConnAt(t0, other)
	adv := a.Advice()
	assert.Equal(t, uint64(1), adv.Sampled)
	require.Len(t, adv.Peers, 1)
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), adv.Peers[0].Address)
	assert.Equal(t, "direct", adv.Peers[0].Role)
}

// A client that reaches the service directly and writes a different
// X-Forwarded-For on every request has as many "clients behind it" as a
// proxy. Trusting it would let it choose its address, so a public peer
// outside every platform's published ranges is never proposed for trust
// on the strength of the headers it sends: the advice names it instead.
func TestAdviseForgerWithRandomXFF(t *testing.T) {
	forger := netip.MustParseAddr("203.0.113.66")
	vs := traffic(1000, func(i int, rng *rand.Rand) visit {
		if i%4 == 0 {
			fake := netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(250))})
			return visit{t: clientip.Transport{Peer: ap(forger, 1)}, h: http.Header{"X-Forwarded-For": {fake.String()}}, client: forger, forged: true}
		}
		c := clientAddr(2*rng.IntN(300) + 1) // 198.51.100.0/24, never the forger
		return visit{t: clientip.Transport{Peer: ap(c, 50000)}, h: http.Header{}, client: c}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.False(t, adv.Config.TrustedProxies.Contains(forger), "the proposal trusts a client that forges X-Forwarded-For:\n%s", adv.Go)
	checkProposal(t, adv, vs)
	found := false
	for _, f := range adv.Findings {
		if f.Peer == forger && f.Severity >= SeverityWarning {
			found = true
		}
	}
	assert.True(t, found, "a warning names the peer: %+v", adv.Findings)
}

// Behind nginx, which appends its peer, one client writes a different
// X-Forwarded-For on every request: the rightmost entry (the client, as
// nginx saw it) is fixed and the second one varies, which is the shape of
// a fixed proxy layer. A public address in that layer, behind a proxy that
// is not a platform's edge, is the client itself: it is not proposed.
func TestAdviseForgedLayerBehindProxy(t *testing.T) {
	attacker := netip.MustParseAddr("203.0.113.66")
	vs := traffic(500, func(i int, rng *rand.Rand) visit {
		fake := netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(250))})
		return visit{t: clientip.Transport{Peer: ap(nginx1, 40000)},
			h: http.Header{"X-Forwarded-For": {fake.String() + ", " + attacker.String()}}, client: attacker, forged: true}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})}, vs)
	assert.True(t, adv.Config.TrustedProxies.Contains(nginx1))
	assert.False(t, adv.Config.TrustedProxies.Contains(attacker), "the proposal trusts the client behind nginx:\n%s", adv.Go)
	checkProposal(t, adv, vs)
	found := false
	for _, f := range adv.Findings {
		if f.Peer == nginx1 && f.Severity >= SeverityWarning && strings.Contains(f.Text, attacker.String()) {
			found = true
		}
	}
	assert.True(t, found, "a warning names the layer it did not trust: %+v", adv.Findings)
}

// TrustedProxies that hold public space are flagged however the prefix is
// written: one that starts in private space and runs past it (10.0.0.0/7
// is 10/8 and the public 11/8), one that starts in a platform's ranges and
// runs past them, and the NAT64 prefix (RFC 6052 64:ff9b::/96, RFC 8215
// 64:ff9b:1::/48), through which every IPv4 address is an IPv6 peer.
func TestAdviseTooWideHowEverWritten(t *testing.T) {
	cf, _ := ranges.SnapshotNamed("cloudflare")
	var cfWide netip.Prefix // a Cloudflare prefix, widened past its ranges
	for _, p := range cf.Set.Prefixes() {
		if p.Addr().Is4() && p.Bits() >= 13 {
			cfWide = netip.PrefixFrom(p.Addr(), 8).Masked()
			break
		}
	}
	require.True(t, cfWide.IsValid())
	// 2001:db8::/32 and /40: an IPv6 prefix shorter than a /48 (one end
	// site, RFC 6177) is an ISP's allocation, holding its customers, unless
	// a platform's published ranges cover it. 2001:0:c000:201::/64: a
	// Teredo server's prefix (RFC 4380) carries every IPv4 client that uses
	// that server in its last 32 bits.
	for _, wide := range []string{"10.0.0.0/7", cfWide.String(), "64:ff9b::/96", "64:ff9b::/100", "64:ff9b:1::/48", "2001:db8::/32", "2001:db8::/40", "2001:0:c000:201::/64"} {
		t.Run(wide, func(t *testing.T) {
			cfg := clientip.Config{TrustedProxies: proxies10.Union(clientip.MustParsePrefixSet(wide)), Header: "X-Forwarded-For"}
			adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(cfg)}, nginxTraffic())
			found := false
			for _, f := range adv.Findings {
				if f.Kind == FindingTooWide && f.Severity == SeverityDanger && strings.Contains(f.Text, wide) {
					found = true
				}
			}
			assert.True(t, found, "no danger names %s: %+v", wide, adv.Findings)
		})
	}
	// Internal space and a platform's own ranges are not public space.
	for _, narrow := range []string{"10.0.0.0/8", "100.64.0.0/10", "fc00::/7", "64:ff9b::c000:200/120", "2001:db8:1::/48", "2002:c000:201::/48", "2001:0:c000:201::c000:200/120"} {
		cfg := clientip.Config{TrustedProxies: proxies10.Union(clientip.MustParsePrefixSet(narrow)).Union(cf.Set), Header: "X-Forwarded-For"}
		adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(cfg)}, nginxTraffic())
		for _, f := range adv.Findings {
			assert.False(t, f.Kind == FindingTooWide && strings.Contains(f.Text, "TrustedProxies holds"), "%s: %s", narrow, f.Text)
		}
	}
}

// Under externalTrafficPolicy: Cluster the socket peer is a node, and a
// header that arrives through it was written by whoever reached the node
// port: the load balancer, or a client that bypassed it. When nodes carry
// headers in nearly every request (a load balancer that writes
// X-Forwarded-For, or clients that write their own in a flood), the
// Advisor proposes them as proxies, as trafficpolicy's recipe does for an
// X-Forwarded-For load balancer; it must say what that trust rests on,
// and call it a danger when some requests through the nodes carry no
// header at all: clients reach the node ports without the load balancer.
func TestAdviseNodeWithHeaders(t *testing.T) {
	nodes := clientip.MustParsePrefixSet("10.1.0.0/24")
	vs := traffic(1000, func(i int, rng *rand.Rand) visit {
		node := netip.AddrFrom4([4]byte{10, 1, 0, byte(7 + i%3)})
		if i%25 == 0 { // a client that reaches a node port directly: masqueraded
			return visit{t: clientip.Transport{Peer: ap(node, 61000)}, h: http.Header{}}
		}
		fake := netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(250))})
		return visit{t: clientip.Transport{Peer: ap(node, 61000)}, h: http.Header{"X-Forwarded-For": {fake.String()}}, forged: true}
	})
	adv := watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), Nodes: nodes}, vs)
	if !adv.Config.TrustedProxies.Contains(netip.MustParseAddr("10.1.0.7")) {
		return // not proposed: nothing to warn of
	}
	found := false
	for _, f := range adv.Findings {
		if f.Kind == FindingNodeSNAT && f.Severity == SeverityDanger && f.Peer == netip.MustParseAddr("10.1.0.7") {
			found = true
		}
	}
	assert.True(t, found, "no danger says that trusting node 10.1.0.7 believes whoever reaches its node port:\n%s\n%+v", adv.Go, adv.Findings)

	// Every request through the nodes carries the header: still a warning.
	var headed []visit
	for _, v := range vs {
		if len(v.h) > 0 {
			headed = append(headed, v)
		}
	}
	adv = watch(t, AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), Nodes: nodes}, headed)
	require.True(t, adv.Config.TrustedProxies.Contains(netip.MustParseAddr("10.1.0.7")), adv.Go)
	assert.Equal(t, SeverityWarning, kinds(adv)[FindingNodeSNAT], "%+v", adv.Findings)
}

// The advice document writes its lists as arrays, empty ones too, as it
// writes outcomes: a client of the schema never meets null for a list.
func TestAdviceEmptyListsAreArrays(t *testing.T) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})})
	require.NoError(t, err)
	adv := a.Advice()
	js, err := json.Marshal(&adv)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(js, &doc))
	for _, key := range []string{"outcomes", "peers", "findings"} {
		assert.IsType(t, []any{}, doc[key], "%s in %s", key, js)
	}
}
