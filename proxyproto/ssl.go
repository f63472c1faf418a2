package proxyproto

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"log/slog"
	"unicode/utf8"
)

// Bits of [SSL].Client (spec section 2.2.6, struct pp2_tlv_ssl).
const (
	SSLClientTLS      uint8 = 0x01 // PP2_CLIENT_SSL: the client connected over TLS
	SSLClientCertConn uint8 = 0x02 // PP2_CLIENT_CERT_CONN: it presented a certificate on this connection
	SSLClientCertSess uint8 = 0x04 // PP2_CLIENT_CERT_SESS: it presented one earlier in the TLS session
)

// Sub-TLV types of PP2_TYPE_SSL (spec section 2.2). Their numeric order is
// the order in which [SSL.TLV] writes them.
const (
	sslSubVersion    byte = 0x21 // PP2_SUBTYPE_SSL_VERSION
	sslSubCN         byte = 0x22 // PP2_SUBTYPE_SSL_CN
	sslSubCipher     byte = 0x23 // PP2_SUBTYPE_SSL_CIPHER
	sslSubSigAlg     byte = 0x24 // PP2_SUBTYPE_SSL_SIG_ALG
	sslSubKeyAlg     byte = 0x25 // PP2_SUBTYPE_SSL_KEY_ALG
	sslSubGroup      byte = 0x26 // PP2_SUBTYPE_SSL_GROUP
	sslSubSigScheme  byte = 0x27 // PP2_SUBTYPE_SSL_SIG_SCHEME
	sslSubClientCert byte = 0x28 // PP2_SUBTYPE_SSL_CLIENT_CERT

	// sslFixedLen is the client byte and the 4-byte verify field.
	sslFixedLen = 5
)

// sslSubNames names the sub-types from 0x21 on, for error messages.
var sslSubNames = [...]string{"VERSION", "CN", "CIPHER", "SIG_ALG", "KEY_ALG", "GROUP", "SIG_SCHEME", "CLIENT_CERT"}

// SSL is the content of a PP2_TYPE_SSL TLV (spec section 2.2.6): what the
// upstream learnt while terminating the client's TLS. It is a small
// comparable value; the zero value says the client did not use TLS.
//
// Every field is a claim of the upstream. A [Listener] keeps TLVs only from a
// trusted upstream's PROXY command, so read them from [Conn.Facts] (or
// [FactsFromContext]) and nowhere else: anyone can write an SSL TLV, and
// [WriteHeader] does. What the upstream can vouch for is the TLS handshake
// it ran: that the client proved possession of the key of the certificate it
// presented, and how the upstream's own verification went (Verify).
//
// A header whose SSL TLV breaks these rules is refused (errors wrap
// [ErrInvalidSSL] and [ErrInvalidHeader]):
//   - the value holds at least the client and verify fields (5 bytes,
//     "packed"), and its sub-TLVs fill the rest exactly: none runs past the
//     value and nothing trails the last one;
//   - each sub-type this package knows (0x21 to 0x28) appears at most once
//     and is not empty: the spec gives each one value ("the US-ASCII string
//     representation of the TLS version", "the raw X.509 client
//     certificate"), and two would leave the receiver to guess which one
//     describes the client. Sub-types it does not know are skipped, as spec
//     section 2.2 allows ("A receiver may choose to skip over and ignore the
//     TLVs it is not interested in or it does not understand"), so that a
//     sender using a sub-type registered later is not refused;
//   - VERSION, CIPHER, SIG_ALG, KEY_ALG, GROUP and SIG_SCHEME are US-ASCII,
//     CN is UTF-8, and CLIENT_CERT is one DER SEQUENCE that fills it;
//   - PP2_CLIENT_SSL comes with a VERSION sub-TLV ("When this field is
//     present, the US-ASCII string representation of the TLS version is
//     appended");
//   - the certificate bits come with PP2_CLIENT_SSL (a certificate is
//     presented in a TLS handshake), and a CN or CLIENT_CERT sub-TLV, which
//     describe the client's certificate, with a certificate bit.
//
// A header may carry one SSL TLV; a second is refused. HAProxy sends one with
// send-proxy-v2-ssl, send-proxy-v2-ssl-cn or proxy-v2-options ssl, cert-cn,
// ssl-cipher, cert-sig, cert-key; as of version 3.5-dev it writes VERSION,
// CN, KEY_ALG, SIG_ALG and CIPHER, not GROUP, SIG_SCHEME or CLIENT_CERT
// (added to the spec in 2025 and 2026 and sent by other implementations).
type SSL struct {
	// Client holds the SSLClient* bits; bits the spec does not define are
	// kept.
	Client uint8

	// Verify is 0 when the client presented a certificate and the upstream
	// verified it. HAProxy zeroes the whole field when no certificate was
	// presented, so Verify == 0 alone does not mean a verified client: use
	// [SSL.CertVerified]. Otherwise it is the upstream's error code (for
	// HAProxy, OpenSSL's X509_V_ERR_*).
	Verify uint32

	// Version is PP2_SUBTYPE_SSL_VERSION (0x21), such as "TLSv1.3".
	Version string

	// CN is PP2_SUBTYPE_SSL_CN (0x22): the common name of the client
	// certificate's subject, UTF-8. It names whoever holds a certificate
	// with that name from any CA the upstream trusts; prefer the certificate
	// itself when CertDER is present.
	CN string

	// Cipher is PP2_SUBTYPE_SSL_CIPHER (0x23), such as
	// "TLS_AES_128_GCM_SHA256" or "ECDHE-RSA-AES128-GCM-SHA256".
	Cipher string

	// SigAlg is PP2_SUBTYPE_SSL_SIG_ALG (0x24): the signature algorithm of
	// the certificate the upstream itself presented to the client (not the
	// client's), such as "RSA-SHA256" or "ecdsa-with-SHA256".
	SigAlg string

	// KeyAlg is PP2_SUBTYPE_SSL_KEY_ALG (0x25): the key algorithm of the
	// upstream's own certificate, such as "RSA2048" or "EC256".
	KeyAlg string

	// Group is PP2_SUBTYPE_SSL_GROUP (0x26): the key exchange group of the
	// client's connection, such as "secp256r1" or "X25519MLKEM768".
	Group string

	// SigScheme is PP2_SUBTYPE_SSL_SIG_SCHEME (0x27): the scheme the upstream
	// signed its handshake with, such as "rsa_pss_rsae_sha256".
	SigScheme string

	// CertDER is PP2_SUBTYPE_SSL_CLIENT_CERT (0x28): the client's certificate,
	// ASN.1 DER, without its chain. The spec leaves it optional ("The frontend
	// may choose to omit this TLV depending on configuration"). Parse it
	// with [SSL.Certificate]; verify it with [SSL.VerifyCertificate].
	CertDER string
}

// field returns the field of sub-type typ, or nil for a sub-type this
// package does not decode.
func (s *SSL) field(typ byte) *string {
	switch typ {
	case sslSubVersion:
		return &s.Version
	case sslSubCN:
		return &s.CN
	case sslSubCipher:
		return &s.Cipher
	case sslSubSigAlg:
		return &s.SigAlg
	case sslSubKeyAlg:
		return &s.KeyAlg
	case sslSubGroup:
		return &s.Group
	case sslSubSigScheme:
		return &s.SigScheme
	case sslSubClientCert:
		return &s.CertDER
	}
	return nil
}

// TLS reports whether the client connected to the upstream over TLS.
func (s SSL) TLS() bool { return s.Client&SSLClientTLS != 0 }

// CertPresented reports whether the client presented a certificate, on this
// connection or earlier in its TLS session.
func (s SSL) CertPresented() bool { return s.Client&(SSLClientCertConn|SSLClientCertSess) != 0 }

// CertVerified reports whether the client connected over TLS, presented a
// certificate and the upstream verified it. It is false when no certificate
// was presented, whatever Verify says.
func (s SSL) CertVerified() bool { return s.TLS() && s.CertPresented() && s.Verify == 0 }

// Certificate parses CertDER, the client certificate the upstream forwarded.
// It returns an error wrapping [ErrNoClientCert] when there is none (or the
// upstream did not report a certificate), and one wrapping
// [ErrInvalidClientCert] when CertDER is not an X.509 certificate or the CN
// sub-TLV is not one of its subject's common names. It does not verify
// anything: see [SSL.VerifyCertificate]. It parses on every call and
// allocates.
func (s SSL) Certificate() (*x509.Certificate, error) {
	if s.CertDER == "" || !s.CertPresented() {
		return nil, ErrNoClientCert
	}
	c, err := x509.ParseCertificate([]byte(s.CertDER))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidClientCert, err)
	}
	if s.CN != "" && !hasCommonName(c, s.CN) {
		return nil, fmt.Errorf("%w: the CN sub-TLV %q is not a common name of the certificate's subject %q", ErrInvalidClientCert, s.CN, c.Subject)
	}
	return c, nil
}

var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// hasCommonName reports whether cn is one of c's subject common names
// (a subject may hold several; crypto/x509 keeps the last in CommonName).
func hasCommonName(c *x509.Certificate, cn string) bool {
	for _, n := range c.Subject.Names {
		if v, ok := n.Value.(string); ok && n.Type.Equal(oidCommonName) && v == cn {
			return true
		}
	}
	return false
}

// VerifyCertificate parses the forwarded client certificate, as
// [SSL.Certificate] does, and verifies it with [x509.Certificate.Verify]
// under opts, returning its chains; the leaf is chains[0][0]. It is how a
// backend behind a TLS-terminating load balancer holds the client to its own
// CA rather than to whatever the load balancer trusts.
//
// opts.Roots must be set (a nil pool would mean the system roots, which no
// client CA should be); otherwise the error wraps [ErrInvalidConfig]. An
// empty opts.KeyUsages means [x509.ExtKeyUsageClientAuth], as crypto/tls
// uses for client certificates (crypto/x509's own default is server
// authentication). The SSL TLV carries the leaf only: put any intermediate
// CAs in opts.Intermediates. A certificate that does not verify is an error
// wrapping [ErrClientCertUntrusted] and crypto/x509's error (test with
// [errors.As] for [x509.UnknownAuthorityError] or
// [x509.CertificateInvalidError]).
//
// Verification proves the certificate, not its holder: that the client owns
// its key rests on the upstream's TLS handshake, which is why only a trusted
// upstream's SSL TLV may be read. VerifyCertificate does not look at Verify;
// when the upstream is meant to verify clients too (HAProxy's verify
// required), require [SSL.CertVerified] as well. It allocates.
func (s SSL) VerifyCertificate(opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
	if opts.Roots == nil {
		return nil, fmt.Errorf("%w: VerifyOptions.Roots is nil, which would trust the system roots for a client certificate", ErrInvalidConfig)
	}
	c, err := s.Certificate()
	if err != nil {
		return nil, err
	}
	if len(opts.KeyUsages) == 0 {
		opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	chains, err := c.Verify(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClientCertUntrusted, err)
	}
	return chains, nil
}

// TLV encodes s as a PP2_TYPE_SSL field for the writer, with its sub-TLVs in
// type order (VERSION to CLIENT_CERT); empty strings are left out. It does not
// check s against the rules a receiver applies, so tests can send what a
// broken upstream would. A value over 65535 bytes (a large CertDER) is
// refused by [NewTLVs].
func (s SSL) TLV() TLV {
	n := sslFixedLen
	for typ := sslSubVersion; typ <= sslSubClientCert; typ++ {
		if f := *s.field(typ); f != "" {
			n += 3 + len(f)
		}
	}
	v := make([]byte, sslFixedLen, n)
	v[0] = s.Client
	v[1], v[2], v[3], v[4] = byte(s.Verify>>24), byte(s.Verify>>16), byte(s.Verify>>8), byte(s.Verify)
	for typ := sslSubVersion; typ <= sslSubClientCert; typ++ {
		if f := *s.field(typ); f != "" {
			v = append(v, typ, byte(len(f)>>8), byte(len(f)))
			v = append(v, f...)
		}
	}
	return TLV{Type: TLVSSL, Value: string(v)}
}

// LogValue implements [slog.LogValuer]: whether the client used TLS, the
// version, cipher and group, whether a certificate was presented and
// verified (with the upstream's error code when it was not), the common name,
// and the SHA-256 fingerprint of a forwarded certificate, leaving out what
// is empty.
func (s SSL) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.Bool("tls", s.TLS()))
	for _, a := range []struct{ k, v string }{{"version", s.Version}, {"cipher", s.Cipher}, {"group", s.Group}} {
		if a.v != "" {
			attrs = append(attrs, slog.String(a.k, a.v))
		}
	}
	switch {
	case !s.CertPresented():
		attrs = append(attrs, slog.String("cert", "none"))
	case s.CertVerified():
		attrs = append(attrs, slog.String("cert", "verified"))
	default:
		attrs = append(attrs, slog.String("cert", "unverified"), slog.Uint64("verify", uint64(s.Verify)))
	}
	if s.CN != "" {
		attrs = append(attrs, slog.String("cn", s.CN))
	}
	if s.CertDER != "" {
		sum := sha256.Sum256([]byte(s.CertDER))
		attrs = append(attrs, slog.String("cert_sha256", hex.EncodeToString(sum[:])))
	}
	return slog.GroupValue(attrs...)
}

// parseSSL decodes the value of a PP2_TYPE_SSL TLV and enforces the rules
// listed on [SSL]. The strings of the result share v's memory: it does not
// allocate unless it fails.
func parseSSL(v string) (SSL, error) {
	if len(v) < sslFixedLen {
		return SSL{}, fmt.Errorf("%w: %d bytes, shorter than the client and verify fields (spec 2.2.6)", ErrInvalidSSL, len(v))
	}
	s := SSL{Client: v[0], Verify: uint32(v[1])<<24 | uint32(v[2])<<16 | uint32(v[3])<<8 | uint32(v[4])}
	for i := sslFixedLen; i < len(v); {
		if len(v)-i < 3 {
			return SSL{}, fmt.Errorf("%w: truncated sub-TLV at byte %d", ErrInvalidSSL, i)
		}
		typ, l, at := v[i], int(v[i+1])<<8|int(v[i+2]), i
		i += 3
		if l > len(v)-i {
			return SSL{}, fmt.Errorf("%w: sub-TLV %#02x at byte %d runs past the SSL TLV", ErrInvalidSSL, typ, at)
		}
		val := v[i : i+l]
		i += l
		f := s.field(typ)
		if f == nil {
			continue // not one of ours: skipped (spec 2.2)
		}
		name := sslSubNames[typ-sslSubVersion]
		switch {
		case *f != "":
			return SSL{}, fmt.Errorf("%w: two %s sub-TLVs", ErrInvalidSSL, name)
		case l == 0:
			return SSL{}, fmt.Errorf("%w: empty %s sub-TLV", ErrInvalidSSL, name)
		case typ == sslSubCN:
			if !utf8.ValidString(val) {
				return SSL{}, fmt.Errorf("%w: CN sub-TLV is not UTF-8", ErrInvalidSSL)
			}
		case typ == sslSubClientCert:
			if !derSequence(val) {
				return SSL{}, fmt.Errorf("%w: CLIENT_CERT sub-TLV is not one DER SEQUENCE", ErrInvalidSSL)
			}
		default:
			if !isASCII(val) {
				return SSL{}, fmt.Errorf("%w: %s sub-TLV is not US-ASCII", ErrInvalidSSL, name)
			}
		}
		*f = val
	}
	switch {
	case s.TLS() && s.Version == "":
		return SSL{}, fmt.Errorf("%w: PP2_CLIENT_SSL without a VERSION sub-TLV", ErrInvalidSSL)
	case s.CertPresented() && !s.TLS():
		return SSL{}, fmt.Errorf("%w: certificate bits %#02x without PP2_CLIENT_SSL", ErrInvalidSSL, s.Client)
	case (s.CN != "" || s.CertDER != "") && !s.CertPresented():
		return SSL{}, fmt.Errorf("%w: a client certificate's CN or DER without PP2_CLIENT_CERT_CONN or _SESS", ErrInvalidSSL)
	}
	return s, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// derSequence reports whether v is exactly one DER SEQUENCE (tag 0x30, a
// definite length in its shortest form) whose content fills v. An X.509
// certificate is one; what is inside is left to crypto/x509. The value of a
// TLV is at most 65535 bytes, so the length takes at most two bytes.
func derSequence(v string) bool {
	if len(v) < 2 || v[0] != 0x30 {
		return false
	}
	n, hdr := int(v[1]), 2
	if n >= 0x80 {
		k := n & 0x7f
		if k == 0 || k > 2 || len(v) < 2+k {
			return false
		}
		n = 0
		for j := range k {
			n = n<<8 | int(v[2+j])
		}
		if n < 0x80 || (k == 2 && n < 0x100) {
			return false // not the shortest form
		}
		hdr += k
	}
	return hdr+n == len(v)
}
