package clientip

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var _ Trust = (*Store)(nil)

// TrustsPeer is the walk's own test of the socket peer: it reports true
// exactly when a walk from that peer, with nothing outside it, steps over it.
// It and a *Resolver's Resolver method do not allocate, as documented.
func TestTrustsPeerMatchesWalk(t *testing.T) {
	configs := []struct {
		name string
		cfg  Config
	}{
		{"zero", Config{}},
		{"trusted ranges", Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8, 2001:db8::/32")}},
		{"hop count without ranges", Config{TrustedHops: 1}},
		{"hop count with ranges", Config{TrustedHops: 1, TrustedProxies: MustParsePrefixSet("10.0.0.0/8")}},
		{"unix socket", Config{TrustUnixSocket: true}},
	}
	addrs := []netip.Addr{{}, netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("::ffff:10.1.2.3"),
		netip.MustParseAddr("2001:db8::1%eth0"), netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("0.0.0.0"),
		netip.MustParseAddr("::")}
	for _, c := range configs {
		r := MustNew(c.cfg)
		for _, a := range addrs {
			t.Run(fmt.Sprintf("%s/%s", c.name, a), func(t *testing.T) {
				var peer netip.AddrPort
				if a.IsValid() {
					peer = netip.AddrPortFrom(a, 1)
				}
				_, err := r.Resolve(Transport{Peer: peer}, nil)
				stepped := errors.Is(err, ErrAllTrusted) || errors.Is(err, ErrTooFewHops)
				assert.Equal(t, stepped, r.TrustsPeer(a))
				assert.Zero(t, testing.AllocsPerRun(100, func() { r.TrustsPeer(a) }), "TrustsPeer allocates")
				assert.Zero(t, testing.AllocsPerRun(100, func() { r.Resolver() }), "Resolver.Resolver allocates")
			})
		}
	}
}

var (
	lbA = MustParsePrefixSet("10.0.0.0/24")
	lbB = MustParsePrefixSet("10.0.1.0/24")
)

func TestStoreSwap(t *testing.T) {
	tests := []struct {
		name      string
		next      Config
		wantErr   error
		wantSame  bool   // the resolver in force is the one before
		wantTrust string // effective TrustedProxies after
		wantText  string // Change.String()
	}{
		{name: "a new load balancer is installed", next: Config{TrustedProxies: lbA.Union(lbB)},
			wantTrust: "10.0.0.0/24,10.0.1.0/24", wantText: "trusted_proxies_added=10.0.1.0/24"},
		{name: "a load balancer removed", next: Config{TrustedProxies: lbB},
			wantTrust: "10.0.1.0/24", wantText: "trusted_proxies_added=10.0.1.0/24 trusted_proxies_removed=10.0.0.0/24"},
		{name: "a header added", next: Config{TrustedProxies: lbA, Header: "x-forwarded-for"},
			wantTrust: "10.0.0.0/24", wantText: "header=none → X-Forwarded-For"},
		{name: "hops, limits and unix sockets", next: Config{TrustedProxies: lbA, TrustedHops: 2, MaxHops: 8, MaxHeaderBytes: 1024, TrustUnixSocket: true},
			wantTrust: "10.0.0.0/24", wantText: "trusted_hops=0 → 2 max_hops=32 → 8 max_header_bytes=8192 → 1024 trust_unix_socket=false → true"},
		{name: "masquerading nodes", next: Config{TrustedProxies: lbA, Masquerade: MustParsePrefixSet("192.168.0.0/16")},
			wantTrust: "10.0.0.0/24", wantText: "masquerade_added=192.168.0.0/16"},
		{name: "the same configuration keeps the resolver", next: Config{TrustedProxies: lbA, MaxHops: DefaultMaxHops},
			wantSame: true, wantTrust: "10.0.0.0/24", wantText: "unchanged"},
		{name: "a bad configuration is refused and the old one stays", next: Config{Header: "X-Forwarded-For"},
			wantErr: ErrInvalidConfig, wantSame: true, wantTrust: "10.0.0.0/24",
			wantText: `trusted_proxies_removed=10.0.0.0/24 header=none → X-Forwarded-For refused: clientip: invalid configuration: Header "X-Forwarded-For" is set but no proxy is trusted to deliver it (set TrustedProxies, TrustedHops or TrustUnixSocket)`},
		{name: "MaxHops out of range is refused", next: Config{TrustedProxies: lbA, MaxHops: 65},
			wantErr: ErrInvalidConfig, wantSame: true, wantTrust: "10.0.0.0/24"},
		{name: "a swap to trusting every address is refused and the old trust stays", next: Config{TrustedProxies: MustParsePrefixSet("0.0.0.0/0, ::/0"), Header: "X-Forwarded-For"},
			wantErr: ErrInvalidConfig, wantSame: true, wantTrust: "10.0.0.0/24"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var changes []Change
			s, err := NewStore(Config{TrustedProxies: lbA}, StoreOptions{OnChange: func(c Change) { changes = append(changes, c) }})
			require.NoError(t, err)
			before := s.Resolver()
			ch, err := s.Swap(tc.next)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorIs(t, ch.Err, tc.wantErr, "the Change carries the error")
				assert.Equal(t, StoreStats{Refused: 1}, s.Stats())
				assert.Equal(t, lbA.String(), s.Config().TrustedProxies.String(), "the static part changed on refusal")
			} else {
				require.NoError(t, err)
			}
			if tc.wantSame {
				assert.Same(t, before, s.Resolver(), "the resolver in force changed")
			} else {
				assert.NotSame(t, before, s.Resolver(), "the resolver in force did not change")
				assert.Equal(t, StoreStats{Changes: 1}, s.Stats())
				require.Len(t, changes, 1, "OnChange calls")
				assert.Equal(t, ch.String(), changes[0].String())
			}
			assert.Equal(t, tc.wantTrust, s.Resolver().Config().TrustedProxies.String())
			if tc.wantText != "" {
				assert.Equal(t, tc.wantText, ch.String())
			}
			assert.Equal(t, lbA.String(), before.Config().TrustedProxies.String(), "a swap changed a resolver already loaded")
		})
	}
}

// A connection or request that loaded the resolver before a swap finishes
// on it: the swap changes what the next load returns, nothing else.
func TestStoreSwapKeepsLoadedResolver(t *testing.T) {
	s, err := NewStore(Config{TrustedProxies: lbA, Header: "X-Forwarded-For"}, StoreOptions{})
	require.NoError(t, err)
	h := http.Header{"X-Forwarded-For": {"203.0.113.7"}}
	tr := Transport{Peer: netip.MustParseAddrPort("10.0.0.5:40000")}
	loaded := s.Resolver() // a request in flight
	_, err = s.Swap(Config{TrustedProxies: lbB, Header: "X-Forwarded-For"})
	require.NoError(t, err)

	res, err := loaded.Resolve(tr, h)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("203.0.113.7"), res.Client, "the request in flight lost its configuration")
	res, err = s.Resolver().Resolve(tr, h)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.0.0.5"), res.Client, "the next request did not see the swap")
}

func TestStoreUpdate(t *testing.T) {
	s, err := NewStore(Config{TrustedProxies: lbA}, StoreOptions{})
	require.NoError(t, err)
	ch, err := s.Update(func(c *Config) { c.TrustedProxies = c.TrustedProxies.Union(lbB) })
	require.NoError(t, err)
	assert.Equal(t, "trusted_proxies_added=10.0.1.0/24", ch.String())

	// Concurrent Updates are serialised: none loses another's edit.
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 32)
			_, err := s.Update(func(c *Config) { c.TrustedProxies = c.TrustedProxies.Union(MustParsePrefixSet(p.String())) })
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, 34, s.Resolver().Config().TrustedProxies.Len(), "an Update was lost")
	assert.Equal(t, uint64(33), s.Stats().Changes)

	_, err = s.Update(func(c *Config) { c.MaxHops = -1 })
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Equal(t, DefaultMaxHops, s.Resolver().Config().MaxHops, "a refused Update was installed")
	assert.Zero(t, s.Config().MaxHops, "a refused Update changed the static part")
}

func TestStoreSetRanges(t *testing.T) {
	cloudflare := MustParsePrefixSet("173.245.48.0/20, 2400:cb00::/32")
	s, err := NewStore(Config{TrustedProxies: lbA, Header: "CF-Connecting-IP"}, StoreOptions{})
	require.NoError(t, err)

	tests := []struct {
		name      string
		ranges    string
		set       PrefixSet
		wantErr   error
		wantText  string
		wantTrust string
	}{
		{name: "a range set joins the static part", ranges: "cloudflare", set: cloudflare,
			wantText:  "ranges=cloudflare trusted_proxies_added=173.245.48.0/20,2400:cb00::/32",
			wantTrust: "10.0.0.0/24,173.245.48.0/20,2400:cb00::/32"},
		{name: "a second source lives beside it", ranges: "ingress", set: MustParsePrefixSet("10.0.0.0/24, 10.2.0.0/16"),
			wantText:  "ranges=ingress trusted_proxies_added=10.2.0.0/16",
			wantTrust: "10.0.0.0/24,10.2.0.0/16,173.245.48.0/20,2400:cb00::/32"},
		{name: "a refresh that shrinks names its source", ranges: "cloudflare", set: MustParsePrefixSet("173.245.48.0/20"),
			wantText:  "ranges=cloudflare trusted_proxies_removed=2400:cb00::/32",
			wantTrust: "10.0.0.0/24,10.2.0.0/16,173.245.48.0/20"},
		{name: "the same set again changes nothing", ranges: "cloudflare", set: MustParsePrefixSet("173.245.48.0/20"),
			wantText:  "ranges=cloudflare unchanged",
			wantTrust: "10.0.0.0/24,10.2.0.0/16,173.245.48.0/20"},
		{name: "an empty set removes the source", ranges: "ingress",
			wantText:  "ranges=ingress trusted_proxies_removed=10.2.0.0/16",
			wantTrust: "10.0.0.0/24,173.245.48.0/20"},
		{name: "a range set holding ::/0, fed past ranges.CheckSet, is refused", ranges: "cdn", set: MustParsePrefixSet("::/0"), wantErr: ErrInvalidConfig,
			wantTrust: "10.0.0.0/24,173.245.48.0/20"},
		{name: "a name with a space is refused", ranges: "cloud flare", set: cloudflare, wantErr: ErrInvalidConfig,
			wantTrust: "10.0.0.0/24,173.245.48.0/20"},
		{name: "an empty name is refused", set: cloudflare, wantErr: ErrInvalidConfig,
			wantTrust: "10.0.0.0/24,173.245.48.0/20"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := s.SetRanges(tc.ranges, tc.set)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.wantText, ch.String())
			}
			assert.Equal(t, tc.wantTrust, s.Resolver().Config().TrustedProxies.String())
		})
	}
	assert.Equal(t, lbA.String(), s.Config().TrustedProxies.String(), "ranges leaked into the static part")

	// A Swap of the static part keeps the ranges.
	ch, err := s.Swap(Config{TrustedProxies: lbB, Header: "CF-Connecting-IP"})
	require.NoError(t, err)
	assert.Equal(t, "trusted_proxies_added=10.0.1.0/24 trusted_proxies_removed=10.0.0.0/24", ch.String())
	assert.Equal(t, map[string]PrefixSet{"cloudflare": MustParsePrefixSet("173.245.48.0/20")}, s.Ranges())
}

// A header trusted only through a range set: the store starts from the
// ranges' first set, and a refresher's update that would leave the header
// with nothing to trust is refused, keeping the last good set.
func TestStoreRangesOnly(t *testing.T) {
	_, err := NewStore(Config{Header: "CF-Connecting-IP"}, StoreOptions{})
	require.ErrorIs(t, err, ErrInvalidConfig, "a header with nothing trusted")
	s, err := NewStore(Config{Header: "CF-Connecting-IP"}, StoreOptions{
		Ranges: map[string]PrefixSet{"cloudflare": MustParsePrefixSet("173.245.48.0/20")},
	})
	require.NoError(t, err)
	update := s.SetRangesFunc("cloudflare")
	require.ErrorIs(t, update(PrefixSet{}), ErrInvalidConfig)
	assert.Equal(t, "173.245.48.0/20", s.Resolver().Config().TrustedProxies.String())
	require.NoError(t, update(MustParsePrefixSet("173.245.48.0/20, 103.21.244.0/22")))
	assert.Equal(t, "103.21.244.0/22,173.245.48.0/20", s.Resolver().Config().TrustedProxies.String())

	_, err = NewStore(Config{}, StoreOptions{Ranges: map[string]PrefixSet{"": lbA}})
	require.ErrorIs(t, err, ErrInvalidConfig, "an empty range set name")
}

func TestStoreLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	s, err := NewStore(Config{TrustedProxies: lbA}, StoreOptions{Logger: log})
	require.NoError(t, err)
	assert.Empty(t, buf.String(), "NewStore logged")

	_, err = s.Swap(Config{TrustedProxies: lbB, Header: "X-Forwarded-For"})
	require.NoError(t, err)
	_, err = s.SetRanges("cloudflare", MustParsePrefixSet("173.245.48.0/20"))
	require.NoError(t, err)
	_, err = s.Swap(Config{Header: "Forwarded", MaxHops: 99})
	require.Error(t, err)
	_, err = s.SetRanges("cloudflare", MustParsePrefixSet("173.245.48.0/20")) // unchanged: Debug, not shown
	require.NoError(t, err)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Equal(t, []string{
		`level=INFO msg="trust changed" change.trusted_proxies_added=10.0.1.0/24 change.trusted_proxies_removed=10.0.0.0/24 change.header="none → X-Forwarded-For"`,
		`level=INFO msg="trust changed" change.ranges=cloudflare change.trusted_proxies_added=173.245.48.0/20`,
		`level=WARN msg="trust change refused" change.trusted_proxies_removed=10.0.1.0/24 change.header="X-Forwarded-For → Forwarded" change.max_hops="32 → 99" error="clientip: invalid configuration: MaxHops 99 is outside 0..64"`,
	}, lines)
}

// Many prefixes are listed up to a bound, then counted.
func TestChangeStringBounded(t *testing.T) {
	var ps []netip.Prefix
	for i := range 40 {
		ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 32))
	}
	set, err := NewPrefixSet(ps...)
	require.NoError(t, err)
	s, err := NewStore(Config{}, StoreOptions{})
	require.NoError(t, err)
	ch, err := s.SetRanges("big", set)
	require.NoError(t, err)
	assert.Len(t, ch.TrustedProxies.Added, 40, "the Change keeps every prefix")
	assert.True(t, strings.HasSuffix(ch.String(), "198.51.100.15/32 … (24 more)"), "String: %s", ch)
	assert.Equal(t, "+198.51.100.0/32", PrefixDiff{Added: ps[:1]}.String())
	assert.Equal(t, "+198.51.100.0/32 -198.51.100.1/32", PrefixDiff{Added: ps[:1], Removed: ps[1:2]}.String())
}

// The zero Store trusts nothing, as the zero Config, until a Swap.
func TestStoreZero(t *testing.T) {
	var s Store
	r := s.Resolver()
	require.NotNil(t, r)
	res, err := r.Resolve(Transport{Peer: netip.MustParseAddrPort("10.0.0.5:1")}, nil)
	require.NoError(t, err)
	assert.Equal(t, SourceSocket, res.Source)
	ch, err := s.Swap(Config{TrustedProxies: lbA})
	require.NoError(t, err)
	assert.Equal(t, "trusted_proxies_added=10.0.0.0/24", ch.String())
	assert.True(t, s.Resolver().TrustsPeer(netip.MustParseAddr("10.0.0.5")))
}

// The read path through a Store allocates nothing.
func TestStoreNoAllocs(t *testing.T) {
	s, err := NewStore(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"}, StoreOptions{})
	require.NoError(t, err)
	var trust Trust = s
	tr := Transport{Peer: netip.MustParseAddrPort("10.0.0.5:40000")}
	h := http.Header{"X-Forwarded-For": {"203.0.113.7, 10.0.0.9"}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Resolver().Resolve(tr, h) }), "Store.Resolver().Resolve allocates")
	assert.Zero(t, testing.AllocsPerRun(100, func() { trust.Resolver().Resolve(tr, h) }), "Trust.Resolver().Resolve allocates")
}

// Swaps concurrent with resolutions: every resolution sees exactly one of
// the configurations (run with -race).
func TestStoreRace(t *testing.T) {
	cfgA := Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"}
	cfgB := Config{TrustedProxies: MustParsePrefixSet("192.168.0.0/16"), Header: "X-Forwarded-For"}
	s, err := NewStore(cfgA, StoreOptions{})
	require.NoError(t, err)
	tr := Transport{Peer: netip.MustParseAddrPort("10.0.0.5:40000")}
	h := http.Header{"X-Forwarded-For": {"203.0.113.7, 192.168.1.1"}}
	// Under A the peer is trusted and 192.168.1.1 is the client; under B
	// the peer is the client.
	wantA, wantB := netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("10.0.0.5")

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range 2000 {
			cfg := cfgA
			if i%2 == 0 {
				cfg = cfgB
			}
			_, err := s.Swap(cfg)
			assert.NoError(t, err)
		}
	})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := s.Resolver().Resolve(tr, h)
				if !assert.NoError(t, err) {
					return
				}
				if res.Client != wantA && res.Client != wantB {
					assert.Fail(t, "a resolution under neither configuration", "%v", res)
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, uint64(2000), s.Stats().Changes)
}

// TestChangeComparesEveryConfigField: a Swap whose Change is empty keeps the
// resolver in force, so a Config field the Change does not compare would be
// dropped by every Swap that changes only it: the store would hold the new
// static configuration and serve the old one. Each field set alone must make
// a Change that is not empty; a field of a kind this test does not know
// fails it until Change compares the field and the test sets it.
func TestChangeComparesEveryConfigField(t *testing.T) {
	base := withDefaults(Config{TrustedProxies: lbA})
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		next := base
		v := reflect.ValueOf(&next).Elem().Field(i)
		switch {
		case f.Type == reflect.TypeFor[PrefixSet]():
			v.Set(reflect.ValueOf(v.Interface().(PrefixSet).Union(MustParsePrefixSet("192.0.2.0/24"))))
		case f.Type.Kind() == reflect.Bool:
			v.SetBool(!v.Bool())
		case f.Type.Kind() == reflect.Int:
			v.SetInt(v.Int() + 1)
		case f.Type.Kind() == reflect.String:
			v.SetString("X-Real-Ip")
		default:
			require.Failf(t, "a Config field of a kind this test does not set", "%s %s: make Change compare it, then set it here", f.Name, f.Type)
		}
		ch := diff(base, next, "")
		assert.False(t, ch.Empty(), "Config.%s changed alone: the Change is empty, so Swap would keep the old resolver", f.Name)
		assert.NotEqual(t, "unchanged", ch.String(), "Config.%s changed alone", f.Name)
	}
}

// TestStoreReadsInsideHooks: Update's fn may call the Store's methods that
// do not change it, as its documentation says, and so may OnChange: Config
// and Ranges inside them took the store's lock a second time, and the store
// deadlocked — every later change, and a refresher feeding it, with it.
func TestStoreReadsInsideHooks(t *testing.T) {
	var s *Store
	var seen []string
	s, err := NewStore(Config{TrustedProxies: lbA}, StoreOptions{OnChange: func(Change) {
		seen = append(seen, s.Config().TrustedProxies.String()+" "+s.Ranges()["cdn"].String())
	}})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := s.Update(func(c *Config) { c.TrustedProxies = s.Config().TrustedProxies.Union(lbB) })
		assert.NoError(t, err)
		_, err = s.SetRanges("cdn", MustParsePrefixSet("192.0.2.0/24"))
		assert.NoError(t, err)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the store deadlocked: a read inside Update's fn or OnChange waits for the lock its caller holds")
	}
	assert.Equal(t, []string{"10.0.0.0/24,10.0.1.0/24 ", "10.0.0.0/24,10.0.1.0/24 192.0.2.0/24"}, seen,
		"OnChange sees the configuration it reports installed")
	assert.Equal(t, "10.0.0.0/24,10.0.1.0/24", s.Config().TrustedProxies.String())
}
