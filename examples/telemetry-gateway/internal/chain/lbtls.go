package chain

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sourceip/sourceip/proxyproto"
)

// LBTLSConfig is the listener's mode for TLS terminated at the load balancer
// (Config.LBTLS): the listener does no TLS of its own, and reads what a
// trusted load balancer reported about the client's TLS from the PROXY v2
// header's SSL TLV, which proxyproto keeps only from trusted upstreams.
type LBTLSConfig struct {
	// ClientCAs, when set, re-verifies a client certificate the load
	// balancer forwards (PP2_SUBTYPE_SSL_CLIENT_CERT) with
	// proxyproto.SSL.VerifyCertificate: the identity is then the
	// certificate's, under the gateway's own CA. Without ClientCAs, and for a
	// load balancer that forwards no certificate (HAProxy 2.6 does not), the
	// identity is the CN sub-TLV the load balancer reported, which is
	// weaker: it names whoever holds a certificate with that common name
	// from any CA the load balancer trusts.
	ClientCAs *x509.CertPool
	// Intermediates are intermediate CAs for that verification (the TLV
	// carries the leaf only).
	Intermediates *x509.CertPool
}

// Identity says where the identity of a client whose TLS a load balancer
// terminated came from.
type Identity uint8

const (
	// IdentityNone: no identity; LBTLS.Err says why.
	IdentityNone Identity = iota
	// IdentityCertificate: the certificate the load balancer forwarded,
	// verified by the gateway against LBTLSConfig.ClientCAs.
	IdentityCertificate
	// IdentityCN: the common name the load balancer reported, after
	// verifying the certificate itself.
	IdentityCN
)

// String returns "none", "certificate" or "cn".
func (i Identity) String() string {
	switch i {
	case IdentityCertificate:
		return "certificate"
	case IdentityCN:
		return "cn"
	}
	return "none"
}

// Why a connection whose TLS a load balancer terminated has no identity.
var (
	ErrNoSSL          = errors.New("chain: the PROXY header carries no SSL TLV: the load balancer reported no TLS")
	ErrNoTLS          = errors.New("chain: the load balancer reports that the client did not use TLS")
	ErrNoCertificate  = errors.New("chain: the load balancer reports no client certificate")
	ErrCertUnverified = errors.New("chain: the load balancer did not verify the client certificate")
	ErrNoCommonName   = errors.New("chain: the client certificate has no common name")
)

// LBTLS is what a load balancer that terminated the client's TLS reported
// in the PROXY v2 header's SSL TLV, and the identity the listener derived
// from it. It is set before the connection reaches the broker and not
// changed after.
type LBTLS struct {
	// SSL is the TLV as the load balancer sent it; HasSSL reports whether
	// the header carried one.
	SSL    proxyproto.SSL
	HasSSL bool
	// Cert is the certificate the load balancer forwarded, verified against
	// LBTLSConfig.ClientCAs; nil when the identity is the CN.
	Cert *x509.Certificate
	// CN is the client's identity: Cert's common name, or the CN the load
	// balancer reported.
	CN string
	// Identity says which; IdentityNone when Err is set.
	Identity Identity
	// Err is why there is no identity (it wraps one of the Err* of this
	// package, or proxyproto's certificate errors): the gateway refuses
	// such a connection at CONNECT.
	Err error
}

// lbTLS reads f's SSL TLV under cfg.
func lbTLS(cfg *LBTLSConfig, f proxyproto.Facts) *LBTLS {
	l := &LBTLS{}
	l.SSL, l.HasSSL = f.TLVs.SSL()
	s := l.SSL
	switch {
	case !l.HasSSL:
		l.Err = ErrNoSSL
	case !s.TLS():
		l.Err = ErrNoTLS
	case !s.CertPresented():
		l.Err = ErrNoCertificate
	case !s.CertVerified():
		l.Err = fmt.Errorf("%w (its verify result is %d)", ErrCertUnverified, s.Verify)
	case s.CertDER != "" && cfg.ClientCAs != nil:
		chains, err := s.VerifyCertificate(x509.VerifyOptions{Roots: cfg.ClientCAs, Intermediates: cfg.Intermediates})
		if err != nil {
			l.Err = err
			break
		}
		l.Cert, l.CN, l.Identity = chains[0][0], chains[0][0].Subject.CommonName, IdentityCertificate
	default:
		l.CN, l.Identity = s.CN, IdentityCN
	}
	if l.Err == nil && l.CN == "" {
		l.Cert, l.Identity, l.Err = nil, IdentityNone, ErrNoCommonName
	}
	return l
}

// Subject returns the identity as a certificate subject: Cert's, or one
// holding only the reported CN; "" without an identity.
func (l *LBTLS) Subject() string {
	switch {
	case l.Err != nil:
		return ""
	case l.Cert != nil:
		return l.Cert.Subject.String()
	}
	return pkix.Name{CommonName: l.CN}.String()
}

// LogValue implements slog.LogValuer: the SSL TLV as proxyproto renders it
// (TLS version, cipher, whether a certificate was presented and verified,
// the CN, a forwarded certificate's fingerprint), and the identity.
func (l *LBTLS) LogValue() slog.Value {
	as := []slog.Attr{slog.Any("reported", l.SSL), slog.String("identity", l.Identity.String())}
	if !l.HasSSL {
		as[0] = slog.String("reported", "none")
	}
	return slog.GroupValue(as...)
}
