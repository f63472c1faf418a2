package clientip

import (
	"encoding"
	"errors"
	"flag"
	"io"
	"net/netip"
	"testing"
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
				if !errors.Is(err, ErrInvalidPrefix) {
					t.Fatalf("err = %v, want ErrInvalidPrefix", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := ParsePrefixSet("10.0.0.1/8"); err == nil || !containsStr(err.Error(), "did you mean 10.0.0.0/8") {
		t.Errorf("host-bits error does not suggest the fix: %v", err)
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
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
		if got := s.Contains(netip.MustParseAddr(tc.a)); got != tc.want {
			t.Errorf("Contains(%s) = %v, want %v", tc.a, got, tc.want)
		}
	}
	if s.Contains(netip.Addr{}) {
		t.Error("the invalid address is in the set")
	}
	var zero PrefixSet
	if zero.Contains(netip.MustParseAddr("10.0.0.1")) || zero.Len() != 0 {
		t.Error("the zero set is not empty")
	}
	all := MustParsePrefixSet("0.0.0.0/0")
	if !all.Contains(netip.MustParseAddr("203.0.113.1")) || all.Contains(netip.MustParseAddr("2001:db8::1")) {
		t.Error("0.0.0.0/0 must hold every IPv4 address and no IPv6 address")
	}
	// A shorter prefix added after a longer one covers it.
	s2 := MustParsePrefixSet("10.1.2.0/24, 10.0.0.0/8")
	if !s2.Contains(netip.MustParseAddr("10.200.0.1")) || !s2.Contains(netip.MustParseAddr("10.1.2.3")) {
		t.Error("covering prefix lost")
	}
}

func TestPrefixSetFlagAndText(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var s PrefixSet
	fs.Var(&s, "trusted", "")
	if err := fs.Parse([]string{"-trusted", "10.0.0.0/8", "-trusted", "loopback,192.0.2.1"}); err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "10.0.0.0/8,127.0.0.0/8,192.0.2.1/32,::1/128" {
		t.Errorf("repeated flag accumulates: %q", got)
	}
	if err := fs.Parse([]string{"-trusted", "10.0.0.1/8"}); err == nil {
		t.Error("bad flag value accepted")
	}

	copied := s
	if err := s.UnmarshalText([]byte("192.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	if s.String() != "192.0.2.0/24" {
		t.Errorf("UnmarshalText replaces: %q", s.String())
	}
	if copied.Len() != 4 {
		t.Error("UnmarshalText changed a copy")
	}
	b, _ := copied.MarshalText()
	var back PrefixSet
	if err := back.UnmarshalText(b); err != nil || back.String() != copied.String() {
		t.Errorf("text round trip: %q, %v", back.String(), err)
	}
	if err := back.UnmarshalText([]byte("bogus")); err == nil {
		t.Error("UnmarshalText accepted bogus")
	}
}

func TestPresetsAndUnion(t *testing.T) {
	u := Loopback().Union(Private()).Union(LinkLocal()).Union(CGNAT())
	for _, a := range []string{"127.0.0.1", "::1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "fd00::1", "169.254.1.1", "fe80::1", "100.64.0.1"} {
		if !u.Contains(netip.MustParseAddr(a)) {
			t.Errorf("%s not in the presets", a)
		}
	}
	if u.Contains(netip.MustParseAddr("8.8.8.8")) {
		t.Error("8.8.8.8 in the presets")
	}
	// RFC 2544's 198.18.0.0/15 is not private (realclientip-go once typo'd it as 192.18.0.0/15).
	if Private().Contains(netip.MustParseAddr("192.18.0.1")) || Private().Contains(netip.MustParseAddr("198.18.0.1")) {
		t.Error("private preset covers benchmark or public space")
	}
	ps := u.Prefixes()
	ps[0] = netip.MustParsePrefix("8.0.0.0/8")
	if u.Contains(netip.MustParseAddr("8.8.8.8")) {
		t.Error("Prefixes exposes internal state")
	}
	if _, err := NewPrefixSet(netip.MustParsePrefix("10.0.0.1/8")); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("NewPrefixSet accepted host bits: %v", err)
	}
	if _, err := NewPrefixSet(netip.Prefix{}); !errors.Is(err, ErrInvalidPrefix) {
		t.Errorf("NewPrefixSet accepted the zero prefix: %v", err)
	}
}

func TestPrefixSetNoAllocs(t *testing.T) {
	s := Private()
	a := netip.MustParseAddr("::ffff:10.1.2.3")
	if n := testing.AllocsPerRun(100, func() { s.Contains(a) }); n != 0 {
		t.Errorf("Contains allocates %v", n)
	}
}
