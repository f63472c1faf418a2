package proxyproto

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTLVAccessors(t *testing.T) {
	azure := []byte{0x01, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(azure[1:], 0x12345678)
	gcp := binary.BigEndian.AppendUint64(nil, 0x0102030405060708)
	tl := mustTLVs(
		TLV{TLVALPN, "h2"},
		TLV{TLVAuthority, "mqtt.example.com"},
		TLV{TLVUniqueID, "conn-42"},
		TLV{TLVNetNS, "blue"},
		TLV{TLVAWS, "\x01vpce-08d2bf15fac5001c9"},
		TLV{TLVAzure, string(azure)},
		TLV{TLVGCP, string(gcp)},
		TLV{0xF1, "experiment"},
	)
	wantFound(t, "h2")(tl.ALPN())
	wantFound(t, "mqtt.example.com")(tl.Authority())
	wantFound(t, "conn-42")(tl.UniqueID())
	wantFound(t, "blue")(tl.NetNS())
	wantFound(t, "vpce-08d2bf15fac5001c9")(tl.AWSVPCEndpointID())
	wantFound(t, uint32(0x12345678))(tl.AzurePrivateLinkID())
	wantFound(t, uint64(0x0102030405060708))(tl.GCPPSCConnectionID())
	wantFound(t, "experiment")(tl.Lookup(0xF1))
	_, ok := tl.SSL()
	assert.False(t, ok, "SSL present without an SSL TLV")
	_, ok = tl.CRC32C()
	assert.False(t, ok, "CRC32C present without one")
	assert.Equal(t, "alpn,authority,unique_id,netns,aws,azure,gcp,0xf1", tl.String())
	assert.Len(t, collect(tl), 8, "fields yielded by All")
}

// wantFound returns a check of an accessor's (value, ok) result.
func wantFound[T comparable](t *testing.T, want T) func(T, bool) {
	return func(got T, ok bool) {
		t.Helper()
		if assert.True(t, ok, "%v not found", want) {
			assert.Equal(t, want, got)
		}
	}
}

func TestTLVMalformedVendorValues(t *testing.T) {
	tl := mustTLVs(
		TLV{TLVAuthority, "\xff\xfe"},       // not UTF-8
		TLV{TLVAWS, "\x01vpce_bad!"},        // not [A-Za-z0-9-]
		TLV{TLVAzure, "\x01\x00\x00"},       // too short
		TLV{TLVGCP, "\x01\x02"},             // not 8 bytes
		TLV{TLVSSL, "\x01\x00\x00\x00\x00"}, // TLS without a version sub-TLV
	)
	_, ok := tl.Authority()
	assert.False(t, ok, "Authority accepted invalid UTF-8")
	_, ok = tl.AWSVPCEndpointID()
	assert.False(t, ok, "AWSVPCEndpointID accepted a malformed id")
	_, ok = tl.AzurePrivateLinkID()
	assert.False(t, ok, "AzurePrivateLinkID accepted a short value")
	_, ok = tl.GCPPSCConnectionID()
	assert.False(t, ok, "GCPPSCConnectionID accepted a short value")
	_, ok = tl.SSL()
	assert.False(t, ok, "SSL accepted PP2_CLIENT_SSL without a version")
}

// Spec 2.2.6: verify is 0 when "the client presented a certificate and it was
// successfully verified". HAProxy zeroes the whole field when no certificate
// was presented, so a zero verify alone must not count as a verified client.
func TestSSLCertVerified(t *testing.T) {
	tests := []struct {
		name                     string
		ssl                      SSL
		tls, presented, verified bool
	}{
		{"2.2.6 TLS, no client certificate, verify zeroed", SSL{Client: SSLClientTLS, Version: "TLSv1.3"}, true, false, false},
		{"2.2.6 certificate on this connection, verified", SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7"}, true, true, true},
		{"2.2.6 certificate earlier in the session, verified", SSL{Client: SSLClientTLS | SSLClientCertSess, Version: "TLSv1.2"}, true, true, true},
		{"2.2.6 certificate presented, verification failed", SSL{Client: SSLClientTLS | SSLClientCertConn, Verify: 20, Version: "TLSv1.3"}, true, true, false},
		{"2.2.6 plain TCP client (HAProxy send-proxy-v2-ssl without TLS)", SSL{}, false, false, false},
		{"2.2.6 certificate bits without TLS (refused by the parser; built by hand)", SSL{Client: SSLClientCertConn}, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.ssl
			assert.Equal(t, tt.tls, got.TLS(), "TLS")
			assert.Equal(t, tt.presented, got.CertPresented(), "CertPresented")
			assert.Equal(t, tt.verified, got.CertVerified(), "CertVerified")
		})
	}
}

func TestNewTLVsTooLong(t *testing.T) {
	_, err := NewTLVs(TLV{TLVNoop, string(make([]byte, 1<<16))})
	assert.Error(t, err, "NewTLVs accepted a 65536-byte value")
}

func TestEnumsText(t *testing.T) {
	type cfg struct {
		Headerless HeaderlessPolicy
		Untrusted  UntrustedPolicy
		Command    Command
		Reason     Reason
		Shed       ShedReason
	}
	in := cfg{HeaderlessAllow, UntrustedIgnore, CommandLocal, ReasonTimeout, ShedSourceBudget}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Equal(t, `{"Headerless":"allow","Untrusted":"ignore","Command":"local","Reason":"timeout","Shed":"source_budget"}`, string(b))
	var out cfg
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)
	assert.Error(t, json.Unmarshal([]byte(`{"Headerless":"guess"}`), &out), "Unmarshal accepted an unknown policy")
	assert.Error(t, json.Unmarshal([]byte(`{"Shed":"over_budget"}`), &out), "Unmarshal accepted an unknown shed reason")
	_, err = HeaderlessPolicy(9).MarshalText()
	assert.Error(t, err, "MarshalText accepted an unknown policy")
	assert.Equal(t, "UntrustedPolicy(9)", UntrustedPolicy(9).String())
	assert.Equal(t, "untrusted_budget", ShedUntrustedBudget.String())
	assert.Equal(t, HeaderlessRefuse, HeaderlessPolicy(0), "the zero policy is the fail-closed one")
	assert.Equal(t, UntrustedClose, UntrustedPolicy(0), "the zero policy is the fail-closed one")
}
