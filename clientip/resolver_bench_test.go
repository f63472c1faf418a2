package clientip

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// benchCases are the scenarios of BenchmarkResolve. Each resolves to a client;
// the header is walked from a trusted peer except in "direct".
func benchCases() []struct {
	name string
	cfg  Config
	t    Transport
	h    http.Header
	want netip.Addr
} {
	trusted := MustParsePrefixSet("10.0.0.0/8, fd00::/8")
	peer := Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")}
	peer6 := Transport{Peer: netip.MustParseAddrPort("[fd00::1]:40000")}
	xff20 := make([]string, 0, 20)
	xff20 = append(xff20, "198.51.100.7")
	for i := 1; i < 20; i++ {
		xff20 = append(xff20, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
	}
	return []struct {
		name string
		cfg  Config
		t    Transport
		h    http.Header
		want netip.Addr
	}{
		{"direct", Config{TrustedProxies: trusted, Header: "X-Forwarded-For"},
			Transport{Peer: netip.MustParseAddrPort("203.0.113.9:51234")},
			http.Header{"X-Forwarded-For": {"127.0.0.1"}}, netip.MustParseAddr("203.0.113.9")},
		{"xff3", Config{TrustedProxies: trusted, Header: "X-Forwarded-For"}, peer,
			http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2, 10.0.0.3"}}, netip.MustParseAddr("198.51.100.7")},
		{"xff20", Config{TrustedProxies: trusted, Header: "X-Forwarded-For"}, peer,
			http.Header{"X-Forwarded-For": {strings.Join(xff20, ", ")}}, netip.MustParseAddr("198.51.100.7")},
		{"xff3v6", Config{TrustedProxies: trusted, Header: "X-Forwarded-For"}, peer6,
			http.Header{"X-Forwarded-For": {"2001:db8:85a3::8a2e:370:7334, fd00::2, fd00::3"}}, netip.MustParseAddr("2001:db8:85a3::8a2e:370:7334")},
		{"forwarded3", Config{TrustedProxies: trusted, Header: "Forwarded"}, peer,
			http.Header{"Forwarded": {`for=198.51.100.7;proto=https, for=10.0.0.2, for="[fd00::3]:8080"`}}, netip.MustParseAddr("198.51.100.7")},
		{"single", Config{TrustedProxies: trusted, Header: "CF-Connecting-IP"}, peer,
			http.Header{"Cf-Connecting-Ip": {"198.51.100.7"}}, netip.MustParseAddr("198.51.100.7")},
		{"proxy", Config{TrustedProxies: trusted},
			Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000"), Proxy: netip.MustParseAddrPort("198.51.100.7:5555")},
			nil, netip.MustParseAddr("198.51.100.7")},
	}
}

func BenchmarkResolve(b *testing.B) {
	for _, c := range benchCases() {
		r := MustNew(c.cfg)
		if res, err := r.Resolve(c.t, c.h); err != nil || res.Client != c.want {
			b.Fatalf("%s: got %v, %v; want %v", c.name, res, err, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Resolve(c.t, c.h)
			}
		})
	}
}

// BenchmarkResolveRequest runs BenchmarkResolve's scenarios through
// ResolveRequest, which also reads the peer from r.RemoteAddr and looks for
// PROXY facts and a Unix-domain listener in the request's context: the
// request-level figure that bench/compare sets beside the other libraries.
// The request carries the context a server without ConnContext gives it, so
// that the lookups walk what they walk in a server.
func BenchmarkResolveRequest(b *testing.B) {
	ctx, cancel := serverContext(nil, Transport{})
	defer cancel()
	for _, c := range benchCases() {
		if c.t.Proxy.IsValid() {
			continue // PROXY facts come from the connection, not the request
		}
		r := MustNew(c.cfg)
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		req.RemoteAddr, req.Header = c.t.Peer.String(), c.h
		if res, err := r.ResolveRequest(req); err != nil || res.Client != c.want {
			b.Fatalf("%s: got %v, %v; want %v", c.name, res, err, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.ResolveRequest(req)
			}
		})
	}
}

// BenchmarkParseRemoteAddr is the part of ResolveRequest that reads the
// socket peer from r.RemoteAddr.
func BenchmarkParseRemoteAddr(b *testing.B) {
	for _, s := range []string{"203.0.113.9:51234", "10.0.0.1:40000", "[fd00::1]:40000"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseRemoteAddr(s)
			}
		})
	}
}

func BenchmarkResolveParallel(b *testing.B) {
	for _, c := range benchCases() {
		r := MustNew(c.cfg)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r.Resolve(c.t, c.h)
				}
			})
		})
	}
}

// BenchmarkResolveHostile measures inputs built to be expensive: they must
// fail fast and stay bounded.
func BenchmarkResolveHostile(b *testing.B) {
	trusted := MustParsePrefixSet("10.0.0.0/8")
	peer := Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")}
	many := strings.Repeat("10.1.2.3, ", 10000) + "10.1.2.3"
	garbage := strings.Repeat("\x00garbage\"", 100<<10/9)
	quotes := strings.Repeat(`for="\"\"\"",`, 1000)
	cases := []struct {
		name string
		cfg  Config
		h    http.Header
	}{
		{"xff10000trusted", Config{TrustedProxies: trusted, Header: "X-Forwarded-For", MaxHeaderBytes: 1 << 20}, http.Header{"X-Forwarded-For": {many}}},
		{"xff100KBgarbage", Config{TrustedProxies: trusted, Header: "X-Forwarded-For"}, http.Header{"X-Forwarded-For": {garbage}}},
		{"forwarded100KBgarbage", Config{TrustedProxies: trusted, Header: "Forwarded"}, http.Header{"Forwarded": {garbage}}},
		{"forwarded1000quoted", Config{TrustedProxies: trusted, Header: "Forwarded", MaxHeaderBytes: 1 << 20}, http.Header{"Forwarded": {quotes}}},
		{"xff10000lines", Config{TrustedProxies: trusted, Header: "X-Forwarded-For"}, http.Header{"X-Forwarded-For": make([]string, 10000)}},
	}
	for _, c := range cases {
		r := MustNew(c.cfg)
		if _, err := r.Resolve(peer, c.h); err == nil {
			b.Fatalf("%s: no error", c.name)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Resolve(peer, c.h)
			}
		})
	}
}

// randomPrefixes returns n distinct prefixes, a mix of IPv4 lengths 8–32 and
// IPv6 lengths 16–128, from a fixed seed.
func randomPrefixes(n int) []netip.Prefix {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]netip.Prefix, 0, n)
	for len(out) < n {
		if rng.IntN(4) > 0 {
			var a [4]byte
			for i := range a {
				a[i] = byte(rng.UintN(256))
			}
			p, _ := netip.AddrFrom4(a).Prefix(8 + rng.IntN(25))
			out = append(out, p)
		} else {
			var a [16]byte
			for i := range a {
				a[i] = byte(rng.UintN(256))
			}
			p, _ := netip.AddrFrom16(a).Prefix(16 + rng.IntN(113))
			out = append(out, p)
		}
	}
	return out
}

// BenchmarkPrefixSet looks up the same probe addresses (half inside the four
// base prefixes, half random) in sets of 4, 100 and 10000 prefixes.
func BenchmarkPrefixSet(b *testing.B) {
	base := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8"),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	probes := make([]netip.Addr, 256)
	for i := range probes {
		switch i % 4 {
		case 0:
			probes[i] = netip.AddrFrom4([4]byte{10, byte(rng.UintN(256)), byte(rng.UintN(256)), byte(rng.UintN(256))})
		case 1:
			probes[i] = netip.AddrFrom4([4]byte{172, 16 + byte(rng.UintN(16)), byte(rng.UintN(256)), byte(rng.UintN(256))})
		case 2:
			probes[i] = netip.AddrFrom4([4]byte{byte(rng.UintN(256)), byte(rng.UintN(256)), byte(rng.UintN(256)), byte(rng.UintN(256))})
		case 3:
			var a [16]byte
			for j := range a {
				a[j] = byte(rng.UintN(256))
			}
			probes[i] = netip.AddrFrom16(a)
		}
	}
	for _, n := range []int{4, 100, 10000} {
		ps := append(append([]netip.Prefix{}, base...), randomPrefixes(n-len(base))...)
		set, err := NewPrefixSet(ps...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				set.Contains(probes[i&255])
				i++
			}
		})
	}
}

// serverContext returns a context built the way net/http's Server builds a
// request's: the server value, what ConnContext adds (here NewConnContext
// with trust and t; nothing when trust is nil), the local address, and a
// cancel node for the connection and one for the request.
func serverContext(trust Trust, t Transport) (context.Context, context.CancelFunc) {
	ctx := context.WithValue(context.Background(), http.ServerContextKey, &http.Server{})
	if trust != nil {
		ctx = NewConnContext(ctx, trust, t)
	}
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 443})
	ctx, cancelConn := context.WithCancel(ctx)
	ctx, cancelReq := context.WithCancel(ctx)
	return ctx, func() { cancelReq(); cancelConn() }
}

// BenchmarkFromRequest runs BenchmarkResolve's scenarios through
// FromRequest on a request whose context a server built with NewConnContext:
// the request-level figure with the peer parsed once per connection.
func BenchmarkFromRequest(b *testing.B) {
	for _, c := range benchCases() {
		r := MustNew(c.cfg)
		ctx, cancel := serverContext(r, c.t)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		req.RemoteAddr, req.Header = c.t.Peer.String(), c.h
		if res, err := FromRequest(req); err != nil || res.Client != c.want {
			b.Fatalf("%s: got %v, %v; want %v", c.name, res, err, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				FromRequest(req)
			}
		})
	}
}
