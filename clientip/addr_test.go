package clientip

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseRemoteAddr holds parseRemoteAddr to net/netip (an address with a
// port, else one without). Its seeds, which plain go test runs, are the cases
// a RemoteAddr takes or must refuse.
func FuzzParseRemoteAddr(f *testing.F) {
	for _, s := range []string{"192.0.2.1:1234", "[2001:db8::1]:443", "[fe80::1%eth0]:80", "[::ffff:192.0.2.1]:1", "192.0.2.1",
		"2001:db8::1", "192.0.2.1:", "192.0.2.1:65536", "[2001:db8::1]", "", "@", "/run/app.sock", "01.2.3.4:80", "1.2.3.4:080",
		"[::1]:", "[::1]]:80", "127.0.0.1:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseRemoteAddr(s)
		want, err := netip.ParseAddrPort(s)
		if err != nil {
			if a, err2 := netip.ParseAddr(s); err2 == nil {
				want, err = netip.AddrPortFrom(a, 0), nil
			}
		}
		require.Equal(t, err == nil, ok, "parseRemoteAddr(%q) accepts; netip: %v", s, err)
		require.Equal(t, want, got, "parseRemoteAddr(%q)", s)
	})
}

// parseIP parses a plain textual IP address the way the resolver's parsers
// do, so that FuzzParseIP can compare them with net/netip:: dotted-quad IPv4 or RFC 4291
// IPv6 text, exactly the forms [netip.ParseAddr] accepts except that a zone is
// never accepted. It does not allocate.
func parseIP[T text](s T) (netip.Addr, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return parseIPv6(s)
		}
	}
	a, n, ok := parseIPv4(s)
	if !ok || n != len(s) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(a), true
}
