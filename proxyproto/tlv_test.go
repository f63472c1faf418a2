package proxyproto

import (
	"encoding/binary"
	"encoding/json"
	"testing"
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
	if v, ok := tl.ALPN(); !ok || v != "h2" {
		t.Errorf("ALPN = %q, %v", v, ok)
	}
	if v, ok := tl.Authority(); !ok || v != "mqtt.example.com" {
		t.Errorf("Authority = %q, %v", v, ok)
	}
	if v, ok := tl.UniqueID(); !ok || v != "conn-42" {
		t.Errorf("UniqueID = %q, %v", v, ok)
	}
	if v, ok := tl.NetNS(); !ok || v != "blue" {
		t.Errorf("NetNS = %q, %v", v, ok)
	}
	if v, ok := tl.AWSVPCEndpointID(); !ok || v != "vpce-08d2bf15fac5001c9" {
		t.Errorf("AWSVPCEndpointID = %q, %v", v, ok)
	}
	if v, ok := tl.AzurePrivateLinkID(); !ok || v != 0x12345678 {
		t.Errorf("AzurePrivateLinkID = %#x, %v", v, ok)
	}
	if v, ok := tl.GCPPSCConnectionID(); !ok || v != 0x0102030405060708 {
		t.Errorf("GCPPSCConnectionID = %#x, %v", v, ok)
	}
	if v, ok := tl.Lookup(0xF1); !ok || v != "experiment" {
		t.Errorf("Lookup(0xF1) = %q, %v", v, ok)
	}
	if _, ok := tl.SSL(); ok {
		t.Error("SSL present without an SSL TLV")
	}
	if _, ok := tl.CRC32C(); ok {
		t.Error("CRC32C present without one")
	}
	if got, want := tl.String(), "alpn,authority,unique_id,netns,aws,azure,gcp,0xf1"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	n := 0
	for range tl.All() {
		n++
	}
	if n != 8 {
		t.Errorf("All yielded %d fields, want 8", n)
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
	if _, ok := tl.Authority(); ok {
		t.Error("Authority accepted invalid UTF-8")
	}
	if _, ok := tl.AWSVPCEndpointID(); ok {
		t.Error("AWSVPCEndpointID accepted a malformed id")
	}
	if _, ok := tl.AzurePrivateLinkID(); ok {
		t.Error("AzurePrivateLinkID accepted a short value")
	}
	if _, ok := tl.GCPPSCConnectionID(); ok {
		t.Error("GCPPSCConnectionID accepted a short value")
	}
	if _, ok := tl.SSL(); ok {
		t.Error("SSL accepted PP2_CLIENT_SSL without a version")
	}
}

// Spec 2.2.5: verify is 0 when "the client presented a certificate and it was
// successfully verified". HAProxy zeroes the whole field when no certificate
// was presented, so a zero verify alone must not count as a verified client.
func TestSSLCertVerified(t *testing.T) {
	tests := []struct {
		name                     string
		ssl                      SSL
		tls, presented, verified bool
	}{
		{"2.2.5 TLS, no client certificate, verify zeroed", SSL{Client: SSLClientTLS, Version: "TLSv1.3"}, true, false, false},
		{"2.2.5 certificate on this connection, verified", SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7"}, true, true, true},
		{"2.2.5 certificate earlier in the session, verified", SSL{Client: SSLClientTLS | SSLClientCertSess, Version: "TLSv1.2"}, true, true, true},
		{"2.2.5 certificate presented, verification failed", SSL{Client: SSLClientTLS | SSLClientCertConn, Verify: 20, Version: "TLSv1.3"}, true, true, false},
		{"2.2.5 plain TCP client (HAProxy send-proxy-v2-ssl without TLS)", SSL{}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := mustTLVs(tt.ssl.TLV())
			got, ok := tl.SSL()
			if !ok {
				t.Fatal("SSL not found")
			}
			if got != tt.ssl {
				t.Errorf("round trip: got %+v, want %+v", got, tt.ssl)
			}
			if got.TLS() != tt.tls || got.CertPresented() != tt.presented || got.CertVerified() != tt.verified {
				t.Errorf("TLS/CertPresented/CertVerified = %v/%v/%v, want %v/%v/%v",
					got.TLS(), got.CertPresented(), got.CertVerified(), tt.tls, tt.presented, tt.verified)
			}
		})
	}
}

func TestNewTLVsTooLong(t *testing.T) {
	if _, err := NewTLVs(TLV{TLVNoop, string(make([]byte, 1<<16))}); err == nil {
		t.Fatal("NewTLVs accepted a 65536-byte value")
	}
}

func TestEnumsText(t *testing.T) {
	type cfg struct {
		Headerless HeaderlessPolicy
		Untrusted  UntrustedPolicy
		Command    Command
		Reason     Reason
	}
	in := cfg{HeaderlessAllow, UntrustedIgnore, CommandLocal, ReasonTimeout}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"Headerless":"allow","Untrusted":"ignore","Command":"local","Reason":"timeout"}`; got != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	var out cfg
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("Unmarshal = %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"Headerless":"guess"}`), &out); err == nil {
		t.Error("Unmarshal accepted an unknown policy")
	}
	if _, err := HeaderlessPolicy(9).MarshalText(); err == nil {
		t.Error("MarshalText accepted an unknown policy")
	}
	if got := UntrustedPolicy(9).String(); got != "UntrustedPolicy(9)" {
		t.Errorf("String = %q", got)
	}
	if HeaderlessPolicy(0) != HeaderlessRefuse || UntrustedPolicy(0) != UntrustedClose {
		t.Error("zero policies are not the fail-closed ones")
	}
}
