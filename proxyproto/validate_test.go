package proxyproto

import (
	"bytes"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	pp "github.com/pires/go-proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One named test per rule of the PROXY protocol specification (haproxy
// doc/proxy-protocol.txt) and per check this package adds. Section numbers are
// the spec's.
func TestParseHeader(t *testing.T) {
	const (
		p4   = 0x21 // v2 PROXY
		l4   = 0x20 // v2 LOCAL
		tcp4 = 0x11
		tcp6 = 0x21
	)
	a4 := addrs4("192.0.2.1", "198.51.100.1", 56324, 443)
	unique128 := bytes.Repeat([]byte{'u'}, 128)
	tests := []struct {
		name    string
		in      []byte
		want    Header
		wantN   int // 0: len(in)
		wantErr error
	}{
		// 2.1 version 1
		{name: "2.1 v1 TCP4", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n"),
			want: Header{Version: 1, Command: CommandProxy, Source: ap("192.0.2.1:56324"), Destination: ap("198.51.100.1:443")}},
		{name: "2.1 v1 TCP6", in: []byte("PROXY TCP6 2001:db8::1 2001:db8::2 56324 443\r\n"),
			want: Header{Version: 1, Command: CommandProxy, Source: ap("[2001:db8::1]:56324"), Destination: ap("[2001:db8::2]:443")}},
		{name: "2.1 v1 TCP6 IPv4-mapped source is unmapped", in: []byte("PROXY TCP6 ::ffff:192.0.2.1 2001:db8::2 1 2\r\n"),
			want: Header{Version: 1, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("[2001:db8::2]:2")}},
		{name: "2.1 v1 bytes after the line are not part of it", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.1 1 2\r\nGET / HTTP/1.1\r\n"),
			want: Header{Version: 1, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("198.51.100.1:2")}, wantN: 39},
		{name: "2.1 v1 UNKNOWN uses the real connection (LOCAL)", in: []byte("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n"),
			want: Header{Version: 1, Command: CommandLocal}},
		{name: "2.1 v1 UNKNOWN alone", in: []byte("PROXY UNKNOWN\r\n"), want: Header{Version: 1, Command: CommandLocal}},
		{name: "2.1 v1 TCP4 with IPv6 addresses", in: []byte("PROXY TCP4 2001:db8::1 2001:db8::2 1 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 TCP6 with IPv4 addresses", in: []byte("PROXY TCP6 192.0.2.1 198.51.100.1 1 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 IPv4 with leading zeros", in: []byte("PROXY TCP4 192.0.2.01 198.51.100.1 1 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 port with leading zeros", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.1 01 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 port above 65535", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.1 65536 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 zone in address", in: []byte("PROXY TCP6 fe80::1%eth0 2001:db8::2 1 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 two spaces", in: []byte("PROXY  TCP4 192.0.2.1 198.51.100.1 1 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 missing port", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.1 1\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 unknown protocol", in: []byte("PROXY UDP4 192.0.2.1 198.51.100.1 1 2\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 single LF must not end the line", in: []byte("PROXY TCP4 192.0.2.1 198.51.100.1 1 2\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 no CRLF in the first 107 bytes", in: []byte("PROXY UNKNOWN " + strings.Repeat("x", 100) + "\r\n"), wantErr: ErrInvalidHeader},
		{name: "2.1 v1 107 bytes is the limit", in: []byte("PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
			want: Header{Version: 1, Command: CommandLocal}},
		{name: "2.1 v1 incomplete line", in: []byte("PROXY TCP4 192.0.2.1 19"), wantErr: ErrIncomplete},

		// 2.2 version 2
		{name: "2.2 v2 PROXY TCP4", in: v2(p4, tcp4, a4),
			want: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:56324"), Destination: ap("198.51.100.1:443")}},
		{name: "2.2 v2 PROXY TCP6", in: v2(p4, tcp6, addrs6("2001:db8::1", "2001:db8::2", 1, 2)),
			want: Header{Version: 2, Command: CommandProxy, Source: ap("[2001:db8::1]:1"), Destination: ap("[2001:db8::2]:2")}},
		{name: "2.2 v2 TCP6 with IPv4-mapped addresses is normalised", in: v2(p4, tcp6, addrs6("::ffff:192.0.2.1", "2001:db8::2", 1, 2)),
			want: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:1"), Destination: ap("[2001:db8::2]:2")}},
		{name: "2.2 v2 LOCAL UNSPEC", in: v2(l4, 0x00, nil), want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2 v2 LOCAL discards its addresses and TLVs", in: v2(l4, tcp4, a4, tlv(0x02, []byte("evil.example"))),
			want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2 v2 LOCAL TLVs that are not well formed are discarded unread", in: v2(l4, tcp4, a4, []byte{0x02, 0, 9}),
			want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2 v2 LOCAL like an AWS NLB health check (TLVs, no address block)",
			in:   withCRC(v2(l4, tcp4, nil, tlv(0x04, make([]byte, 70)))),
			want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2 v2 LOCAL must not assume zero length", in: v2(l4, tcp4, []byte{1, 2, 3}), want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2 v2 version nibble must be 2", in: v2(0x11, tcp4, a4), wantErr: ErrInvalidHeader},
		{name: "2.2 v2 unknown command", in: v2(0x22, tcp4, a4), wantErr: ErrInvalidHeader},
		{name: "2.2 v2 PROXY with UNSPEC family", in: v2(p4, 0x00, nil), wantErr: ErrInvalidHeader},
		{name: "2.2 v2 undefined family/transport byte", in: v2(p4, 0x13, a4), wantErr: ErrInvalidHeader},
		{name: "2.2 v2 UDP4 on a stream connection", in: v2(p4, 0x12, a4), wantErr: ErrFamilyMismatch},
		{name: "2.2 v2 AF_UNIX carries no IP", in: v2(p4, 0x31, make([]byte, 216)), wantErr: ErrFamilyMismatch},
		{name: "2.2 v2 length shorter than the address block", in: v2(p4, tcp4, a4[:8]), wantErr: ErrInvalidHeader},
		{name: "2.2 v2 length of 65535, the most a 16-bit field says (ParseHeader holds the bytes)",
			in: v2(p4, tcp4, a4, tlv(0x04, make([]byte, 0xffff-12-3)))},
		{name: "2.2 v2 LOCAL with a block longer than 4096 bytes", in: v2(l4, tcp4, a4, tlv(0x04, make([]byte, 5000))),
			want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2 v2 AF_UNIX with TLVs still carries no IP", in: v2(p4, 0x31, make([]byte, 216), tlv(0x04, nil)), wantErr: ErrFamilyMismatch},
		{name: "2.2 v2 truncated", in: v2(p4, tcp4, a4)[:20], wantErr: ErrIncomplete},
		{name: "2.2 v2 signature only", in: []byte(sigV2), wantErr: ErrIncomplete},

		// 2.2.x TLVs
		{name: "2.2 TLV running past the header", in: v2(p4, tcp4, a4, []byte{0x02, 0, 9, 'a'}), wantErr: ErrInvalidHeader},
		{name: "2.2 truncated TLV header", in: v2(p4, tcp4, a4, []byte{0x02, 0}), wantErr: ErrInvalidHeader},
		{name: "2.2 TLVs are kept", in: v2(p4, tcp4, a4, tlv(0x02, []byte("example.com")), tlv(0x04, []byte{0, 0})),
			want: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:56324"), Destination: ap("198.51.100.1:443"),
				TLVs: TLVs{raw: string(append(tlv(0x02, []byte("example.com")), tlv(0x04, []byte{0, 0})...))}}},
		{name: "2.2.3 CRC32C matches", in: withCRC(v2(p4, tcp4, a4, tlv(0x02, []byte("example.com"))))},
		{name: "2.2.3 CRC32C mismatch", in: flipLast(withCRC(v2(p4, tcp4, a4))), wantErr: ErrChecksum},
		{name: "2.2.3 CRC32C of another header", in: withCRCOf(v2(p4, tcp4, a4), v2(p4, tcp4, addrs4("203.0.113.9", "198.51.100.1", 56324, 443))), wantErr: ErrChecksum},
		{name: "2.2.3 CRC32C not 4 bytes", in: v2(p4, tcp4, a4, tlv(0x03, []byte{1, 2, 3})), wantErr: ErrChecksum},
		{name: "2.2.3 two CRC32C TLVs", in: withCRC(v2(p4, tcp4, a4, tlv(0x03, []byte{0, 0, 0, 0}))), wantErr: ErrChecksum},
		// 2.2.3 covers "the whole PROXY header", whatever the command.
		{name: "2.2.3 LOCAL CRC32C matches", in: withCRC(v2(l4, tcp4, a4)), want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2.3 LOCAL CRC32C mismatch after the address block", in: v2(l4, tcp4, a4, tlv(0x03, []byte{1, 2, 3, 4})), wantErr: ErrChecksum},
		{name: "2.2.3 LOCAL UNSPEC CRC32C mismatch (HAProxy's layout)", in: flipLast(withCRC(v2(l4, 0x00, nil, tlv(0x01, []byte("h2"))))), wantErr: ErrChecksum},
		{name: "2.2.3 PROXY header corrupted into LOCAL", in: func() []byte { b := withCRC(v2(p4, tcp4, a4)); b[12] = l4; return b }(), wantErr: ErrChecksum},
		{name: "2.2.3 AWS NLB health check (kubernetes/kubernetes#57250 capture): CRC32C without an address block matches",
			in: awsNLBHealthCheck(), want: Header{Version: 2, Command: CommandLocal}},
		{name: "2.2.3 AWS NLB health check with its padding altered", in: func() []byte { b := awsNLBHealthCheck(); b[40] = 1; return b }(), wantErr: ErrChecksum},
		{name: "2.2.3 LOCAL CRC32C not 4 bytes", in: v2(l4, 0x00, nil, tlv(0x03, []byte{1, 2, 3})), wantErr: ErrChecksum},
		{name: "2.2.3 LOCAL with two CRC32C TLVs", in: withCRC(v2(l4, 0x00, nil, tlv(0x03, []byte{0, 0, 0, 0}))), wantErr: ErrChecksum},
		{name: "2.2.5 UNIQUE_ID of 128 bytes", in: v2(p4, tcp4, a4, tlv(0x05, unique128)),
			want: Header{Version: 2, Command: CommandProxy, Source: ap("192.0.2.1:56324"), Destination: ap("198.51.100.1:443"), TLVs: TLVs{raw: string(tlv(0x05, unique128))}}},
		{name: "2.2.5 UNIQUE_ID of 129 bytes", in: v2(p4, tcp4, a4, tlv(0x05, append(unique128, 'x'))), wantErr: ErrUniqueIDTooLong},

		// Not a header at all.
		{name: "no signature: TLS ClientHello", in: []byte{0x16, 0x03, 0x01, 0x00, 0xa5}, wantErr: ErrNoHeader},
		{name: "no signature: HTTP POST", in: []byte("POST / HTTP/1.1\r\n"), wantErr: ErrNoHeader},
		{name: "no signature: CRLF", in: []byte("\r\n\r\n\x01"), wantErr: ErrNoHeader},
		{name: "empty input", in: nil, wantErr: ErrIncomplete},
		{name: "partial v1 signature", in: []byte("PRO"), wantErr: ErrIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, n, err := ParseHeader(tt.in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr, "header %+v", h)
				if errors.Is(tt.wantErr, ErrChecksum) || errors.Is(tt.wantErr, ErrFamilyMismatch) || errors.Is(tt.wantErr, ErrUniqueIDTooLong) {
					assert.ErrorIs(t, err, ErrInvalidHeader, "a specific header error also matches ErrInvalidHeader")
				}
				return
			}
			require.NoError(t, err)
			wantN := tt.wantN
			if wantN == 0 {
				wantN = len(tt.in)
			}
			assert.Equal(t, wantN, n)
			if tt.want != (Header{}) {
				assert.Equal(t, tt.want, h)
			}
		})
	}
}

func flipLast(b []byte) []byte { b[len(b)-1] ^= 1; return b }

// awsNLBHealthCheck is the LOCAL header of an AWS NLB health check as
// captured in kubernetes/kubernetes#57250: family TCP4 but no address block,
// a CRC32C TLV (0xbce5951f) and 74 bytes of NOOP padding.
func awsNLBHealthCheck() []byte {
	b := append([]byte(sigV2), 0x20, 0x11, 0x00, 0x54, 0x03, 0x00, 0x04, 0xbc, 0xe5, 0x95, 0x1f, 0x04, 0x00, 0x4a)
	return append(b, make([]byte, 0x4a)...)
}

// withCRCOf gives h the checksum computed for other.
func withCRCOf(h, other []byte) []byte {
	o := withCRC(other)
	h = withCRC(h)
	copy(h[len(h)-4:], o[len(o)-4:])
	return h
}

// The checksum is CRC32c (Castagnoli), RFC 4960 appendix B: check value
// 0xE3069283 for "123456789".
func TestCRC32CTable(t *testing.T) {
	assert.Equal(t, uint32(0xe3069283), crc32.Checksum([]byte("123456789"), castagnoli), "crc32c(123456789)")
	b := []byte("1234\x00\x00\x00\x009")
	assert.Equal(t, crc32.Checksum(b, castagnoli), headerCRC([]byte("1234abcd9"), 4), "headerCRC")
}

// go-proxyproto's process-wide V1AcceptIPv4InTCP6 must not loosen this
// package's family check (spec 2.1: the family dictates the format).
func TestV1FamilyIgnoresLibraryGlobal(t *testing.T) {
	old := pp.V1AcceptIPv4InTCP6
	pp.V1AcceptIPv4InTCP6 = true
	defer func() { pp.V1AcceptIPv4InTCP6 = old }()
	_, _, err := ParseHeader([]byte("PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n"))
	assert.ErrorIs(t, err, ErrFamilyMismatch)
}

// go-proxyproto's process-wide MaxV2HeaderSize must not limit this
// package's headers: it is given the fixed part and the address block only.
func TestV2LengthIgnoresLibraryGlobal(t *testing.T) {
	old := pp.MaxV2HeaderSize
	pp.MaxV2HeaderSize = 16
	defer func() { pp.MaxV2HeaderSize = old }()
	h, _, err := ParseHeader(v2(0x21, 0x11, addrs4("192.0.2.1", "198.51.100.1", 1, 2), tlv(0x02, []byte("mqtt.example.com"))))
	require.NoError(t, err)
	authority, _ := h.TLVs.Authority()
	assert.Equal(t, "mqtt.example.com", authority)
}

func TestParseHeaderAllocs(t *testing.T) {
	in := v2(0x21, 0x11, addrs4("192.0.2.1", "198.51.100.1", 1, 2))
	_, _, err := ParseHeader(in)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() { ParseHeader(in) })
	// go-proxyproto's parser allocates its Header, two TCPAddrs and their IPs,
	// and reflection buffers in binary.Read; keep it from growing unnoticed.
	assert.LessOrEqual(t, allocs, 12.0, "ParseHeader allocations per call")
	t.Logf("ParseHeader(v2 TCP4): %v allocs", allocs)
}
