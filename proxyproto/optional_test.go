package proxyproto

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The optional-header mode (HeaderlessAllow with UntrustedIgnore): every
// connection is served with or without a header; a header is believed only
// from a trusted upstream, validated from anyone, and never reaches the
// application's bytes; an invalid header closes the connection.
func TestListenerOptionalHeader(t *testing.T) {
	cfg := trustedLB()
	cfg.Headerless = HeaderlessAllow
	cfg.Untrusted = UntrustedIgnore
	s := newServer(t, cfg)

	proxyV2, _ := header(2, "203.0.113.7:5555", "192.0.2.10:8883").Format()
	proxyV1, _ := header(1, "203.0.113.7:5555", "192.0.2.10:8883").Format()
	localV2, _ := Header{Version: 2, Command: CommandLocal}.Format()
	// An AWS NLB health check with proxy protocol v2 (tcpdump in
	// kubernetes/kubernetes#57250): LOCAL, family TCP4, a CRC32C TLV and
	// NOOP padding, no address block. The block of a LOCAL header is
	// discarded (spec 2.2), but its checksum covers the whole header (2.2.3).
	nlb := awsNLBHealthCheck()
	nlbBadCRC := v2(0x20, 0x11, nil, tlv(0x03, []byte{0xde, 0xad, 0xbe, 0xef}), tlv(0x04, make([]byte, 74)))
	badCRC := flipLast(withCRC(v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2))))

	const untrusted = "127.0.0.66"
	tests := []struct {
		name    string
		src     string
		header  []byte
		command Command // of the accepted connection's facts
		source  string  // the believed PROXY source, if any
		reason  Reason  // when refused
		refused bool
	}{
		{name: "trusted, v2 PROXY: believed", src: lbAddr, header: proxyV2, command: CommandProxy, source: "203.0.113.7:5555"},
		{name: "trusted, v1 PROXY: believed", src: lbAddr, header: proxyV1, command: CommandProxy, source: "203.0.113.7:5555"},
		{name: "trusted, LOCAL health check", src: lbAddr, header: localV2, command: CommandLocal},
		{name: "trusted, AWS NLB health check", src: lbAddr, header: nlb, command: CommandLocal},
		{name: "trusted, 2.2.3 AWS NLB health check with a bad checksum: refused", src: lbAddr, header: nlbBadCRC, refused: true, reason: ReasonInvalid},
		{name: "trusted, no header: served as the upstream", src: lbAddr, command: CommandNone},
		{name: "untrusted, v2 PROXY: discarded, never believed", src: untrusted, header: proxyV2, command: CommandNone},
		{name: "untrusted, v1 PROXY: discarded, never believed", src: untrusted, header: proxyV1, command: CommandNone},
		{name: "untrusted, AWS NLB health check: discarded", src: untrusted, header: nlb, command: CommandNone},
		{name: "untrusted, no header", src: untrusted, command: CommandNone},
		{name: "untrusted, 2.2.3 bad checksum: refused", src: untrusted, header: badCRC, refused: true, reason: ReasonInvalid},
		{name: "untrusted, 2.1 v1 without CRLF: refused", src: untrusted, header: []byte("PROXY TCP4 10.0.0.2 10.0.0.11 51234 32123\n"), refused: true, reason: ReasonInvalid},
		{name: "untrusted, v2 version 3: refused", src: untrusted, header: v2(0x31, 0x11, nil), refused: true, reason: ReasonInvalid},
		{name: "trusted, v2 version 3: refused", src: lbAddr, header: v2(0x31, 0x11, nil), refused: true, reason: ReasonInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, tt.src, s.addr())
			_, err := c.Write(append(append([]byte(nil), tt.header...), "GET /healthz"...))
			require.NoError(t, err)
			if tt.refused {
				r := s.reject(t)
				assert.Equal(t, tt.reason, r.Reason, "%+v", r)
				closedByServer(t, c)
				return
			}
			sc := s.accept(t)
			f := sc.Facts()
			assert.Equal(t, tt.command, f.Command, "Facts %v", f)
			if tt.source != "" {
				assert.Equal(t, ap(tt.source), f.Source)
			} else {
				assert.False(t, f.Transport().Proxy.IsValid(), "a PROXY layer was believed: %v", f)
				assert.Equal(t, c.LocalAddr().String(), sc.RemoteAddr().String())
			}
			got := make([]byte, len("GET /healthz"))
			_, err = io.ReadFull(sc, got)
			require.NoError(t, err)
			assert.Equal(t, "GET /healthz", string(got), "the application's bytes")
		})
	}
}
