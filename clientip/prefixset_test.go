package clientip

import (
	"encoding"
	"flag"
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	_ flag.Value               = (*PrefixSet)(nil)
	_ encoding.TextUnmarshaler = (*PrefixSet)(nil)
	_ encoding.TextMarshaler   = PrefixSet{}
)

func TestParsePrefixSet(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // String() of the set; "" with wantErr
		err  bool
	}{
		{"empty string is the empty set", "", "", false},
		{"commas and white space separate entries", "10.0.0.0/8,192.0.2.7 \t2001:db8::/32\n", "10.0.0.0/8,192.0.2.7/32,2001:db8::/32", false},
		{"bare address is one host", "192.0.2.7", "192.0.2.7/32", false},
		{"bare IPv6 address is one host", "2001:db8::1", "2001:db8::1/128", false},
		{"duplicates collapse", "10.0.0.0/8, 10.0.0.0/8", "10.0.0.0/8", false},
		{"preset loopback", "loopback", "127.0.0.0/8,::1/128", false},
		{"preset names in any case", "LinkLocal", "169.254.0.0/16,fe80::/10", false},
		{"preset private", "private", "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7", false},
		{"preset cgnat", "cgnat", "100.64.0.0/10", false},
		{"mapped bare address is stored unmapped", "::ffff:10.0.0.1", "10.0.0.1/32", false},
		{"mapped prefix is stored as IPv4 (no alias)", "::ffff:10.0.0.0/104", "10.0.0.0/8", false},
		{"host bits set is an error naming the fix", "10.0.0.1/8", "", true},
		{"zone is an error", "fe80::1%eth0", "", true},
		{"host name is an error", "proxy.example", "", true},
		{"bad length is an error", "10.0.0.0/33", "", true},
		{"leading zeros are an error", "010.0.0.0/8", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParsePrefixSet(tc.in)
			if tc.err {
				require.ErrorIs(t, err, ErrInvalidPrefix)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.String())
		})
	}
	_, err := ParsePrefixSet("10.0.0.1/8")
	assert.ErrorContains(t, err, "did you mean 10.0.0.0/8", "the host-bits error suggests the fix")
}

func TestPrefixSetContains(t *testing.T) {
	s := MustParsePrefixSet("10.0.0.0/8, 172.16.0.0/12, 192.0.2.7, 2001:db8::/32, fe80::/10")
	tests := []struct {
		a    string
		want bool
	}{
		{"10.1.2.3", true}, {"11.0.0.0", false}, {"172.31.255.255", true}, {"172.32.0.0", false},
		{"192.0.2.7", true}, {"192.0.2.8", false}, {"2001:db8:ffff::1", true}, {"2001:db9::", false},
		{"::ffff:10.1.2.3", true}, // mapped alias is inside
		{"fe80::1%eth0", true},    // zone ignored
		{"::ffff:192.0.2.8", false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, s.Contains(netip.MustParseAddr(tc.a)), "Contains(%s)", tc.a)
	}
	assert.False(t, s.Contains(netip.Addr{}), "the invalid address is in the set")
	var zero PrefixSet
	assert.False(t, zero.Contains(netip.MustParseAddr("10.0.0.1")), "the zero set is empty")
	assert.Zero(t, zero.Len())
	all := MustParsePrefixSet("0.0.0.0/0")
	assert.True(t, all.Contains(netip.MustParseAddr("203.0.113.1")), "0.0.0.0/0 holds every IPv4 address")
	assert.False(t, all.Contains(netip.MustParseAddr("2001:db8::1")), "0.0.0.0/0 holds no IPv6 address")
	// A shorter prefix added after a longer one covers it.
	s2 := MustParsePrefixSet("10.1.2.0/24, 10.0.0.0/8")
	assert.True(t, s2.Contains(netip.MustParseAddr("10.200.0.1")), "covering prefix lost")
	assert.True(t, s2.Contains(netip.MustParseAddr("10.1.2.3")))
}

func TestPrefixSetFlagAndText(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var s PrefixSet
	fs.Var(&s, "trusted", "")
	require.NoError(t, fs.Parse([]string{"-trusted", "10.0.0.0/8", "-trusted", "loopback,192.0.2.1"}))
	assert.Equal(t, "10.0.0.0/8,127.0.0.0/8,192.0.2.1/32,::1/128", s.String(), "a repeated flag accumulates")
	assert.Error(t, fs.Parse([]string{"-trusted", "10.0.0.1/8"}), "bad flag value accepted")

	copied := s
	require.NoError(t, s.UnmarshalText([]byte("192.0.2.0/24")))
	assert.Equal(t, "192.0.2.0/24", s.String(), "UnmarshalText replaces")
	assert.Equal(t, 4, copied.Len(), "UnmarshalText changed a copy")
	b, _ := copied.MarshalText()
	var back PrefixSet
	require.NoError(t, back.UnmarshalText(b))
	assert.Equal(t, copied.String(), back.String(), "text round trip")
	assert.Error(t, back.UnmarshalText([]byte("bogus")))
}

func TestPresetsAndUnion(t *testing.T) {
	u := Loopback().Union(Private()).Union(LinkLocal()).Union(CGNAT())
	for _, a := range []string{"127.0.0.1", "::1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "fd00::1", "169.254.1.1", "fe80::1", "100.64.0.1"} {
		assert.True(t, u.Contains(netip.MustParseAddr(a)), "%s not in the presets", a)
	}
	assert.False(t, u.Contains(netip.MustParseAddr("8.8.8.8")), "8.8.8.8 in the presets")
	// RFC 2544's 198.18.0.0/15 is not private (realclientip-go once typo'd it as 192.18.0.0/15).
	assert.False(t, Private().Contains(netip.MustParseAddr("192.18.0.1")), "private preset covers public space")
	assert.False(t, Private().Contains(netip.MustParseAddr("198.18.0.1")), "private preset covers benchmark space")
	ps := u.Prefixes()
	ps[0] = netip.MustParsePrefix("8.0.0.0/8")
	assert.False(t, u.Contains(netip.MustParseAddr("8.8.8.8")), "Prefixes exposes internal state")
	_, err := NewPrefixSet(netip.MustParsePrefix("10.0.0.1/8"))
	assert.ErrorIs(t, err, ErrInvalidPrefix, "NewPrefixSet accepted host bits")
	_, err = NewPrefixSet(netip.Prefix{})
	assert.ErrorIs(t, err, ErrInvalidPrefix, "NewPrefixSet accepted the zero prefix")
}

func TestPrefixSetNoAllocs(t *testing.T) {
	s := Private()
	a := netip.MustParseAddr("::ffff:10.1.2.3")
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Contains(a) }), "Contains allocates")
}
