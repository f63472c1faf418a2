package clientip

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzSeeds are header values from the table tests and a few hostile shapes.
var fuzzSeeds = []string{
	"2001:db8:9::1, 2001:db8:1:ffff::2, 2001:db8:2:3::5", "2001:db8:1::, 2001:db8:2:3::6, ::ffff:10.0.0.2",
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
	"fe80::5%eth0", "[fe80::5%eth0]:8080", "198.51.100.7, fe80::5%veth-origin0", "fe80::5%25eth0", "fe80::5%", "fe80::5%eth 0",
	"fe80::5%eth0%1", "fe80::5%abcdefghijklmnop", "fe80::5%abcdefghijklmno", "2001:db8::1%eth0", "::ffff:10.0.0.1%eth0",
	"fd00::2%eth0", "[fe80::5%eth0", "fe80::5%\x00", "192.0.2.1%eth0", `for="[fe80::5%eth0]"`, "febf::1%7", "fec0::1%7",
}

var fuzzConfigs = []Config{
	{TrustedProxies: private10},
	{TrustedHops: 1},
	{TrustedHops: 2},
	{TrustedHops: 1, TrustedProxies: private10},
	{TrustedProxies: private10, MaxHops: 3},
	{TrustedProxies: private10, TrustUnixSocket: true, Masquerade: MustParsePrefixSet("192.0.2.0/24, 2001:db8::/64")},
	{TrustedProxies: private10, Masquerade: MustParsePrefixSet("10.0.0.0/16, 198.51.100.0/24")},
	{TrustedProxies: MustParsePrefixSet("10.0.0.0/8, 2001:db8:1::/48, 2001:db8:2:3::5/128, fd00::/8")},
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
	require.NoError(t, err)
	res, err := r.Resolve(tr, h)
	m := refResolve(cfg, tr, h)
	require.Equal(t, m, modelOf(res, err), "header %q, cfg %+v, transport %v: Resolve %v (%v)", h, cfg, tr, res, err)
	require.Equal(t, m.fail == ReasonMasqueraded, res.Masqueraded, "Masqueraded flag")
	if err != nil && err != ErrMasqueraded {
		require.False(t, res.Client.IsValid(), "error %v with a client %v", err, res.Client)
		return
	}
	// Invariants of a resolved client.
	c := res.Client
	require.False(t, c.Is4In6() || c.Zone() != "" || c.IsUnspecified(), "non-canonical client %v", c)
	// Documented exception: a masquerading node may be a trusted hop.
	if cfg.TrustedHops == 0 && !res.Masqueraded {
		require.False(t, cfg.TrustedProxies.Contains(c), "client %v is inside the trusted set", c)
	}
	switch res.Source {
	case SourceSocket:
		require.Equal(t, tr.Peer.Addr().Unmap().WithZone(""), c, "a socket client is the peer")
	case SourceProxyProtocol:
		require.Equal(t, tr.Proxy.Addr().Unmap(), c, "a PROXY client is the PROXY source")
	default:
		require.True(t, appearsIn(c, h[res.Header]), "client %v does not appear in %q", c, h[res.Header])
	}
}

// appearsIn reports whether some token of the header parses to a. Quoted-pair
// backslashes are removed first, so an escaped node still counts.
func appearsIn(a netip.Addr, lines []string) bool {
	for _, l := range lines {
		l = strings.ReplaceAll(l, `\`, "")
		for _, tok := range strings.FieldsFunc(l, func(r rune) bool { return strings.ContainsRune(" \t,;=\"[]", r) }) {
			for _, cand := range []string{tok, strings.TrimSuffix(tok, ":"+lastPart(tok))} {
				if p, err := netip.ParseAddr(cand); err == nil && p.WithZone("").Unmap() == a {
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
	for _, s := range append(fuzzSeeds, longSeeds...) {
		f.Add(s, "", uint8(0))
		f.Add("6.6.6.6", s, uint8(3))
		f.Add(s, "10.0.0.9", uint8(146)) // two lines, peer 10.0.0.1, masquerading nodes 10.0.0.0/16
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

// longSeeds are Forwarded nodes and elements longer than any bound the
// parser keeps: an obfuscated node or port of any length has its kind.
var longSeeds = []string{
	"for=_" + strings.Repeat("x", 128), `for="_` + strings.Repeat("y", 200) + `:_p"`,
	`for="[2001:db8::7]:_` + strings.Repeat("z", 200) + `"`, `for="\_` + strings.Repeat(`\q`, 100) + `"`,
	`for="192.0.2.60:\_` + strings.Repeat("w", 100) + `", for=10.0.0.2`,
	"for=192.0.2.1;a=1;b=2;c=3;d=4;e=5;f=6;g=7;h=8;i=9;j=10;k=11;l=12;m=13;n=14;o=15",
	"for=192.0.2.1;a=1;b=2;c=3;d=4;e=5;f=6;g=7;h=8;i=9;j=10;k=11;l=12;m=13;n=14;o=15;p=16",
}

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
			require.False(t, ok1 || ok2, "parseIP(%q) accepted a zone", s)
			return
		}
		if err != nil {
			want = netip.Addr{}
		}
		require.Equal(t, err == nil, ok1, "parseIP(%q) accepts; netip: %v", s, err)
		require.Equal(t, want, got, "parseIP(%q)", s)
		require.Equal(t, ok1, ok2, "parseIP([]byte(%q)) accepts", s)
		require.Equal(t, got, gotB, "parseIP([]byte(%q))", s)
	})
}

// FuzzPrefixSet checks the trie against a linear scan, and Covers against
// Contains.
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
		require.NoError(t, err)
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
		require.Equal(t, want, set.Contains(a), "Contains(%v); linear scan of %v", a, ps)
		// Covers is sound: a prefix it covers holds no address outside
		// the set. It is complete for the set's own prefixes, those that
		// hold ::ffff:0:0/96 aside (their mapped part is IPv4's).
		for bits := 0; bits <= a.BitLen(); bits += 4 {
			if q, _ := a.Prefix(bits); set.Covers(q) {
				require.True(t, set.Contains(a), "Covers(%v) of %v, but not Contains(%v)", q, ps, a)
			}
		}
		mapped := netip.MustParseAddr("::ffff:0:0")
		for _, p := range ps {
			if p.Bits() >= 96 || !p.Contains(mapped) {
				require.True(t, set.Covers(p), "%v does not cover its own %v", ps, p)
			}
		}
	})
}

// FuzzParsePrefixSet checks the parser of configured prefix lists (flags,
// environment variables, files): no panic; an error wraps ErrInvalidPrefix;
// a set holds only canonical prefixes (no host bits, no zone, no
// IPv4-mapped alias), reads back from its String unchanged, and contains the
// first address of every prefix in it.
func FuzzParsePrefixSet(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8, 192.0.2.7 2001:db8::/32 loopback", "PRIVATE,cgnat\tlinklocal", "",
		"10.0.0.1/8", "fe80::1%eth0", "fe80::/10%eth0", "::ffff:10.0.0.0/104", "::ffff:10.0.0.1", "::ffff:0:0/96",
		"0.0.0.0/0", "::/0", "1.2.3.4/33", "1.2.3.4/-1", "01.2.3.4/8", "1.2.3.4/08", "2001:db8::/32/1", " , ,\r\n",
		"192.0.2.0/24,192.0.2.0/25,192.0.2.128/25", "::ffff:192.0.2.0/120 192.0.2.0/24"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParsePrefixSet(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidPrefix, "%q", s)
			return
		}
		for _, p := range set.Prefixes() {
			a := p.Addr()
			require.True(t, p.IsValid() && p.Masked() == p && a.Zone() == "" && !a.Is4In6(), "non-canonical %s from %q", p, s)
			require.True(t, set.Contains(a), "%s not in its own set, from %q", p, s)
		}
		again, err := ParsePrefixSet(set.String())
		require.NoError(t, err, "String of the set of %q", s)
		require.Equal(t, set.Prefixes(), again.Prefixes(), "%q read back from its String", s)
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
		require.Equal(t, wok, ok, "parseIPv4(%q) accepts", s)
		if ok {
			require.Equal(t, wa, a, "parseIPv4(%q)", s)
			require.Equal(t, wn, n, "parseIPv4(%q) length", s)
		}
		require.Equal(t, []any{a, n, ok}, []any{ab, nb, okb}, "parseIPv4([]byte(%q))", s)
	})
}

// FuzzBack6 checks walkXFF's backward IPv6 reader against parseListAddr on
// the line's last element: when back6 accepts it, parseListAddr reads the
// same address, and when the element is plain IPv6 text (hex fields and
// colons only) that parseListAddr accepts, back6 accepts it too.
func FuzzBack6(f *testing.F) {
	for _, s := range []string{"::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7:8:9", "1::2::3", ":::", "1:::2", ":1", "1:", "12345::", "0001::", "::ffff:c000:201",
		"2001:db8::7, fd00::2", " fd00::3 ", "6.6.6.6,\t::1", "::ffff:1.2.3.4", "[::1]:80", "fe80::1%eth0",
		"1 :2", "::1 ::2", "abcd:EF01::", "", ",", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, l string) {
		hi, lo, j := back6(l, len(l))
		a := addrFrom128(hi, lo).Unmap()
		last := l[strings.LastIndexByte(l, ',')+1:]
		e := trimOWS(last)
		if j >= -1 {
			require.Equal(t, len(l)-len(last)-1, j, "back6(%q) stops at the wrong place", l)
			want, why := parseListAddr(e)
			if why == ReasonUnspecified {
				require.True(t, a.IsUnspecified(), "back6(%q) = %v; parseListAddr: unspecified", l, a)
				return
			}
			require.Equal(t, ReasonNone, why, "back6(%q) = %v; parseListAddr refuses %q", l, a, e)
			require.Equal(t, want, a, "back6(%q)", l)
			return
		}
		if e != "" && strings.Trim(e, "0123456789abcdefABCDEF:") == "" {
			_, why := parseListAddr(e)
			require.NotEqual(t, ReasonNone, why, "back6(%q) refuses %q, which parseListAddr reads", l, e)
		}
	})
}
