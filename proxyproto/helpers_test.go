package proxyproto

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// Hand-built headers, independent of the writer under test.

// v2 returns a v2 header with the given version/command and family bytes,
// address block and TLV bytes; the length field covers both.
func v2(verCmd, fam byte, addrs []byte, tlvs ...[]byte) []byte {
	b := []byte(sigV2)
	b = append(b, verCmd, fam, 0, 0)
	b = append(b, addrs...)
	for _, t := range tlvs {
		b = append(b, t...)
	}
	binary.BigEndian.PutUint16(b[14:], uint16(len(b)-16))
	return b
}

// tlv encodes one TLV.
func tlv(typ byte, v []byte) []byte {
	return append([]byte{typ, byte(len(v) >> 8), byte(len(v))}, v...)
}

// addrs4 is an IPv4 address block.
func addrs4(src, dst string, sp, dp uint16) []byte {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	b := append(s[:], d[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sp), dp)
}

// addrs6 is an IPv6 address block.
func addrs6(src, dst string, sp, dp uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	b := append(s[:], d[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sp), dp)
}

// withCRC appends a CRC32C TLV to a v2 header and fills it in, computed here
// with the standard library rather than the package's helper.
func withCRC(h []byte) []byte {
	h = append(h, 0x03, 0, 4, 0, 0, 0, 0)
	binary.BigEndian.PutUint16(h[14:], uint16(len(h)-16))
	sum := crc32.Checksum(h, crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(h[len(h)-4:], sum)
	return h
}

// trustOf returns a static Trust whose resolver trusts the proxies in s.
func trustOf(s string) *clientip.Resolver {
	return clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(s)})
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func mustTLVs(list ...TLV) TLVs {
	t, err := NewTLVs(list...)
	if err != nil {
		panic(err)
	}
	return t
}

// logAttrs returns the text handler's line for v logged under key, without
// the time, level and message.
func logAttrs(key string, v any) string {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
			return slog.Attr{}
		}
		return a
	}})).Info("", key, v)
	return strings.TrimSpace(buf.String())
}
