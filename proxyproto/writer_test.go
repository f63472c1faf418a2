package proxyproto

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormatRoundTrip(t *testing.T) {
	tl := mustTLVs(TLV{TLVAuthority, "example.com"}, TLV{TLVUniqueID, "id-1"}, TLV{TLVNoop, "\x00\x00\x00"})
	tests := []struct {
		name string
		in   Header
		want Header // after parsing; zero: same as in
		wire string // expected bytes, when given
	}{
		{name: "v1 TCP4", in: Header{Version: 1, Command: CommandProxy, Source: ap("192.0.2.1:1234"), Destination: ap("198.51.100.1:443")},
			wire: "PROXY TCP4 192.0.2.1 198.51.100.1 1234 443\r\n"},
		{name: "v1 TCP6", in: Header{Version: 1, Command: CommandProxy, Source: ap("[2001:db8::1]:1"), Destination: ap("[2001:db8::2]:2")},
			wire: "PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n"},
		{name: "v1 mixed families become TCP6 with IPv4-mapped", in: Header{Version: 1, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("[2001:db8::2]:2")},
			wire: "PROXY TCP6 ::ffff:192.0.2.1 2001:db8::2 1 2\r\n"},
		{name: "v1 LOCAL is UNKNOWN", in: Header{Version: 1, Command: CommandLocal}, wire: "PROXY UNKNOWN\r\n"},
		{name: "v2 TCP4", in: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:56324"), Destination: ap("198.51.100.1:443")},
			wire: string(v2(0x21, 0x11, addrs4("192.0.2.1", "198.51.100.1", 56324, 443)))},
		{name: "v2 IPv4-mapped input is written as TCP4", in: Header{Version: 2, Command: CommandProxy, Source: ap("[::ffff:192.0.2.1]:1"), Destination: ap("198.51.100.1:2")},
			want: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("198.51.100.1:2")}},
		{name: "v2 TCP6 with TLVs", in: Header{Version: 2, Command: CommandProxy, Source: ap("[2001:db8::1]:1"), Destination: ap("[2001:db8::2]:2"), TLVs: tl},
			wire: string(v2(0x21, 0x21, addrs6("2001:db8::1", "2001:db8::2", 1, 2), []byte(tl.raw)))},
		{name: "v2 LOCAL", in: Header{Version: 2, Command: CommandLocal}, wire: string(v2(0x20, 0x00, nil))},
		{name: "v2 with checksum", in: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("198.51.100.1:2"), TLVs: tl, AddChecksum: true},
			wire: string(withCRC(v2(0x21, 0x11, addrs4("192.0.2.1", "198.51.100.1", 1, 2), []byte(tl.raw))))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, WriteHeader(&buf, tt.in))
			if tt.wire != "" {
				assert.Equal(t, tt.wire, buf.String(), "wire")
			}
			got, n, err := ParseHeader(buf.Bytes())
			require.NoError(t, err)
			assert.Equal(t, buf.Len(), n)
			want := tt.want
			if want == (Header{}) {
				want = tt.in
			}
			if want.AddChecksum {
				// The parsed checksum is one more TLV.
				sum, _ := got.TLVs.CRC32C()
				want.AddChecksum = false
				want.TLVs = mustTLVs(append(collect(want.TLVs), TLV{TLVCRC32C, string([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})})...)
			}
			assert.Equal(t, want, got, "parsed")
		})
	}
}

// Spec 2.2.3: a sender that sends a PP2_TYPE_CRC32C field MUST fill it with
// the checksum of the header it sends. A parsed header keeps its verified
// checksum in TLVs; one HAProxy sends from an IPv4-mapped frontend (TCP6
// with ::ffff:a.b.c.d, crc32c) is written again as TCP4, so that checksum is
// another header's. Written as given, it made the next receiver refuse the
// header (ErrChecksum), and with AddChecksum there were two.
func TestFormatChecksumOfTheWrittenHeader(t *testing.T) {
	parsed, _, err := ParseHeader(withCRC(v2(0x21, 0x21, addrs6("::ffff:192.0.2.1", "::ffff:198.51.100.1", 1, 2), tlv(0x05, []byte("id-1")))))
	require.NoError(t, err)
	again := parsed
	again.AddChecksum = true
	tests := []struct {
		name string
		in   Header
	}{
		{"a parsed header written again", parsed},
		{"a parsed header written again with AddChecksum", again},
		{"a zero CRC32C field given in TLVs", Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("198.51.100.1:2"),
			TLVs: mustTLVs(TLV{TLVUniqueID, "id-1"}, TLV{TLVCRC32C, "\x00\x00\x00\x00"})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.in.Format()
			require.NoError(t, err)
			got, n, err := ParseHeader(b)
			require.NoError(t, err, "the written header")
			assert.Equal(t, len(b), n)
			var types []TLVType
			for f := range got.TLVs.All() {
				types = append(types, f.Type)
			}
			assert.Equal(t, []TLVType{TLVUniqueID, TLVCRC32C}, types, "one checksum, where it was")
			assert.Equal(t, parsed.Source, got.Source)
		})
	}
}

func collect(t TLVs) []TLV {
	var out []TLV
	for f := range t.All() {
		out = append(out, f)
	}
	return out
}

func TestFormatErrors(t *testing.T) {
	s, d := ap("192.0.2.1:1"), ap("198.51.100.1:2")
	tests := []struct {
		name string
		h    Header
	}{
		{"version 0", Header{Command: CommandProxy, Source: s, Destination: d}},
		{"version 3", Header{Version: 3, Command: CommandProxy, Source: s, Destination: d}},
		{"no command", Header{Version: 2, Source: s, Destination: d}},
		{"no source", Header{Version: 2, Command: CommandProxy, Destination: d}},
		{"zone", Header{Version: 2, Command: CommandProxy, Source: netip.AddrPortFrom(netip.MustParseAddr("fe80::1%eth0"), 1), Destination: ap("[2001:db8::2]:2")}},
		{"TLVs on v1", Header{Version: 1, Command: CommandProxy, Source: s, Destination: d, TLVs: mustTLVs(TLV{TLVNoop, ""})}},
		{"checksum on v1", Header{Version: 1, Command: CommandProxy, Source: s, Destination: d, AddChecksum: true}},
		{"longer than 65535", Header{Version: 2, Command: CommandProxy, Source: s, Destination: d, TLVs: mustTLVs(TLV{TLVNoop, string(make([]byte, 65530))})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, WriteHeader(new(bytes.Buffer), tt.h), ErrInvalidHeaderValue)
		})
	}
}
