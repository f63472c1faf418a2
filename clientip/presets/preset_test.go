package presets

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// Addresses of the tests: clients and attackers in documentation space,
// the ingress in private space.
var (
	client    = netip.MustParseAddr("198.51.100.7")
	client6   = netip.MustParseAddr("2001:db8::7")
	victim    = netip.MustParseAddr("192.0.2.1") // whom an attacker claims to be
	attacker  = netip.MustParseAddr("203.0.113.66")
	attacker6 = netip.MustParseAddr("2001:db8:bad::66")
	ingress   = clientip.MustParsePrefixSet("10.0.0.0/24")
	ingressIP = netip.MustParseAddr("10.0.0.5")
	rule      = netip.MustParseAddr("203.0.113.200") // a Google forwarding rule
	ownRanges = clientip.MustParsePrefixSet("198.18.0.0/24, 2001:db8:e::/48")
	fdid      = "a0a0a0a0-bbbb-cccc-dddd-e1e1e1e1e1e1"
)

// configFor returns a Config for p with what p requires: ownRanges for the
// platforms that publish none, a Front Door ID, a forwarding rule.
func configFor(p Platform, t Topology) Config {
	cfg := Config{Platform: p, Topology: t}
	switch p {
	case Akamai, Fly, Envoy:
		cfg.Ranges = ownRanges
	case AzureFrontDoor:
		cfg.FrontDoorIDs = []string{fdid}
	case GoogleLoadBalancer:
		cfg.ForwardingRules = clientip.MustParsePrefixSet(rule.String())
	}
	return cfg
}

// edgeAddr returns an address inside set of the family asked for.
func edgeAddr(t *testing.T, set clientip.PrefixSet, v6 bool) netip.Addr {
	t.Helper()
	for _, p := range set.Prefixes() {
		if p.Addr().Is6() == v6 {
			return p.Addr().Next()
		}
	}
	t.Fatalf("no prefix of the family in %v", set)
	return netip.Addr{}
}

type walkCase struct {
	name    string
	peer    netip.Addr
	h       http.Header
	want    netip.Addr
	src     clientip.Source
	wantErr error
}

func runWalks(t *testing.T, p *Preset, cases []walkCase) {
	t.Helper()
	r, err := clientip.New(p.Config())
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Resolve(clientip.Transport{Peer: netip.AddrPortFrom(tc.peer, 40000)}, tc.h)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Client)
			assert.Equal(t, tc.src, res.Source)
		})
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestDirect: each platform with the edge connecting to the service. The
// edge's header is believed only from the edge's ranges (the embedded
// snapshots, or the ranges given for the platforms without one).
func TestDirect(t *testing.T) {
	for _, plat := range Platforms() {
		if plat == CloudRun {
			continue // no ranges: TestCloudRun
		}
		t.Run(plat.String(), func(t *testing.T) {
			p, err := New(configFor(plat, Direct()))
			require.NoError(t, err)
			edge, edge6 := edgeAddr(t, p.Ranges(), false), edgeAddr(t, p.Ranges(), true)
			h := plat.Header()
			single := h != xff
			src := clientip.SourceHeader
			if !single {
				src = clientip.SourceXForwardedFor
			}
			// what the edge writes about c: the single header, or
			// X-Forwarded-For ending in c (Google adds its forwarding rule).
			wrote := func(prefix string, c netip.Addr) http.Header {
				v := c.String()
				if prefix != "" {
					v = prefix + ", " + v
				}
				if plat == GoogleLoadBalancer {
					v += ", " + rule.String()
				}
				if single {
					hd := hdr(h, c.String())
					if prefix != "" {
						hd.Set(xff, prefix+", "+c.String())
					}
					return hd
				}
				return hdr(xff, v)
			}
			cases := []walkCase{
				{name: "client through the edge", peer: edge, h: wrote("", client), want: client, src: src},
				{name: "IPv6 client through the edge", peer: edge, h: wrote("", client6), want: client6, src: src},
				{name: "through the edge's IPv6 address", peer: edge6, h: wrote("", client), want: client, src: src},
				{name: "client's own X-Forwarded-For before the edge's", peer: edge, h: wrote(victim.String(), client), want: client, src: src},
				{name: "forged header from a direct client", peer: attacker, h: hdr(h, victim.String(), xff, victim.String()),
					want: attacker, src: clientip.SourceSocket},
				{name: "forged header from a direct IPv6 client", peer: attacker6, h: hdr(h, victim.String(), xff, victim.String()),
					want: attacker6, src: clientip.SourceSocket},
				{name: "request from outside the edge ranges without headers", peer: attacker, h: http.Header{},
					want: attacker, src: clientip.SourceSocket},
				{name: "edge sent no header", peer: edge, h: http.Header{}, wantErr: clientip.ErrAllTrusted},
			}
			if single {
				cases = append(cases,
					walkCase{name: "a client's value beside the edge's", peer: edge, h: hdr(h, victim.String(), h, client.String()),
						wantErr: clientip.ErrMultipleValues},
					walkCase{name: "a list in the single header", peer: edge, h: hdr(h, victim.String()+", "+client.String()),
						wantErr: clientip.ErrMultipleValues},
					walkCase{name: "X-Forwarded-For is not read", peer: edge, h: hdr(h, client.String(), xff, victim.String()),
						want: client, src: src},
				)
			} else {
				// An edge address where the client belongs is a chain longer
				// than the edge writes.
				cases = append(cases, walkCase{name: "a chain deeper than the edge writes", peer: edge,
					h: wrote(client.String(), edge), wantErr: clientip.ErrTooManyHops})
			}
			runWalks(t, p, cases)
		})
	}
}

// TestBehindIngress: edge → ingress → service. X-Forwarded-For is walked
// through the ingress and then the edge's ranges.
func TestBehindIngress(t *testing.T) {
	for _, plat := range Platforms() {
		if plat == CloudRun {
			continue
		}
		t.Run(plat.String(), func(t *testing.T) {
			p, err := New(configFor(plat, BehindIngress(ingress)))
			require.NoError(t, err)
			assert.Equal(t, xff, p.Config().Header)
			edge, edge6 := edgeAddr(t, p.Ranges(), false), edgeAddr(t, p.Ranges(), true)
			via := edge.String() // what the ingress appended: the edge's address
			if plat == GoogleLoadBalancer {
				via = rule.String() + ", " + via
			}
			via6 := strings.Replace(via, edge.String(), edge6.String(), 1)
			single := plat.Header()
			src := clientip.SourceXForwardedFor
			runWalks(t, p, []walkCase{
				{name: "client through edge and ingress", peer: ingressIP, h: hdr(xff, client.String()+", "+via), want: client, src: src},
				{name: "IPv6 client through edge and ingress", peer: ingressIP, h: hdr(xff, client6.String()+", "+via), want: client6, src: src},
				{name: "edge's IPv6 address", peer: ingressIP, h: hdr(xff, client.String()+", "+via6), want: client, src: src},
				{name: "client's own entries before the edge's", peer: ingressIP, h: hdr(xff, victim.String()+", "+client.String()+", "+via),
					want: client, src: src},
				// The ingress appended the attacker's own address: it came
				// without the edge, whatever else it wrote.
				{name: "ingress reached without the edge, forging the edge's header", peer: ingressIP,
					h: hdr(single, victim.String(), xff, victim.String()+", "+attacker.String()), want: attacker, src: src},
				{name: "ingress reached without the edge, forging an edge entry", peer: ingressIP,
					h: hdr(xff, victim.String()+", "+edge.String()+", "+attacker.String()), want: attacker, src: src},
				{name: "IPv6 client reaching the ingress without the edge", peer: ingressIP,
					h: hdr(xff, victim.String()+", "+attacker6.String()), want: attacker6, src: src},
				{name: "service reached without the ingress", peer: attacker, h: hdr(xff, victim.String()+", "+via),
					want: attacker, src: clientip.SourceSocket},
				{name: "ingress wrote nothing", peer: ingressIP, h: http.Header{}, wantErr: clientip.ErrAllTrusted},
			})
		})
	}
}

// TestSpoofViaIngress pins why BehindIngress never reads the edge's
// single-address header: a client that connects to the ingress directly,
// not through the edge, and forges CF-Connecting-IP would be believed by a
// configuration that trusts the ingress to deliver that header. The preset
// names the client's own address, which the ingress appended.
func TestSpoofViaIngress(t *testing.T) {
	for _, plat := range []Platform{Cloudflare, Fastly, Akamai, Fly} {
		t.Run(plat.String(), func(t *testing.T) {
			cfg := configFor(plat, BehindIngress(ingress))
			p, err := New(cfg)
			require.NoError(t, err)
			// The ingress (nginx with $proxy_add_x_forwarded_for) appended
			// the attacker's address; the forged header passed through.
			forged := hdr(plat.Header(), victim.String(), xff, attacker.String())
			peer := clientip.Transport{Peer: netip.AddrPortFrom(ingressIP, 40000)}

			naive := clientip.MustNew(clientip.Config{
				TrustedProxies: ingress.Union(p.Ranges()),
				Header:         plat.Header(),
			})
			res, err := naive.Resolve(peer, forged)
			require.NoError(t, err)
			require.Equal(t, victim, res.Client, "the header through a trusted ingress names whom the attacker chose")

			res, err = clientip.MustNew(p.Config()).Resolve(peer, forged)
			require.NoError(t, err)
			assert.Equal(t, attacker, res.Client)
		})
	}
}

// TestGoogleForwardingRule: the load balancer appends its forwarding
// rule's address after the client; without it trusted, the rule would be
// the client.
func TestGoogleForwardingRule(t *testing.T) {
	p, err := New(configFor(GoogleLoadBalancer, Direct()))
	require.NoError(t, err)
	gfe := netip.MustParseAddr("35.191.10.20")
	runWalks(t, p, []walkCase{
		{name: "client, rule", peer: gfe, h: hdr(xff, client.String()+","+rule.String()), want: client, src: clientip.SourceXForwardedFor},
		{name: "supplied, client, rule", peer: gfe, h: hdr(xff, victim.String()+", "+client.String()+","+rule.String()),
			want: client, src: clientip.SourceXForwardedFor},
		{name: "health check from the front ends", peer: netip.MustParseAddr("130.211.0.9"), h: http.Header{},
			wantErr: clientip.ErrAllTrusted},
	})

	_, err = New(Config{Platform: GoogleLoadBalancer, Topology: Direct()})
	require.ErrorIs(t, err, ErrInvalidConfig, "no forwarding rule")
}

// TestCloudRun: no socket peer to check; the client is the entry Google's
// front end appended.
func TestCloudRun(t *testing.T) {
	internal := netip.MustParseAddr("169.254.1.1")
	p, err := New(Config{Platform: CloudRun, Topology: Direct()})
	require.NoError(t, err)
	assert.Equal(t, 1, p.Config().TrustedHops)
	runWalks(t, p, []walkCase{
		{name: "client", peer: internal, h: hdr(xff, client.String()), want: client, src: clientip.SourceXForwardedFor},
		{name: "client's own entries first", peer: internal, h: hdr(xff, victim.String()+", "+client.String()),
			want: client, src: clientip.SourceXForwardedFor},
		{name: "IPv6 client", peer: internal, h: hdr(xff, client6.String()), want: client6, src: clientip.SourceXForwardedFor},
		{name: "no X-Forwarded-For", peer: internal, h: http.Header{}, wantErr: clientip.ErrTooFewHops},
	})

	sidecar := clientip.MustParsePrefixSet("127.0.0.1/32")
	p, err = New(Config{Platform: CloudRun, Topology: BehindIngress(sidecar)})
	require.NoError(t, err)
	lo := netip.MustParseAddr("127.0.0.1")
	runWalks(t, p, []walkCase{
		{name: "through the sidecar", peer: lo, h: hdr(xff, victim.String()+", "+client.String()+", "+internal.String()),
			want: client, src: clientip.SourceXForwardedFor},
		{name: "not from the sidecar", peer: attacker, h: hdr(xff, victim.String()+", "+client.String()),
			want: attacker, src: clientip.SourceSocket},
	})

	_, err = New(Config{Platform: CloudRun, Topology: Direct(), Ranges: ownRanges})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestNewRefuses(t *testing.T) {
	secret := SharedSecret{Header: "X-Origin-Verify", Values: []string{"0123456789abcdef0123"}}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"zero config", Config{}},
		{"no topology", Config{Platform: Cloudflare}},
		{"unknown platform", Config{Platform: Platform(200), Topology: Direct()}},
		{"empty ingress", Config{Platform: Cloudflare, Topology: BehindIngress(clientip.PrefixSet{})}},
		{"ingress trusting everyone", Config{Platform: Cloudflare, Topology: BehindIngress(clientip.MustParsePrefixSet("0.0.0.0/0"))}},
		{"ingress wider than /8", Config{Platform: Cloudflare, Topology: BehindIngress(clientip.MustParsePrefixSet("10.0.0.0/7"))}},
		{"Akamai without ranges", Config{Platform: Akamai, Topology: Direct()}},
		{"Fly without ranges", Config{Platform: Fly, Topology: Direct()}},
		{"Envoy without ranges", Config{Platform: Envoy, Topology: Direct()}},
		{"edge ranges trusting everyone", Config{Platform: Envoy, Topology: Direct(), Ranges: clientip.MustParsePrefixSet("::/0")}},
		{"edge ranges in reserved space", Config{Platform: Fly, Topology: Direct(), Ranges: clientip.MustParsePrefixSet("240.0.0.0/8")}},
		{"Front Door without its ID", Config{Platform: AzureFrontDoor, Topology: Direct()}},
		{"Front Door ID not a GUID", Config{Platform: AzureFrontDoor, Topology: Direct(), FrontDoorIDs: []string{"my-front-door"}}},
		{"Front Door ID elsewhere", Config{Platform: Cloudflare, Topology: Direct(), FrontDoorIDs: []string{fdid}}},
		{"forwarding rule elsewhere", Config{Platform: Cloudflare, Topology: Direct(), ForwardingRules: clientip.MustParsePrefixSet("203.0.113.1")}},
		{"secret too short", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Header: "X-Origin-Verify", Values: []string{"short"}}}},
		{"secret with a space", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Header: "X-Origin-Verify", Values: []string{"0123456789 abcdef0123"}}}},
		{"secret without values", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Header: "X-Origin-Verify"}}},
		{"secret without header", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Values: secret.Values}}},
		{"secret in a forwarding header", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Header: "X-Forwarded-Proto", Values: secret.Values}}},
		{"secret in the client header", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Header: "cf-connecting-ip", Values: secret.Values}}},
		{"secret header not a token", Config{Platform: Cloudflare, Topology: Direct(), SharedSecret: SharedSecret{Header: "X Origin", Values: secret.Values}}},
		{"MaxHops beyond clientip's bound", Config{Platform: Cloudflare, Topology: Direct(), MaxHops: 65}},
		{"Cloud Run with a source", Config{Platform: CloudRun, Topology: Direct(), Source: Cloudflare.def().source()}},
		{"another platform's list", Config{Platform: CloudFront, Topology: Direct(), Source: ranges.Fastly()}},
		{"all of AWS for CloudFront", Config{Platform: CloudFront, Topology: Direct(), Source: mustSource(t, ranges.SourceConfig{Provider: ranges.ProviderAWS, Services: []string{"AMAZON"}})}},
		{"Google's customer ranges for its load balancer", Config{Platform: GoogleLoadBalancer, Topology: Direct(),
			ForwardingRules: clientip.MustParsePrefixSet("203.0.113.1"), Source: mustSource(t, ranges.SourceConfig{Provider: ranges.ProviderGoogleCloud})}},
		{"another Azure tag", Config{Platform: AzureFrontDoor, Topology: Direct(), FrontDoorIDs: []string{fdid},
			Source: mustSource(t, ranges.SourceConfig{Provider: ranges.ProviderAzure, Tag: "AzureCloud", Locations: []string{"/tmp/tags.json"}})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Nil(t, p)
			if tc.cfg.SharedSecret.Values != nil {
				for _, v := range tc.cfg.SharedSecret.Values {
					assert.NotContains(t, err.Error(), v, "an error never quotes a secret")
				}
			}
		})
	}
}

func TestPlatformText(t *testing.T) {
	for _, p := range Platforms() {
		b, err := p.MarshalText()
		require.NoError(t, err)
		var back Platform
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, p, back)
		assert.NotEmpty(t, p.Header())
		assert.NotEmpty(t, p.Documentation())
		for _, u := range p.Documentation() {
			assert.True(t, strings.HasPrefix(u, "https://"), u)
		}
	}
	var p Platform
	assert.ErrorIs(t, p.UnmarshalText([]byte("unknown")), ErrUnknownPlatform)
	assert.ErrorIs(t, p.UnmarshalText([]byte("Cloudflare")), ErrUnknownPlatform)
	_, err := PlatformUnknown.MarshalText()
	assert.ErrorIs(t, err, ErrUnknownPlatform)
	assert.Equal(t, "Platform(99)", Platform(99).String())
	assert.Equal(t, "presets.AzureFrontDoor", fmt.Sprintf("%#v", AzureFrontDoor))
}

// TestRanges: the platforms with a published list start from its
// snapshot; Config.Ranges replaces it.
func TestRanges(t *testing.T) {
	for _, p := range []Platform{Cloudflare, CloudFront, Fastly, AzureFrontDoor, GoogleLoadBalancer} {
		assert.Positive(t, p.Ranges().Len(), p)
	}
	for _, p := range []Platform{Akamai, Fly, CloudRun, Envoy} {
		assert.Zero(t, p.Ranges().Len(), p)
	}
	cfg := configFor(Cloudflare, Direct())
	cfg.Ranges = clientip.MustParsePrefixSet("127.0.0.2/32")
	p, err := New(cfg)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.2/32", p.Config().TrustedProxies.String())
	assert.False(t, p.Config().TrustedProxies.Contains(netip.MustParseAddr("173.245.48.1")), "the snapshot is replaced, not added to")
}

// Config allocates nothing beyond the union of its sets, as documented:
// nothing for a direct edge, whose ingress set is empty, and what Union
// allocates behind an ingress.
func TestConfigAllocs(t *testing.T) {
	for _, top := range []Topology{Direct(), BehindIngress(ingress)} {
		p, err := New(configFor(Cloudflare, top))
		require.NoError(t, err)
		union := testing.AllocsPerRun(20, func() { p.static.TrustedProxies.Union(p.edge) })
		assert.Equal(t, union, testing.AllocsPerRun(20, func() { p.Config() }), "%v", top)
	}
	p, err := New(configFor(Cloudflare, Direct()))
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(20, func() { p.Config() }), "direct")
}

func TestMaxHops(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want int
	}{
		{configFor(Cloudflare, Direct()), 1},
		{configFor(GoogleLoadBalancer, Direct()), 2},
		{configFor(Cloudflare, BehindIngress(ingress)), 8},
		{configFor(GoogleLoadBalancer, BehindIngress(ingress)), 9},
		{Config{Platform: CloudRun, Topology: BehindIngress(ingress)}, 2},
		{Config{Platform: Cloudflare, Topology: Direct(), MaxHops: 3}, 3},
	} {
		p, err := New(tc.cfg)
		require.NoError(t, err)
		assert.Equal(t, tc.want, p.Config().MaxHops, p.String())
	}
}

func TestErrorsNameNoValue(t *testing.T) {
	// A Front Door ID is not a secret, but what a client sent in its place
	// is not ours to log.
	p := MustNew(configFor(AzureFrontDoor, Direct()))
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("X-Azure-FDID", "<script>")
	err := p.Check(r)
	require.ErrorIs(t, err, ErrEdgeIdentityMismatch)
	assert.False(t, errors.Is(err, ErrEdgeIdentityMissing))
	assert.NotContains(t, err.Error(), "<script>")
}

func mustSource(t *testing.T, cfg ranges.SourceConfig) *ranges.Source {
	t.Helper()
	s, err := ranges.NewSource(cfg)
	require.NoError(t, err)
	return s
}

// TestSourcesAccepted: the platform's own list, under its filter, or a
// CIDR list of your own.
func TestSourcesAccepted(t *testing.T) {
	azure, err := ranges.AzureFrontDoor("/var/lib/app/ServiceTags_Public.json")
	require.NoError(t, err)
	own := mustSource(t, ranges.SourceConfig{Provider: ranges.ProviderCIDRList, Locations: []string{"/etc/app/akamai-acl.txt"}})
	for _, cfg := range []Config{
		func() Config { c := configFor(AzureFrontDoor, Direct()); c.Source = azure; return c }(),
		func() Config { c := configFor(CloudFront, Direct()); c.Source = ranges.CloudFront(); return c }(),
		func() Config { c := configFor(Akamai, Direct()); c.Source = own; return c }(),
		func() Config { c := configFor(Cloudflare, Direct()); c.Source = own; return c }(),
	} {
		p, err := New(cfg)
		require.NoError(t, err, cfg.Platform)
		assert.Same(t, cfg.Source, p.Source())
	}
}
