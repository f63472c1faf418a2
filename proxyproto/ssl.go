package proxyproto

import (
	"encoding/binary"

	pp "github.com/pires/go-proxyproto"
)

// Bits of [SSL].Client (spec section 2.2.6, struct pp2_tlv_ssl).
const (
	SSLClientTLS      uint8 = 0x01 // PP2_CLIENT_SSL: the client connected over TLS
	SSLClientCertConn uint8 = 0x02 // PP2_CLIENT_CERT_CONN: it presented a certificate on this connection
	SSLClientCertSess uint8 = 0x04 // PP2_CLIENT_CERT_SESS: it presented one earlier in the TLS session
)

// SSL is the content of a PP2_TYPE_SSL TLV: what the upstream learnt while
// terminating the client's TLS. It is a small comparable value.
//
// Verify is only meaningful when a certificate was presented: HAProxy zeroes
// the whole field when there was none, so Verify == 0 alone does not mean a
// verified client. Use [SSL.CertVerified].
type SSL struct {
	Client uint8  // SSLClient* bits
	Verify uint32 // 0 when the presented certificate was verified

	Version string // PP2_SUBTYPE_SSL_VERSION, such as "TLSv1.3"
	CN      string // PP2_SUBTYPE_SSL_CN: the client certificate's common name
	Cipher  string // PP2_SUBTYPE_SSL_CIPHER, such as "TLS_AES_128_GCM_SHA256"
	SigAlg  string // PP2_SUBTYPE_SSL_SIG_ALG: the certificate's signature algorithm
	KeyAlg  string // PP2_SUBTYPE_SSL_KEY_ALG: the certificate's key algorithm
}

// TLS reports whether the client connected to the upstream over TLS.
func (s SSL) TLS() bool { return s.Client&SSLClientTLS != 0 }

// CertPresented reports whether the client presented a certificate, on this
// connection or earlier in its TLS session.
func (s SSL) CertPresented() bool { return s.Client&(SSLClientCertConn|SSLClientCertSess) != 0 }

// CertVerified reports whether the client presented a certificate and the
// upstream verified it. It is false when no certificate was presented,
// whatever Verify says.
func (s SSL) CertVerified() bool { return s.CertPresented() && s.Verify == 0 }

// TLV encodes s as a PP2_TYPE_SSL field for the writer; empty strings are
// left out.
func (s SSL) TLV() TLV {
	v := make([]byte, 5, 64)
	v[0] = s.Client
	binary.BigEndian.PutUint32(v[1:], s.Verify)
	for _, sub := range []struct {
		t pp.PP2Type
		s string
	}{
		{pp.PP2_SUBTYPE_SSL_VERSION, s.Version},
		{pp.PP2_SUBTYPE_SSL_CN, s.CN},
		{pp.PP2_SUBTYPE_SSL_CIPHER, s.Cipher},
		{pp.PP2_SUBTYPE_SSL_SIG_ALG, s.SigAlg},
		{pp.PP2_SUBTYPE_SSL_KEY_ALG, s.KeyAlg},
	} {
		if sub.s != "" {
			v = append(v, byte(sub.t), byte(len(sub.s)>>8), byte(len(sub.s)))
			v = append(v, sub.s...)
		}
	}
	return TLV{Type: TLVSSL, Value: string(v)}
}
