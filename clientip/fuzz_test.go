package clientip

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// fuzzSeeds are header values from the table tests and a few hostile shapes.
var fuzzSeeds = []string{
	"198.51.100.7", "6.6.6.6, 198.51.100.7, 10.0.0.2", " ,\t198.51.100.7\t , ,, 10.0.0.2 ,",
	"198.51.100.7:8080", "[2001:db8::7]:443", "2001:db8::7", "::ffff:10.0.0.2", "fd00::2%eth0",
	"010.0.0.1", "0x0a.0.0.1", "198.51.100.0/24", "evil.example", "198.51.100.7\x00", "0.0.0.0", "::",
	"198.51.100.7:", "[198.51.100.7]", `"198.51.100.7"`, "1.2.3.4 5.6.7.8", "10.0.0.9, 10.0.0.2",
	"for=192.0.2.60;proto=http;by=203.0.113.43", `for="[2001:db8:cafe::17]:4711"`, `for="192.0.2.60:_p1"`,
	`for="1.1.1.1, for=2.2.2.2", for=10.0.0.2`, `for="1.1.1.1, for=192.0.2.60`, "for=1.1.1.1;@!=x, for=10.0.0.2",
	"for=1.1.1.1;For=2.2.2.2, for=10.0.0.2", `for="192.0.2.\60"`, "for =192.0.2.60", "proto=https ; for=192.0.2.60",
	"for=[2001:db8::1]", `for="2001:db8::1"`, `for="[1.1.1.1]"`, "for=unknown", "for=_hidden", `for="_a%b"`,
	"proto=https;by=10.0.0.1", `for="[fe80::1%25eth0]"`, `for="[::ffff:192.0.2.60]"`, `for=192.0.2.60;x="a,b"`,
	`for="\"\"", for="a\`, "for=10.0.0.1;;;for=2", strings.Repeat("10.1.2.3, ", 40), "1234.1.1.1", "1.2.3.04",
	"255.255.255.255", "256.1.1.1", "1.2.3.4:65535", "1.2.3.4:65536", "[::1]:0", "[::1", "::1]", ",,,", "\t",
}

var fuzzConfigs = []Config{
	{TrustedProxies: private10},
	{TrustedHops: 1},
	{TrustedHops: 2},
	{TrustedHops: 1, TrustedProxies: private10},
	{TrustedProxies: private10, MaxHops: 3},
	{TrustedProxies: private10, TrustUnixSocket: true, Masquerade: MustParsePrefixSet("192.0.2.0/24, 2001:db8::/64")},
	{TrustedProxies: private10, Masquerade: MustParsePrefixSet("10.0.0.0/16, 198.51.100.0/24")},
}

var fuzzTransports = []Transport{
	{Peer: ap("10.0.0.1:40000")},
	{Peer: ap("[::ffff:10.0.0.1]:40000")},
	{Peer: ap("203.0.113.9:1")},
	{Peer: ap("10.0.0.1:40000"), Proxy: ap("10.0.0.2:1")},
	{Peer: ap("10.0.0.1:40000"), Proxy: ap("198.51.100.1:1")},
	{},
}

// checkAgainstModel resolves and checks the invariants and the reference walker.
func checkAgainstModel(t *testing.T, cfg Config, tr Transport, h http.Header) {
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Resolve(tr, h)
	m := refResolve(cfg, tr, h)
	if failureOf(err) != m.fail || res.Client != m.client || res.Hop != m.hop || res.Source != m.source ||
		(m.fail == ok && res.Via != m.via) {
		t.Fatalf("header %q, cfg %+v, transport %v:\nResolve:   %v, %v (via %v)\nreference: %+v", h, cfg, tr, res, err, res.Via, m)
	}
	if err != nil && err != ErrMasqueraded {
		if res.Client.IsValid() {
			t.Fatalf("error %v with a client %v", err, res.Client)
		}
		return
	}
	// Invariants of a resolved client.
	c := res.Client
	if c.Is4In6() || c.Zone() != "" || c.IsUnspecified() {
		t.Fatalf("non-canonical client %v", c)
	}
	// Documented exception: a masquerading node may be a trusted hop.
	if cfg.TrustedHops == 0 && cfg.TrustedProxies.Contains(c) && !res.Masqueraded {
		t.Fatalf("client %v is inside the trusted set", c)
	}
	switch res.Source {
	case SourceSocket:
		if c != tr.Peer.Addr().Unmap().WithZone("") {
			t.Fatalf("socket client %v is not the peer %v", c, tr.Peer)
		}
	case SourceProxyProtocol:
		if c != tr.Proxy.Addr().Unmap() {
			t.Fatalf("PROXY client %v is not the PROXY source %v", c, tr.Proxy)
		}
	default:
		if !appearsIn(c, h[res.Header]) {
			t.Fatalf("client %v does not appear in %q", c, h[res.Header])
		}
	}
}

// appearsIn reports whether some token of the header parses to a. Quoted-pair
// backslashes are removed first, so an escaped node still counts.
func appearsIn(a netip.Addr, lines []string) bool {
	for _, l := range lines {
		l = strings.ReplaceAll(l, `\`, "")
		for _, tok := range strings.FieldsFunc(l, func(r rune) bool { return strings.ContainsRune(" \t,;=\"[]", r) }) {
			for _, cand := range []string{tok, strings.TrimSuffix(tok, ":"+lastPart(tok))} {
				if p, err := netip.ParseAddr(cand); err == nil && p.Unmap() == a {
					return true
				}
			}
		}
	}
	return false
}

func lastPart(s string) string {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

func fuzzResolve(f *testing.F, header string) {
	for _, s := range fuzzSeeds {
		f.Add(s, "", uint8(0))
		f.Add("6.6.6.6", s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, line1, line2 string, sel uint8) {
		cfg := fuzzConfigs[int(sel)%len(fuzzConfigs)]
		cfg.Header = header
		tr := fuzzTransports[int(sel/8)%len(fuzzTransports)]
		lines := []string{line1}
		if sel&0x80 != 0 {
			lines = append(lines, line2)
		}
		checkAgainstModel(t, cfg, tr, http.Header{http.CanonicalHeaderKey(header): lines})
	})
}

func FuzzXFF(f *testing.F)       { fuzzResolve(f, "X-Forwarded-For") }
func FuzzForwarded(f *testing.F) { fuzzResolve(f, "Forwarded") }
func FuzzSingle(f *testing.F)    { fuzzResolve(f, "X-Real-IP") }

// FuzzParseIP checks parseIP against net/netip, the oracle.
func FuzzParseIP(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "::1", "::ffff:1.2.3.4", "2001:db8::", "1:2:3:4:5:6:7:8", "1::8", "::",
		"1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "01.2.3.4", "1.2.3", ":::", "1:2:3:4:5:6:7:8:9", "fe80::1%eth0", "0.0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok1 := parseIP(s)
		gotB, ok2 := parseIP([]byte(s))
		want, err := netip.ParseAddr(s)
		if strings.Contains(s, "%") {
			if ok1 || ok2 {
				t.Fatalf("parseIP(%q) accepted a zone", s)
			}
			return
		}
		if ok1 != (err == nil) || ok2 != ok1 || (ok1 && (got != want || gotB != want)) {
			t.Fatalf("parseIP(%q) = %v %v / %v %v; netip: %v %v", s, got, ok1, gotB, ok2, want, err)
		}
	})
}

// FuzzPrefixSet checks the trie against a linear scan.
func FuzzPrefixSet(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0, 8, 192, 168, 1, 1, 32}, []byte{10, 1, 2, 3})
	f.Add([]byte{172, 16, 0, 0, 12, 0, 0, 0, 0, 0}, []byte{172, 31, 255, 255})
	f.Add([]byte{0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32}, []byte{0x20, 1, 0x0d, 0xb8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, spec, probe []byte) {
		// spec: a sequence of (4 bytes, length) or, with length > 32, (16 bytes, length).
		var ps []netip.Prefix
		for len(spec) >= 5 {
			if spec[4] <= 32 {
				p, _ := netip.AddrFrom4([4]byte(spec[:4])).Prefix(int(spec[4]))
				ps, spec = append(ps, p), spec[5:]
				continue
			}
			if len(spec) < 17 {
				break
			}
			p, _ := netip.AddrFrom16([16]byte(spec[:16])).Prefix(int(spec[16]) % 129)
			ps, spec = append(ps, p), spec[17:]
		}
		set, err := NewPrefixSet(ps...)
		if err != nil {
			t.Fatal(err)
		}
		var a netip.Addr
		switch {
		case len(probe) >= 16:
			a = netip.AddrFrom16([16]byte(probe[:16]))
		case len(probe) >= 4:
			a = netip.AddrFrom4([4]byte(probe[:4]))
		default:
			return
		}
		want := false
		for _, p := range ps {
			// The documented canonical form: mapped prefixes are IPv4 prefixes.
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			if p.Contains(a.Unmap()) {
				want = true
			}
		}
		if got := set.Contains(a); got != want {
			t.Fatalf("Contains(%v) = %v, linear scan of %v says %v", a, got, ps, want)
		}
	})
}

// parseIPv4Ref is parseIPv4 as first written, an octet at a time with a
// digit counter: the reference FuzzParseIPv4 holds the faster one to, down to
// how many bytes it reports for a quad followed by more text.
func parseIPv4Ref(s string) (a [4]byte, n int, ok bool) {
	for f := 0; f < 4; f++ {
		if f > 0 {
			if n >= len(s) || s[n] != '.' {
				return a, 0, false
			}
			n++
		}
		start, v := n, 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			v = v*10 + int(s[n]-'0')
			n++
			if n-start > 3 {
				return a, 0, false
			}
		}
		if n == start || v > 255 || (s[start] == '0' && n-start > 1) {
			return a, 0, false
		}
		a[f] = byte(v)
	}
	return a, n, true
}

func FuzzParseIPv4(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4:80", "255.255.255.255", "256.1.1.1", "1.2.3.2555", "01.2.3.4",
		"1.2.3.0", "1.2.3.00", "1.2.3", "1.2.3.4.5", "1..2.3", "1.2.3.4]", "9999.1.1.1", "100.200.250.255x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, n, ok := parseIPv4(s)
		ab, nb, okb := parseIPv4([]byte(s))
		wa, wn, wok := parseIPv4Ref(s)
		if ok != wok || ok && (a != wa || n != wn) || okb != ok || ab != a || nb != n {
			t.Fatalf("parseIPv4(%q) = %v %d %v; []byte: %v %d %v; reference: %v %d %v", s, a, n, ok, ab, nb, okb, wa, wn, wok)
		}
	})
}
