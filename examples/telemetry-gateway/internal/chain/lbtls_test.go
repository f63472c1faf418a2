package chain

import (
	"testing"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLBTLSIdentity: what a load balancer that terminated TLS reports in
// the SSL TLV (spec section 2.2.6) gives the client an identity only when it
// says a certificate was presented and verified, and a forwarded
// certificate is held to the gateway's own CA.
func TestLBTLSIdentity(t *testing.T) {
	ca, err := pki.NewCA("fleet CA")
	require.NoError(t, err)
	stranger, err := pki.NewCA("someone else's CA")
	require.NoError(t, err)
	der := func(ca *pki.CA, cn string) string {
		c, err := ca.Client(cn)
		require.NoError(t, err)
		return string(c.Certificate[0])
	}
	const tlsCert = proxyproto.SSLClientTLS | proxyproto.SSLClientCertConn
	withCA := &LBTLSConfig{ClientCAs: ca.Pool()}
	tests := []struct {
		name     string
		cfg      *LBTLSConfig
		ssl      *proxyproto.SSL // nil: no SSL TLV
		cn       string
		identity Identity
		subject  string
		wantErr  error
	}{
		{"no SSL TLV", withCA, nil, "", IdentityNone, "", ErrNoSSL},
		{"not TLS", withCA, &proxyproto.SSL{}, "", IdentityNone, "", ErrNoTLS},
		{"TLS without a certificate (verify optional)", withCA, &proxyproto.SSL{Client: proxyproto.SSLClientTLS, Version: "TLSv1.3"}, "", IdentityNone, "", ErrNoCertificate},
		{"certificate the load balancer could not verify (X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)", withCA,
			&proxyproto.SSL{Client: tlsCert, Verify: 20, Version: "TLSv1.3", CN: "d1"}, "", IdentityNone, "", ErrCertUnverified},
		{"verified, CN only (HAProxy send-proxy-v2-ssl-cn)", withCA,
			&proxyproto.SSL{Client: tlsCert | proxyproto.SSLClientCertSess, Version: "TLSv1.3", CN: "d1"}, "d1", IdentityCN, "CN=d1", nil},
		{"verified in a resumed session (client bits 5)", withCA,
			&proxyproto.SSL{Client: proxyproto.SSLClientTLS | proxyproto.SSLClientCertSess, Version: "TLSv1.3", CN: "d1"}, "d1", IdentityCN, "CN=d1", nil},
		{"verified, no CN and no certificate", withCA, &proxyproto.SSL{Client: tlsCert, Version: "TLSv1.3"}, "", IdentityNone, "", ErrNoCommonName},
		{"forwarded certificate from the gateway's CA", withCA,
			&proxyproto.SSL{Client: tlsCert, Version: "TLSv1.3", CN: "d2", CertDER: der(ca, "d2")}, "d2", IdentityCertificate, "CN=d2", nil},
		{"forwarded certificate without a CN sub-TLV", withCA,
			&proxyproto.SSL{Client: tlsCert, Version: "TLSv1.3", CertDER: der(ca, "d2")}, "d2", IdentityCertificate, "CN=d2", nil},
		{"forwarded certificate from another CA, which the load balancer trusted", withCA,
			&proxyproto.SSL{Client: tlsCert, Version: "TLSv1.3", CN: "d2", CertDER: der(stranger, "d2")}, "", IdentityNone, "", proxyproto.ErrClientCertUntrusted},
		{"CN sub-TLV that is not the forwarded certificate's", withCA,
			&proxyproto.SSL{Client: tlsCert, Version: "TLSv1.3", CN: "d3", CertDER: der(ca, "d2")}, "", IdentityNone, "", proxyproto.ErrInvalidClientCert},
		{"forwarded certificate, no CA to re-verify it: the CN", &LBTLSConfig{},
			&proxyproto.SSL{Client: tlsCert, Version: "TLSv1.3", CN: "d2", CertDER: der(stranger, "d2")}, "d2", IdentityCN, "CN=d2", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f proxyproto.Facts
			if tt.ssl != nil {
				var err error
				f.TLVs, err = proxyproto.NewTLVs(tt.ssl.TLV())
				require.NoError(t, err)
			}
			l := lbTLS(tt.cfg, f)
			info := &Info{LBTLS: l}
			cn, ok := info.ClientCN()
			if tt.wantErr != nil {
				assert.ErrorIs(t, l.Err, tt.wantErr)
				assert.False(t, ok, "ClientCN")
			} else {
				assert.NoError(t, l.Err)
				assert.True(t, ok, "ClientCN")
			}
			assert.Equal(t, tt.cn, cn)
			assert.Equal(t, tt.identity, l.Identity)
			assert.Equal(t, tt.subject, info.Subject())
			assert.Equal(t, tt.identity == IdentityCertificate, l.Cert != nil, "Cert")
		})
	}
}
