package proxyproto

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// nilTrust is a Trust that breaks its contract by returning nil.
type nilTrust struct{}

func (nilTrust) Resolver() *clientip.Resolver { return nil }

// sliceTrust is a Trust of a type that == cannot compare.
type sliceTrust []*clientip.Resolver

func (t sliceTrust) Resolver() *clientip.Resolver { return t[0] }

func TestNewListenerUpstreams(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	require.NoError(t, err)
	defer inner.Close()
	tests := []struct {
		name      string
		trust     clientip.Trust
		upstreams string
		wantErr   string // "" for success
	}{
		{name: "Upstreams inside the trusted proxies", trust: trustOf("10.0.0.0/8"), upstreams: "10.0.1.0/24, 10.0.2.7"},
		{name: "Upstreams covered only by two trusted halves", trust: trustOf("10.0.0.0/9, 10.128.0.0/9"), upstreams: "10.0.0.0/8"},
		{name: "an Upstreams prefix outside the trust is named", trust: trustOf("10.0.0.0/8"), upstreams: "10.0.1.0/24, 192.0.2.0/24",
			wantErr: "Upstreams prefix 192.0.2.0/24 is not trusted"},
		{name: "an Upstreams prefix wider than the trust", trust: trustOf("10.0.0.0/9"), upstreams: "10.0.0.0/8",
			wantErr: "Upstreams prefix 10.0.0.0/8 is not trusted"},
		{name: "Upstreams without a Trust", upstreams: "10.0.0.0/8", wantErr: "without a Trust"},
		{name: "a Trust without a resolver", trust: nilTrust{}, wantErr: "nil Resolver"},
		// A typed nil: a *clientip.Store variable never assigned, whose
		// Resolver method dereferences its receiver. NewListener panicked.
		{name: "a nil *clientip.Store is a configuration error, not a panic", trust: (*clientip.Store)(nil), wantErr: "Trust *clientip.Store returned a nil Resolver"},
		{name: "hop-count mode without TrustedProxies admits any Upstreams",
			trust: clientip.MustNew(clientip.Config{TrustedHops: 1}), upstreams: "192.0.2.0/24"},
		{name: "hop-count mode with TrustedProxies checks against them",
			trust:     clientip.MustNew(clientip.Config{TrustedHops: 1, TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8")}),
			upstreams: "192.0.2.0/24", wantErr: "Upstreams prefix 192.0.2.0/24 is not trusted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewListener(inner, Config{Trust: tc.trust, Upstreams: clientip.MustParsePrefixSet(tc.upstreams)})
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// Whose headers a listener believes, for each kind of Trust, and whose
// connections draw on the trusted pending budget (proxy): every proxy the
// Trust names, whether or not Upstreams lets it send a header. Clients dial
// from 127.0.0.1 (the load balancer in most cases) or 127.0.0.2.
func TestListenerTrustsPeer(t *testing.T) {
	tests := []struct {
		name      string
		trust     clientip.Trust
		upstreams string
		from      string
		believed  bool
		proxy     bool
	}{
		{name: "a trusted proxy's header is believed", trust: trustOf("127.0.0.1"), from: "127.0.0.1", believed: true, proxy: true},
		{name: "an untrusted peer's header is refused", trust: trustOf("127.0.0.1"), from: "127.0.0.2"},
		{name: "no Trust believes nobody", from: "127.0.0.1"},
		{name: "Upstreams narrows the trusted proxies: inside", trust: trustOf("127.0.0.0/24"), upstreams: "127.0.0.2", from: "127.0.0.2", believed: true, proxy: true},
		{name: "Upstreams narrows the trusted proxies: a trusted proxy outside, still on the trusted budget",
			trust: trustOf("127.0.0.0/24"), upstreams: "127.0.0.2", from: "127.0.0.1", proxy: true},
		{name: "hop-count mode without TrustedProxies names no upstream", trust: clientip.MustNew(clientip.Config{TrustedHops: 1}), from: "127.0.0.1"},
		{name: "hop-count mode without TrustedProxies believes Upstreams only: inside",
			trust: clientip.MustNew(clientip.Config{TrustedHops: 1}), upstreams: "127.0.0.1", from: "127.0.0.1", believed: true, proxy: true},
		{name: "hop-count mode without TrustedProxies believes Upstreams only: outside, on the untrusted budget",
			trust: clientip.MustNew(clientip.Config{TrustedHops: 1}), upstreams: "127.0.0.1", from: "127.0.0.2"},
		{name: "hop-count mode with TrustedProxies believes them",
			trust: clientip.MustNew(clientip.Config{TrustedHops: 1, TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}), from: "127.0.0.1", believed: true, proxy: true},
		{name: "a Store's trusted proxy", trust: mustStore(t, clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}), from: "127.0.0.1", believed: true, proxy: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Config{Trust: tc.trust, Upstreams: clientip.MustParsePrefixSet(tc.upstreams)})
			var r *clientip.Resolver
			if tc.trust != nil {
				r = tc.trust.Resolver()
			}
			upstream, proxy := s.l.trusts(r, netip.AddrPortFrom(netip.MustParseAddr(tc.from), 1))
			assert.Equal(t, tc.believed, upstream, "trusted upstream")
			assert.Equal(t, tc.proxy, proxy, "trusted pending budget")
			c := dial(t, tc.from, s.addr())
			WriteHeader(c, header(2, "203.0.113.7:5555", "192.0.2.10:8883"))
			if !tc.believed {
				r := s.reject(t)
				assert.Equal(t, ReasonUntrusted, r.Reason)
				assert.False(t, r.Trusted)
				return
			}
			sc := s.accept(t)
			assert.Equal(t, ap("203.0.113.7:5555"), sc.Facts().Source)
			res, err := ResolverFromConn(sc, tc.trust).Resolve(sc.Facts().Transport(), nil)
			require.NoError(t, err)
			assert.Equal(t, clientip.SourceProxyProtocol, res.Source)
			assert.Equal(t, netip.MustParseAddr("203.0.113.7"), res.Client)
		})
	}
}

func mustStore(t testing.TB, cfg clientip.Config) *clientip.Store {
	t.Helper()
	s, err := clientip.NewStore(cfg, clientip.StoreOptions{})
	require.NoError(t, err)
	return s
}

// A Store swapped between connections: a swap that removes a load balancer
// refuses its next connection's header, while a connection it already
// accepted keeps the resolver it was judged with; a swap that adds one
// believes its next connection. A refused swap changes nothing.
func TestListenerStoreSwap(t *testing.T) {
	lbs := func(s string) clientip.Config {
		return clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(s)}
	}
	store := mustStore(t, lbs("127.0.0.1, 127.0.0.2"))
	s := newServer(t, Config{Trust: store})
	send := func(from, client string) net.Conn {
		c := dial(t, from, s.addr())
		WriteHeader(c, header(2, client+":5555", "192.0.2.10:8883"))
		return c
	}
	clientOf := func(c net.Conn) (netip.Addr, clientip.Source) {
		res, err := ResolverFromConn(c, store).Resolve(c.(*Conn).Facts().Transport(), nil)
		require.NoError(t, err)
		return res.Client, res.Source
	}

	send("127.0.0.2", "203.0.113.1")
	before := s.accept(t)

	_, err := store.Swap(lbs("127.0.0.1")) // 127.0.0.2 leaves
	require.NoError(t, err)
	c := send("127.0.0.2", "203.0.113.2")
	r := s.reject(t)
	assert.Equal(t, ReasonUntrusted, r.Reason, "the removed load balancer's header was not refused")
	closedByServer(t, c)

	client, src := clientOf(before)
	assert.Equal(t, netip.MustParseAddr("203.0.113.1"), client, "the connection accepted before the swap lost its resolution")
	assert.Equal(t, clientip.SourceProxyProtocol, src)

	send("127.0.0.1", "203.0.113.3")
	client, _ = clientOf(s.accept(t))
	assert.Equal(t, netip.MustParseAddr("203.0.113.3"), client, "the load balancer that stayed")

	_, err = store.Swap(clientip.Config{Header: "X-Forwarded-For"}) // refused: nothing trusted
	require.ErrorIs(t, err, clientip.ErrInvalidConfig)
	send("127.0.0.1", "203.0.113.4")
	client, _ = clientOf(s.accept(t))
	assert.Equal(t, netip.MustParseAddr("203.0.113.4"), client, "a refused swap changed the trust")

	_, err = store.Swap(lbs("127.0.0.1, 127.0.0.3")) // a new load balancer
	require.NoError(t, err)
	send("127.0.0.3", "203.0.113.5")
	client, _ = clientOf(s.accept(t))
	assert.Equal(t, netip.MustParseAddr("203.0.113.5"), client, "the added load balancer")
}

// Upstreams is intersected per connection, so a swap that stops trusting an
// upstream the listener names stops its headers too, even though the
// listener was built when it was trusted.
func TestListenerStoreSwapNarrowsUpstreams(t *testing.T) {
	store := mustStore(t, clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.0/24")})
	s := newServer(t, Config{Trust: store, Upstreams: clientip.MustParsePrefixSet("127.0.0.2")})
	_, err := store.Swap(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")})
	require.NoError(t, err)
	c := dial(t, "127.0.0.2", s.addr())
	WriteHeader(c, header(2, "203.0.113.7:5555", "192.0.2.10:8883"))
	assert.Equal(t, ReasonUntrusted, s.reject(t).Reason)
}

func TestResolverFromConn(t *testing.T) {
	trust := trustOf(lbAddr)
	s := newServer(t, Config{Trust: trust})
	c := dial(t, lbAddr, s.addr())
	WriteHeader(c, header(2, "203.0.113.7:5555", "192.0.2.10:8883"))
	sc := s.accept(t)
	other := trustOf(lbAddr)
	tests := []struct {
		name  string
		conn  net.Conn
		trust clientip.Trust
		want  *clientip.Resolver
	}{
		{"the listener's own trust: the resolver it judged with", sc, trust, trust},
		{"another trust: its resolver, loaded now", sc, other, other},
		{"a trust == cannot compare: its resolver, no panic", sc, sliceTrust{other}, other},
		{"a connection from elsewhere: the trust's resolver", &net.TCPConn{}, trust, trust},
		{"no trust: nil", sc, nil, nil},
		{"a nil *clientip.Store: nil, not a panic", sc, (*clientip.Store)(nil), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Same(t, tc.want, ResolverFromConn(tc.conn, tc.trust))
		})
	}

	store := mustStore(t, clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(lbAddr)})
	s2 := newServer(t, Config{Trust: store})
	c2 := dial(t, lbAddr, s2.addr())
	WriteHeader(c2, header(2, "203.0.113.7:5555", "192.0.2.10:8883"))
	sc2 := s2.accept(t)
	judged := store.Resolver()
	_, err := store.Swap(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.9")})
	require.NoError(t, err)
	assert.Same(t, judged, ResolverFromConn(sc2, store), "a Store's connection got a fresh load instead of its own")
	assert.Zero(t, testing.AllocsPerRun(100, func() { ResolverFromConn(sc2, store) }), "ResolverFromConn allocates")
}
