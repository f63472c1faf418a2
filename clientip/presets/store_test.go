package presets

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// TestNewStoreAndRefresher: the edge's ranges live in the store as the
// platform's range set, and the refresher the preset wires replaces them.
// A local HTTPS server stands in for the provider's list (loopback
// addresses, so the refresher allows private space).
func TestNewStoreAndRefresher(t *testing.T) {
	list := "127.0.0.2/32\n"
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(list))
	}))
	defer provider.Close()
	src, err := ranges.NewSource(ranges.SourceConfig{Provider: ranges.ProviderCIDRList, Locations: []string{provider.URL + "/ips"}})
	require.NoError(t, err)

	p, err := New(Config{
		Platform: Cloudflare,
		Topology: BehindIngress(clientip.MustParsePrefixSet("127.0.0.1/32")),
		Ranges:   clientip.MustParsePrefixSet("127.0.0.3/32"), // stale: the edge moved
		Source:   src,
	})
	require.NoError(t, err)
	store, err := p.NewStore(clientip.StoreOptions{Ranges: map[string]clientip.PrefixSet{"office": clientip.MustParsePrefixSet("192.0.2.0/24")}})
	require.NoError(t, err)
	assert.Equal(t, map[string]clientip.PrefixSet{
		"cloudflare": clientip.MustParsePrefixSet("127.0.0.3/32"),
		"office":     clientip.MustParsePrefixSet("192.0.2.0/24"),
	}, store.Ranges())
	assert.Equal(t, "127.0.0.1/32", store.Config().TrustedProxies.String(), "the static part is the ingress")

	through := func() netip.Addr {
		res, err := store.Resolver().Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("127.0.0.1:40000")},
			http.Header{"X-Forwarded-For": {"198.51.100.7, 127.0.0.2"}})
		require.NoError(t, err)
		return res.Client
	}
	assert.Equal(t, netip.MustParseAddr("127.0.0.2"), through(), "the edge is not trusted yet")

	r, err := p.NewRefresher(store, ranges.RefresherConfig{
		Client:       provider.Client(),
		Clock:        func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
		AllowPrivate: true,
	})
	require.NoError(t, err)
	require.NoError(t, r.Refresh(context.Background()))
	assert.Equal(t, "127.0.0.2/32", store.Ranges()["cloudflare"].String())
	assert.Equal(t, netip.MustParseAddr("198.51.100.7"), through())

	// A refresh that would trust everyone is refused; the set stays.
	list = "0.0.0.0/0\n"
	require.ErrorIs(t, r.Refresh(context.Background()), ranges.ErrAllAddresses)
	assert.Equal(t, "127.0.0.2/32", store.Ranges()["cloudflare"].String())
}

func TestWiringRefuses(t *testing.T) {
	p := MustNew(configFor(Cloudflare, Direct()))
	store, err := p.NewStore(clientip.StoreOptions{})
	require.NoError(t, err)

	_, err = p.NewStore(clientip.StoreOptions{Ranges: map[string]clientip.PrefixSet{"cloudflare": ownRanges}})
	assert.ErrorIs(t, err, ErrInvalidConfig, "a range set of the same name")

	_, err = p.NewRefresher(store, ranges.RefresherConfig{OnUpdate: func(clientip.PrefixSet) error { return nil }})
	assert.ErrorIs(t, err, ErrInvalidConfig, "OnUpdate is the preset's")
	_, err = p.NewRefresher(store, ranges.RefresherConfig{Source: ranges.Fastly()})
	assert.ErrorIs(t, err, ErrInvalidConfig, "Source is the preset's")
	_, err = p.NewRefresher(nil, ranges.RefresherConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)

	for _, plat := range []Platform{Akamai, Fly, Envoy, GoogleLoadBalancer, AzureFrontDoor} {
		q := MustNew(configFor(plat, Direct()))
		assert.Nil(t, q.Source(), plat)
		s, err := q.NewStore(clientip.StoreOptions{})
		require.NoError(t, err, plat)
		_, err = q.NewRefresher(s, ranges.RefresherConfig{})
		assert.ErrorIs(t, err, ErrNoSource, plat)
	}
	cr := MustNew(Config{Platform: CloudRun, Topology: Direct()})
	s, err := cr.NewStore(clientip.StoreOptions{})
	require.NoError(t, err)
	assert.Empty(t, s.Ranges())
	assert.Equal(t, 1, s.Resolver().Config().TrustedHops)
}

// TestStoreStartsFromSnapshot: with the published source, the store starts
// from the same embedded snapshot the refresher does, so Run's first
// delivery changes nothing.
func TestStoreStartsFromSnapshot(t *testing.T) {
	p := MustNew(configFor(CloudFront, Direct()))
	store, err := p.NewStore(clientip.StoreOptions{})
	require.NoError(t, err)
	r, err := p.NewRefresher(store, ranges.RefresherConfig{})
	require.NoError(t, err)
	assert.Equal(t, r.Current().String(), store.Ranges()["cloudfront"].String())
	assert.Equal(t, ranges.ProvenanceSnapshot, r.Status().Provenance)
}

// TestRefresherRunReplacesGivenRanges pins what Config.Ranges documents: a
// set given there is the store's until the refresher's Run installs its own
// starting set, the source's snapshot, before any fetch.
func TestRefresherRunReplacesGivenRanges(t *testing.T) {
	p := MustNew(Config{Platform: Cloudflare, Topology: Direct(), Ranges: clientip.MustParsePrefixSet("104.16.0.0/13")})
	store, err := p.NewStore(clientip.StoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, "104.16.0.0/13", store.Ranges()["cloudflare"].String())
	r, err := p.NewRefresher(store, ranges.RefresherConfig{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run delivers the starting set, then stops before fetching
	assert.ErrorIs(t, r.Run(ctx), context.Canceled)
	assert.Equal(t, Cloudflare.Ranges().String(), store.Ranges()["cloudflare"].String())
	assert.Equal(t, ranges.ProvenanceSnapshot, r.Status().Provenance)
}
