package proxyproto

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	pp "github.com/pires/go-proxyproto"
	"github.com/pires/go-proxyproto/tlvparse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sslv builds the value of a PP2_TYPE_SSL TLV by hand (spec 2.2.6: client,
// verify, then sub-TLVs), independent of SSL.TLV.
func sslv(client byte, verify uint32, subs ...[]byte) string {
	b := []byte{client, byte(verify >> 24), byte(verify >> 16), byte(verify >> 8), byte(verify)}
	for _, s := range subs {
		b = append(b, s...)
	}
	return string(b)
}

// sub encodes one sub-TLV.
func sub(typ byte, v string) []byte { return tlv(typ, []byte(v)) }

// The sub-TLV numbers are the spec's (doc/proxy-protocol.txt, section 2.2,
// "#define PP2_SUBTYPE_SSL_VERSION 0x21" … "PP2_SUBTYPE_SSL_CLIENT_CERT
// 0x28"), and go-proxyproto v0.15.0 agrees.
func TestSSLSubtypeNumbers(t *testing.T) {
	for _, tt := range []struct {
		name      string
		ours      byte
		spec      byte
		goproxyPP pp.PP2Type
	}{
		{"VERSION", sslSubVersion, 0x21, pp.PP2_SUBTYPE_SSL_VERSION},
		{"CN", sslSubCN, 0x22, pp.PP2_SUBTYPE_SSL_CN},
		{"CIPHER", sslSubCipher, 0x23, pp.PP2_SUBTYPE_SSL_CIPHER},
		{"SIG_ALG", sslSubSigAlg, 0x24, pp.PP2_SUBTYPE_SSL_SIG_ALG},
		{"KEY_ALG", sslSubKeyAlg, 0x25, pp.PP2_SUBTYPE_SSL_KEY_ALG},
		{"GROUP", sslSubGroup, 0x26, pp.PP2_SUBTYPE_SSL_GROUP},
		{"SIG_SCHEME", sslSubSigScheme, 0x27, pp.PP2_SUBTYPE_SSL_SIG_SCHEME},
		{"CLIENT_CERT", sslSubClientCert, 0x28, pp.PP2_SUBTYPE_SSL_CLIENT_CERT},
	} {
		assert.Equal(t, tt.spec, tt.ours, tt.name)
		assert.Equal(t, pp.PP2Type(tt.spec), tt.goproxyPP, tt.name+" in go-proxyproto")
		assert.Equal(t, tt.name, sslSubNames[tt.ours-sslSubVersion])
	}
	assert.Equal(t, TLVType(0x20), TLVSSL, "PP2_TYPE_SSL")
	assert.Equal(t, [3]uint8{0x01, 0x02, 0x04}, [3]uint8{SSLClientTLS, SSLClientCertConn, SSLClientCertSess}, "PP2_CLIENT_SSL, _CERT_CONN, _CERT_SESS")
}

// fakeDER is the smallest DER SEQUENCE: it passes the parser's framing check
// and is no certificate.
const fakeDER = "\x30\x03\x02\x01\x07"

type parseSSLCase struct {
	name    string
	in      string
	want    SSL
	wantErr bool
}

// parseSSLCases has one named case per rule on SSL (spec 2.2.6 and section
// 2.2's TLV format); FuzzSSL starts from them.
func parseSSLCases() []parseSSLCase {
	tlsConn := SSLClientTLS | SSLClientCertConn
	all := SSL{Client: tlsConn | SSLClientCertSess, Version: "TLSv1.3", CN: "device-7", Cipher: "TLS_AES_128_GCM_SHA256",
		SigAlg: "ecdsa-with-SHA256", KeyAlg: "EC256", Group: "X25519MLKEM768", SigScheme: "ecdsa_secp256r1_sha256", CertDER: fakeDER}
	allSubs := [][]byte{sub(0x21, "TLSv1.3"), sub(0x22, "device-7"), sub(0x23, "TLS_AES_128_GCM_SHA256"), sub(0x24, "ecdsa-with-SHA256"),
		sub(0x25, "EC256"), sub(0x26, "X25519MLKEM768"), sub(0x27, "ecdsa_secp256r1_sha256"), sub(0x28, fakeDER)}
	reversed := make([][]byte, len(allSubs))
	for i, s := range allSubs {
		reversed[len(allSubs)-1-i] = s
	}
	long := "\x30\x82\x01\x00" + strings.Repeat("\x00", 0x100)
	return []parseSSLCase{
		// Accepted.
		{name: "2.2.6 send-proxy-v2-ssl on a plain TCP client: client 0, verify zeroed, no sub-TLV", in: sslv(0, 0), want: SSL{}},
		{name: "2.2.6 TLS without a client certificate", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.2")), want: SSL{Client: SSLClientTLS, Version: "TLSv1.2"}},
		{name: "2.2.6 HAProxy send-proxy-v2-ssl-cn: verified certificate on this connection",
			in:   sslv(SSLClientTLS|SSLClientCertConn|SSLClientCertSess, 0, sub(0x21, "TLSv1.3"), sub(0x22, "device-7")),
			want: SSL{Client: SSLClientTLS | SSLClientCertConn | SSLClientCertSess, Version: "TLSv1.3", CN: "device-7"}},
		{name: "2.2.6 certificate earlier in the session only", in: sslv(SSLClientTLS|SSLClientCertSess, 0, sub(0x21, "TLSv1.3"), sub(0x22, "device-7")),
			want: SSL{Client: SSLClientTLS | SSLClientCertSess, Version: "TLSv1.3", CN: "device-7"}},
		{name: "2.2.6 certificate presented, verification failed (X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)", in: sslv(tlsConn, 20, sub(0x21, "TLSv1.3")),
			want: SSL{Client: tlsConn, Verify: 20, Version: "TLSv1.3"}},
		{name: "2.2.6 every sub-TLV, GROUP, SIG_SCHEME and CLIENT_CERT included", in: sslv(all.Client, 0, allSubs...), want: all},
		{name: "2.2.6 sub-TLVs in any order", in: sslv(all.Client, 0, reversed...), want: all},
		{name: "2.2.6 UTF-8 common name", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x22, "capteur-thermique-é")),
			want: SSL{Client: tlsConn, Version: "TLSv1.3", CN: "capteur-thermique-é"}},
		{name: "2.2 unknown sub-types are skipped, repeated or not", in: sslv(SSLClientTLS, 0, sub(0x29, "future"), sub(0x21, "TLSv1.3"), sub(0x2f, ""), sub(0x2f, "\xff"), sub(0x01, "h2")),
			want: SSL{Client: SSLClientTLS, Version: "TLSv1.3"}},
		{name: "2.2.6 client bits the spec does not define are kept", in: sslv(SSLClientTLS|0x80, 0, sub(0x21, "TLSv1.3")), want: SSL{Client: SSLClientTLS | 0x80, Version: "TLSv1.3"}},
		{name: "2.2.6 CLIENT_CERT with a two-byte DER length", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, long)), want: SSL{Client: tlsConn, Version: "TLSv1.3", CertDER: long}},

		// Refused: framing (spec 2.2's TLV format, applied to the second level).
		{name: "2.2.6 empty value: no client and verify fields", in: "", wantErr: true},
		{name: "2.2.6 four bytes: verify cut short", in: "\x00\x00\x00\x00", wantErr: true},
		{name: "2.2 sub-TLV runs past the SSL TLV", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"))[:11], wantErr: true},
		{name: "2.2 two trailing bytes, too short for a sub-TLV", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), []byte{0x22, 0}), wantErr: true},
		{name: "2.2 one trailing byte", in: sslv(0, 0, []byte{0}), wantErr: true},
		// Refused: one value per sub-type, and not empty.
		{name: "2.2.6 two VERSION sub-TLVs", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x21, "TLSv1.2")), wantErr: true},
		{name: "2.2.6 two CN sub-TLVs: which names the client?", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x22, "device-7"), sub(0x22, "admin")), wantErr: true},
		{name: "2.2.6 two CLIENT_CERT sub-TLVs", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, fakeDER), sub(0x28, fakeDER)), wantErr: true},
		{name: "2.2.6 two GROUP sub-TLVs", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x26, "x25519"), sub(0x26, "secp256r1")), wantErr: true},
		{name: "2.2.6 empty CIPHER", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x23, "")), wantErr: true},
		{name: "2.2.6 empty CN", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x22, "")), wantErr: true},
		// Refused: encodings.
		{name: "2.2.6 VERSION is not US-ASCII", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3\x80")), wantErr: true},
		{name: "2.2.6 CIPHER is not US-ASCII", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x23, "AES\xc3\xa9")), wantErr: true},
		{name: "2.2.6 SIG_ALG is not US-ASCII", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x24, "\xff")), wantErr: true},
		{name: "2.2.6 KEY_ALG is not US-ASCII", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x25, "\xff")), wantErr: true},
		{name: "2.2.6 GROUP is not US-ASCII", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x26, "x25519\xff")), wantErr: true},
		{name: "2.2.6 SIG_SCHEME is not US-ASCII", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x27, "\x80")), wantErr: true},
		{name: "2.2.6 CN is not UTF-8", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x22, "device\xff")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT is PEM, not DER", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, "-----BEGIN CERTIFICATE-----")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT is a SET, not a SEQUENCE", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, "\x31\x03\x02\x01\x07")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT with bytes after the DER", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, fakeDER+"\x00")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT whose DER is cut short", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, fakeDER[:4])), wantErr: true},
		{name: "2.2.6 CLIENT_CERT with an indefinite (BER) length", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, "\x30\x80\x02\x01\x07\x00\x00")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT with a length not in its shortest form", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, "\x30\x81\x03\x02\x01\x07")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT with a length of three bytes", in: sslv(tlsConn, 0, sub(0x21, "TLSv1.3"), sub(0x28, "\x30\x83\x00\x00\x03\x02\x01\x07")), wantErr: true},
		// Refused: the client field and the sub-TLVs contradict each other.
		{name: "2.2.6 PP2_CLIENT_SSL without VERSION", in: sslv(SSLClientTLS, 0), wantErr: true},
		{name: "2.2.6 PP2_CLIENT_SSL without VERSION, with a CIPHER", in: sslv(SSLClientTLS, 0, sub(0x23, "TLS_AES_128_GCM_SHA256")), wantErr: true},
		{name: "2.2.6 certificate bits without PP2_CLIENT_SSL", in: sslv(SSLClientCertConn, 0, sub(0x21, "TLSv1.3")), wantErr: true},
		{name: "2.2.6 CN without a certificate bit", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x22, "device-7")), wantErr: true},
		{name: "2.2.6 CLIENT_CERT without a certificate bit", in: sslv(SSLClientTLS, 0, sub(0x21, "TLSv1.3"), sub(0x28, fakeDER)), wantErr: true},
	}
}

func TestParseSSL(t *testing.T) {
	for _, tt := range parseSSLCases() {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSSL(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidSSL, "parsed as %+v", got)
				assert.Equal(t, SSL{}, got)
				_, ok := mustTLVs(TLV{TLVSSL, tt.in}).SSL()
				assert.False(t, ok, "TLVs.SSL reports a malformed field as present")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			agreesWithTLVParse(t, tt.in, got)
			again, err := parseSSL(got.TLV().Value)
			require.NoError(t, err, "re-encoded")
			assert.Equal(t, got, again, "parse(format(x)) == x")
		})
	}
}

// agreesWithTLVParse checks a value parseSSL accepted against go-proxyproto's
// tlvparse, a second decoder written from the same spec: it must accept it
// too and read the same fields.
func agreesWithTLVParse(t testing.TB, in string, got SSL) {
	t.Helper()
	o, err := tlvparse.SSL(pp.TLV{Type: pp.PP2_TYPE_SSL, Value: []byte(in)})
	require.NoError(t, err, "tlvparse refused what parseSSL accepted (%+v)", got)
	str := func(f func() (string, bool)) string { v, _ := f(); return v }
	der, _ := o.ClientCert()
	want := SSL{Client: o.Client, Verify: o.Verify, Version: str(o.SSLVersion), CN: str(o.ClientCN), Cipher: str(o.SSLCipher),
		SigAlg: str(o.SSLSigAlg), KeyAlg: str(o.SSLKeyAlg), Group: str(o.SSLGroup), SigScheme: str(o.SSLSigScheme), CertDER: string(der)}
	require.Equal(t, want, got, "parseSSL disagrees with tlvparse")
}

// A header's SSL TLV is checked as the header is parsed: a malformed one, or
// two, refuse the header rather than being read as absent later.
func TestParseHeaderSSL(t *testing.T) {
	a4 := addrs4("192.0.2.1", "198.51.100.1", 56324, 443)
	good := sslv(SSLClientTLS|SSLClientCertConn, 0, sub(0x21, "TLSv1.3"), sub(0x22, "device-7"), sub(0x28, fakeDER))
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{name: "2.2.6 well-formed SSL TLV", in: v2(0x21, 0x11, a4, tlv(0x20, []byte(good)))},
		{name: "2.2.6 SSL TLV beside others, with a checksum", in: withCRC(v2(0x21, 0x11, a4, tlv(0x02, []byte("mqtt.example.com")), tlv(0x20, []byte(good))))},
		{name: "2.2.6 malformed SSL TLV refuses the header", in: v2(0x21, 0x11, a4, tlv(0x20, []byte(good+"\x00"))), wantErr: ErrInvalidSSL},
		{name: "2.2.6 two SSL TLVs refuse the header", in: v2(0x21, 0x11, a4, tlv(0x20, []byte(good)), tlv(0x20, []byte(sslv(0, 0)))), wantErr: ErrInvalidSSL},
		{name: "2.2 LOCAL: a malformed SSL TLV is discarded unread", in: v2(0x20, 0x11, a4, tlv(0x20, []byte("\x01")))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, err := ParseHeader(tt.in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.ErrorIs(t, err, ErrInvalidHeader, "a specific header error also matches ErrInvalidHeader")
				return
			}
			require.NoError(t, err)
			if h.Command == CommandProxy {
				s, ok := h.TLVs.SSL()
				require.True(t, ok)
				assert.Equal(t, "device-7", s.CN)
			}
		})
	}
}

// Every field survives the writer and the parser, a real certificate
// included.
func TestSSLRoundTrip(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	der := string(ca.client(t, "device-7").Certificate[0])
	tests := []SSL{
		{},
		{Client: SSLClientTLS, Version: "TLSv1.3", Cipher: "TLS_CHACHA20_POLY1305_SHA256", Group: "x25519"},
		{Client: SSLClientTLS | SSLClientCertConn | SSLClientCertSess, Version: "TLSv1.3", CN: "device-7", Cipher: "TLS_AES_128_GCM_SHA256",
			SigAlg: "ecdsa-with-SHA256", KeyAlg: "EC256", Group: "X25519MLKEM768", SigScheme: "ecdsa_secp256r1_sha256", CertDER: der},
		{Client: SSLClientTLS | SSLClientCertConn, Verify: 10, Version: "TLSv1.2", CertDER: der},
	}
	for i, s := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := Header{Version: 2, Command: CommandProxy, Source: ap("203.0.113.7:50000"), Destination: ap("192.0.2.10:8883"),
				TLVs: mustTLVs(s.TLV()), AddChecksum: true}
			b, err := h.Format()
			require.NoError(t, err)
			got, _, err := ParseHeader(b)
			require.NoError(t, err)
			parsed, ok := got.TLVs.SSL()
			require.True(t, ok)
			assert.Equal(t, s, parsed)
		})
	}
	// The writer puts the sub-TLVs in type order, as the spec lists them.
	v := SSL{Client: SSLClientTLS | SSLClientCertConn, Verify: 0x01020304, Version: "v", CN: "c", Cipher: "ci", SigAlg: "s", KeyAlg: "k",
		Group: "g", SigScheme: "ss", CertDER: fakeDER}.TLV()
	assert.Equal(t, sslv(SSLClientTLS|SSLClientCertConn, 0x01020304, sub(0x21, "v"), sub(0x22, "c"), sub(0x23, "ci"), sub(0x24, "s"),
		sub(0x25, "k"), sub(0x26, "g"), sub(0x27, "ss"), sub(0x28, fakeDER)), v.Value)
	assert.Equal(t, TLVSSL, v.Type)
	_, err := NewTLVs(SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CertDER: strings.Repeat("x", 0xffff)}.TLV())
	assert.ErrorIs(t, err, ErrInvalidHeaderValue, "an SSL TLV over 65535 bytes")
}

func TestSSLCertificate(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	other := newTestCA(t, "Someone else's CA")
	inter := ca.intermediate(t, "Fleet issuing CA")
	device := ca.client(t, "device-7")
	serverOnly := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "device-8"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	twoCNs := ca.issue(t, &x509.Certificate{Subject: pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
		{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "device-9"}, {Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "device-9b"}}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	viaInter := inter.client(t, "device-10")
	interPool := x509.NewCertPool()
	interPool.AddCert(inter.cert)

	cert := func(c []byte, cn string) SSL {
		return SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: cn, CertDER: string(c)}
	}
	tests := []struct {
		name      string
		ssl       SSL
		opts      x509.VerifyOptions
		wantCN    string
		wantChain int
		wantErr   error
		wantX509  any // a crypto/x509 error type errors.As must find
	}{
		{name: "verifies against the client CA", ssl: cert(device.Certificate[0], "device-7"), opts: x509.VerifyOptions{Roots: ca.pool}, wantCN: "device-7", wantChain: 2},
		{name: "without a CN sub-TLV", ssl: cert(device.Certificate[0], ""), opts: x509.VerifyOptions{Roots: ca.pool}, wantCN: "device-7", wantChain: 2},
		{name: "through an intermediate given in the options", ssl: cert(viaInter.Certificate[0], "device-10"),
			opts: x509.VerifyOptions{Roots: ca.pool, Intermediates: interPool}, wantCN: "device-10", wantChain: 3},
		{name: "CN sub-TLV naming one of two subject common names", ssl: cert(twoCNs.Certificate[0], "device-9"), opts: x509.VerifyOptions{Roots: ca.pool}, wantCN: "device-9b", wantChain: 2},
		{name: "the upstream's failed verification is the caller's to check (CertVerified)", ssl: SSL{Client: SSLClientTLS | SSLClientCertConn, Verify: 20, Version: "TLSv1.3", CertDER: string(device.Certificate[0])},
			opts: x509.VerifyOptions{Roots: ca.pool}, wantCN: "device-7", wantChain: 2},

		{name: "another CA's certificate", ssl: cert(other.client(t, "device-7").Certificate[0], "device-7"), opts: x509.VerifyOptions{Roots: ca.pool},
			wantErr: ErrClientCertUntrusted, wantX509: &x509.UnknownAuthorityError{}},
		{name: "intermediate missing: the TLV carries the leaf only", ssl: cert(viaInter.Certificate[0], "device-10"), opts: x509.VerifyOptions{Roots: ca.pool},
			wantErr: ErrClientCertUntrusted, wantX509: &x509.UnknownAuthorityError{}},
		{name: "a server-only certificate is no client certificate (KeyUsages default to client auth)", ssl: cert(serverOnly.Certificate[0], "device-8"),
			opts: x509.VerifyOptions{Roots: ca.pool}, wantErr: ErrClientCertUntrusted, wantX509: &x509.CertificateInvalidError{}},
		{name: "expired", ssl: cert(device.Certificate[0], "device-7"), opts: x509.VerifyOptions{Roots: ca.pool, CurrentTime: time.Now().Add(48 * time.Hour)},
			wantErr: ErrClientCertUntrusted, wantX509: &x509.CertificateInvalidError{}},
		{name: "CN sub-TLV that is not the certificate's", ssl: cert(device.Certificate[0], "admin"), opts: x509.VerifyOptions{Roots: ca.pool}, wantErr: ErrInvalidClientCert},
		{name: "DER that is no certificate", ssl: cert([]byte(fakeDER), ""), opts: x509.VerifyOptions{Roots: ca.pool}, wantErr: ErrInvalidClientCert},
		{name: "no CLIENT_CERT sub-TLV (HAProxy sends none)", ssl: SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7"},
			opts: x509.VerifyOptions{Roots: ca.pool}, wantErr: ErrNoClientCert},
		{name: "DER but no certificate bit (built by hand; a parsed header has none)", ssl: SSL{Client: SSLClientTLS, Version: "TLSv1.3", CertDER: string(device.Certificate[0])},
			opts: x509.VerifyOptions{Roots: ca.pool}, wantErr: ErrNoClientCert},
		{name: "nil Roots would mean the system roots", ssl: cert(device.Certificate[0], "device-7"), wantErr: ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chains, err := tt.ssl.VerifyCertificate(tt.opts)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, chains)
				if tt.wantX509 != nil {
					assert.True(t, errors.As(err, tt.wantX509), "crypto/x509's error is wrapped: %v", err)
				}
				return
			}
			require.NoError(t, err)
			require.Len(t, chains[0], tt.wantChain)
			assert.Equal(t, tt.wantCN, chains[0][0].Subject.CommonName)
			leaf, err := tt.ssl.Certificate()
			require.NoError(t, err)
			assert.True(t, leaf.Equal(chains[0][0]), "Certificate returns the verified leaf")
		})
	}
}

func TestSSLLogValue(t *testing.T) {
	tests := []struct {
		name string
		ssl  SSL
		want string
	}{
		{"not TLS", SSL{}, "ssl.tls=false ssl.cert=none"},
		{"TLS, no certificate", SSL{Client: SSLClientTLS, Version: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", Group: "x25519"},
			"ssl.tls=true ssl.version=TLSv1.3 ssl.cipher=TLS_AES_128_GCM_SHA256 ssl.group=x25519 ssl.cert=none"},
		{"verified", SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7", CertDER: fakeDER},
			"ssl.tls=true ssl.version=TLSv1.3 ssl.cert=verified ssl.cn=device-7 ssl.cert_sha256=" +
				"eceda61045db145d209debf0d245e44b5b1cc52e3c04266aa2a486fdb6a2b285"}, // sha256sum of the five bytes
		{"failed", SSL{Client: SSLClientTLS | SSLClientCertConn, Verify: 20, Version: "TLSv1.2", CN: "device 7"},
			`ssl.tls=true ssl.version=TLSv1.2 ssl.cert=unverified ssl.verify=20 ssl.cn="device 7"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, logAttrs("ssl", tt.ssl))
		})
	}
}

// sslHeader is a v2 PROXY header whose SSL TLV carries der, followed by
// "hello" from the client, as the project's writer sends it.
func sslHeader(t testing.TB, der []byte) []byte {
	t.Helper()
	h := header(2, "203.0.113.7:50000", "192.0.2.10:8883")
	h.TLVs = mustTLVs(SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7", CertDER: string(der)}.TLV())
	h.AddChecksum = true
	b, err := h.Format()
	require.NoError(t, err)
	return append(b, "hello"...)
}

// A client certificate that passes through the writer, a real socket and the
// listener, and verifies against the client CA at the other end.
func TestListenerSSLClientCert(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	device := ca.client(t, "device-7")
	s := newServer(t, trustedLB())
	h := header(2, "203.0.113.7:50000", "192.0.2.10:8883")
	want := SSL{Client: SSLClientTLS | SSLClientCertConn | SSLClientCertSess, Version: "TLSv1.3", CN: "device-7",
		Cipher: "TLS_AES_128_GCM_SHA256", Group: "X25519MLKEM768", SigScheme: "ecdsa_secp256r1_sha256", CertDER: string(device.Certificate[0])}
	h.TLVs = mustTLVs(TLV{TLVAuthority, "mqtt.example.com"}, want.TLV())
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(lbAddr)}, Timeout: 5 * time.Second}
	c, err := DialContext(context.Background(), d, "tcp", s.addr(), h)
	require.NoError(t, err)
	defer c.Close()
	c.Write([]byte("hello"))

	sc := s.accept(t)
	got, ok := sc.Facts().TLVs.SSL()
	require.True(t, ok, "no SSL TLV")
	assert.Equal(t, want, got)
	assert.True(t, got.CertVerified())
	chains, err := got.VerifyCertificate(x509.VerifyOptions{Roots: ca.pool})
	require.NoError(t, err)
	assert.Equal(t, "device-7", chains[0][0].Subject.CommonName)
	assertReads(t, sc, "hello")
}

// A forged SSL TLV from a peer the listener does not trust is never believed:
// closed by default, stripped under UntrustedIgnore.
func TestListenerForgedSSLFromUntrustedPeer(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	forged := sslHeader(t, ca.client(t, "device-7").Certificate[0])
	t.Run("UntrustedClose", func(t *testing.T) {
		s := newServer(t, trustedLB())
		c := dial(t, "127.0.0.66", s.addr())
		c.Write(forged)
		r := s.reject(t)
		assert.Equal(t, ReasonUntrusted, r.Reason)
		closedByServer(t, c)
	})
	t.Run("UntrustedIgnore", func(t *testing.T) {
		cfg := trustedLB()
		cfg.Untrusted = UntrustedIgnore
		s := newServer(t, cfg)
		c := dial(t, "127.0.0.66", s.addr())
		c.Write(forged)
		sc := s.accept(t)
		_, ok := sc.Facts().TLVs.SSL()
		assert.False(t, ok, "an untrusted peer's SSL TLV reached the facts")
		assert.Zero(t, sc.Facts().Version)
		assertReads(t, sc, "hello")
	})
}
