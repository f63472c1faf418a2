package proxyproto

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sourceip/sourceip/clientip"
)

func TestFactsTransport(t *testing.T) {
	peer, src := ap("10.0.0.5:41234"), ap("203.0.113.7:5555")
	tests := []struct {
		name string
		f    Facts
		want clientip.Transport
	}{
		{"PROXY command: both layers", Facts{Peer: peer, Version: 2, Command: CommandProxy, Source: src}, clientip.Transport{Peer: peer, Proxy: src}},
		{"LOCAL command: socket only, and the header named no client", Facts{Peer: peer, Version: 2, Command: CommandLocal}, clientip.Transport{Peer: peer, ProxyLocal: true}},
		{"no header: socket only", Facts{Peer: peer}, clientip.Transport{Peer: peer}},
		{"Unix socket with header", Facts{Version: 1, Command: CommandProxy, Source: src}, clientip.Transport{Proxy: src}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.f.Transport())
		})
	}
}

func TestFactsString(t *testing.T) {
	f := Facts{Peer: ap("10.0.0.5:41234"), Local: ap("10.0.0.9:8883"), Version: 2, Command: CommandProxy,
		Source: ap("203.0.113.7:5555"), Destination: ap("192.0.2.10:8883"),
		TLVs: mustTLVs(TLV{TLVAuthority, "mqtt.example.com"}, TLV{TLVCRC32C, "\x00\x00\x00\x00"})}
	assert.Equal(t, "peer 10.0.0.5:41234 v2 proxy 203.0.113.7:5555 -> 192.0.2.10:8883 tlvs authority,crc32c", f.String())
	assert.Equal(t, "peer 198.51.100.4:50000 no header", Facts{Peer: ap("198.51.100.4:50000")}.String())
	// A listed upstream that sent no header ends the walk at itself
	// (Transport.ProxyLocal): the log line says so, not only "no header".
	up := Facts{Peer: ap("10.0.0.5:41234"), Local: ap("10.0.0.9:8883"), NoHeaderFromUpstream: true}
	assert.Equal(t, "peer 10.0.0.5:41234 no header from upstream", up.String())
	want := `pp.peer=10.0.0.5:41234 pp.local=10.0.0.9:8883 pp.version=2 pp.command=proxy pp.source=203.0.113.7:5555 pp.destination=192.0.2.10:8883 pp.authority=mqtt.example.com`
	assert.Equal(t, want, logAttrs("pp", f), "slog")
	assert.Equal(t, `pp.peer=10.0.0.5:41234 pp.local=10.0.0.9:8883 pp.version=0 pp.command=none pp.no_header_from_upstream=true`, logAttrs("pp", up), "slog, headerless upstream")
}

// Allocation promises made in doc comments.
func TestNoAllocs(t *testing.T) {
	f := Facts{Peer: ap("10.0.0.5:1"), Command: CommandProxy, Source: ap("203.0.113.7:2"),
		TLVs: mustTLVs(TLV{TLVNoop, "xx"}, TLV{TLVAuthority, "example.com"}, TLV{TLVUniqueID, "id"},
			SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7", Group: "X25519", CertDER: "\x30\x03\x02\x01\x07"}.TLV())}
	raw := withCRC(v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), []byte(f.TLVs.raw)))
	tests := []struct {
		name string
		fn   func()
	}{
		{"Facts.Transport", func() { f.Transport() }},
		{"Conn.Facts", func() { (&Conn{facts: f}).Facts() }},
		{"TLVs.Authority", func() { f.TLVs.Authority() }},
		{"TLVs.Lookup", func() { f.TLVs.Lookup(TLVUniqueID) }},
		{"TLVs.All", func() {
			for range f.TLVs.All() {
			}
		}},
		{"frame", func() { frame(raw, MaxV2Payload) }},
		{"checkTLVs", func() {
			if ok, err := checkTLVs(raw, 28); err != nil || !ok {
				panic("checkTLVs failed")
			}
		}},
		{"TLVs.SSL", func() {
			if s, ok := f.TLVs.SSL(); !ok || s.Group != "X25519" {
				panic("TLVs.SSL failed")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(100, tt.fn), "allocations")
		})
	}
}
