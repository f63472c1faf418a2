package proxyproto

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
)

// HAProxy terminates TLS and reports what it saw in the SSL TLV:
// send-proxy-v2-ssl-cn adds the TLV with the client certificate's CN, and
// proxy-v2-options adds the cipher and the signature and key algorithms of
// HAProxy's own certificate.
var haproxySSLConfig = template.Must(template.New("cfg").Parse(haproxyDefaults + `
frontend fe_required
    bind 127.0.0.1:{{.Required}} ssl crt {{.Crt}} ca-file {{.CA}} verify required
    default_backend be_app

frontend fe_optional
    bind 127.0.0.1:{{.Optional}} ssl crt {{.Crt}} ca-file {{.CA}} verify optional ca-ignore-err all crt-ignore-err all
    default_backend be_app

frontend fe_plain
    bind 127.0.0.1:{{.Plain}}
    default_backend be_app

backend be_app
    server app 127.0.0.1:{{.App}} send-proxy-v2-ssl-cn proxy-v2-options ssl-cipher,cert-sig,cert-key source ` + haproxyAddr + `
`))

// sslSeen is what the server behind HAProxy learnt about one connection.
type sslSeen struct {
	source netip.AddrPort
	ssl    SSL
	ok     bool
	tlvs   string // the types of the header's TLVs
}

// TestHAProxySSL sends real TLS clients (crypto/tls, with and without client
// certificates) through HAProxy 2.6 terminating TLS, and checks the SSL TLV
// it sends as this package reads it: the client bits, verify, the version,
// CN and cipher the client negotiated, and the algorithms of HAProxy's own
// certificate. HAProxy sends no GROUP, SIG_SCHEME or CLIENT_CERT sub-TLV (it
// has no option for them); the DER path is covered with this package's
// writer in TestListenerSSLClientCert.
func TestHAProxySSL(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	stranger := newTestCA(t, "Someone else's CA")
	dir := t.TempDir()
	srv := ca.server(t)
	crt := writePEM(t, dir, "server.pem", srv.Certificate[0], srv.PrivateKey.(*ecdsa.PrivateKey))
	caFile := writePEM(t, dir, "ca.pem", ca.cert.Raw, nil)

	app, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l, err := NewListener(app, Config{
		Trust:             trustOf(haproxyAddr),
		ReadHeaderTimeout: 3 * time.Second,
		OnReject:          func(r Rejection) { assert.Fail(t, "rejected", "%+v", r) },
	})
	require.NoError(t, err)
	defer l.Close()
	seen := make(chan sslSeen, 16)
	go serveEach(l, func(c net.Conn) {
		f, _ := FactsFromConn(c)
		s, ok := f.TLVs.SSL()
		seen <- sslSeen{source: f.Source, ssl: s, ok: ok, tlvs: f.TLVs.String()}
		if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			fmt.Fprint(c, "pong "+line)
		}
	})

	p := e2e.StartHAProxy(t, 3, func(p []int) string {
		var cfg strings.Builder
		require.NoError(t, haproxySSLConfig.Execute(&cfg, map[string]any{
			"Required": p[0], "Optional": p[1], "Plain": p[2], "App": app.Addr().(*net.TCPAddr).Port, "Crt": crt, "CA": caFile}))
		return cfg.String()
	})
	required, optional, plain := fmt.Sprintf("127.0.0.1:%d", p[0]), fmt.Sprintf("127.0.0.1:%d", p[1]), fmt.Sprintf("127.0.0.1:%d", p[2])

	// exchange sends a line over conn and returns the facts the server
	// reported for it.
	exchange := func(t *testing.T, c net.Conn) sslSeen {
		t.Helper()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err := fmt.Fprint(c, "ping\n")
		require.NoError(t, err)
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err, "no answer through haproxy")
		require.Equal(t, "pong ping\n", line)
		select {
		case s := <-seen:
			require.Equal(t, c.LocalAddr().(*net.TCPAddr).AddrPort(), s.source, "the server saw another connection")
			require.True(t, s.ok, "no valid SSL TLV")
			return s
		case <-time.After(5 * time.Second):
			require.FailNow(t, "the server saw no connection")
		}
		return sslSeen{}
	}
	tlsDial := func(t *testing.T, addr string, certs []tls.Certificate, cache tls.ClientSessionCache) *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, ServerName: "localhost", Certificates: certs, ClientSessionCache: cache})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	// HAProxy's own certificate: ECDSA P-256 signed with SHA-256, as OpenSSL
	// names them.
	const sigAlg, keyAlg = "ecdsa-with-SHA256", "EC256"

	t.Run("verify required: certificate presented and verified", func(t *testing.T) {
		c := tlsDial(t, required, []tls.Certificate{ca.client(t, "device-7")}, nil)
		got := exchange(t, c)
		s := got.ssl
		t.Logf("haproxy sent TLVs %s, SSL %+v", got.tlvs, s)
		assert.Equal(t, "ssl", got.tlvs)
		cs := c.ConnectionState()
		assert.Equal(t, SSL{Client: SSLClientTLS | SSLClientCertConn | SSLClientCertSess, Version: tlsVersionName(cs.Version), CN: "device-7",
			Cipher: tls.CipherSuiteName(cs.CipherSuite), SigAlg: sigAlg, KeyAlg: keyAlg}, s)
		assert.True(t, s.CertVerified())
		_, err := s.Certificate()
		assert.ErrorIs(t, err, ErrNoClientCert, "HAProxy 2.6 forwards no DER")
	})
	t.Run("verify required: resumed session reports the certificate of the session", func(t *testing.T) {
		cache := tls.NewLRUClientSessionCache(4)
		exchange(t, tlsDial(t, required, []tls.Certificate{ca.client(t, "device-8")}, cache))
		c := tlsDial(t, required, nil, cache)
		if !c.ConnectionState().DidResume {
			e2e.Unavailable(t, "haproxy did not resume the TLS session")
		}
		s := exchange(t, c).ssl
		assert.Equal(t, SSLClientTLS|SSLClientCertSess, s.Client, "PP2_CLIENT_CERT_SESS without _CONN")
		assert.Equal(t, "device-8", s.CN)
		assert.True(t, s.CertVerified())
	})
	t.Run("verify optional: no certificate", func(t *testing.T) {
		c := tlsDial(t, optional, nil, nil)
		s := exchange(t, c).ssl
		assert.Equal(t, SSLClientTLS, s.Client)
		assert.Zero(t, s.Verify, "HAProxy zeroes verify when no certificate was presented")
		assert.Empty(t, s.CN)
		assert.False(t, s.CertPresented())
		assert.False(t, s.CertVerified(), "a zero verify without a certificate is no verified client")
	})
	t.Run("verify optional, errors ignored: another CA's certificate", func(t *testing.T) {
		// GetClientCertificate, since crypto/tls would otherwise send no
		// certificate that HAProxy's list of acceptable CAs leaves out.
		intruder := stranger.client(t, "intruder")
		c, err := tls.Dial("tcp", optional, &tls.Config{RootCAs: ca.pool, ServerName: "localhost",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &intruder, nil }})
		require.NoError(t, err)
		defer c.Close()
		s := exchange(t, c).ssl
		assert.Equal(t, SSLClientTLS|SSLClientCertConn|SSLClientCertSess, s.Client)
		assert.NotZero(t, s.Verify, "verification failed")
		assert.Equal(t, "intruder", s.CN)
		assert.False(t, s.CertVerified())
		t.Logf("verify = %d for a certificate from an unknown CA", s.Verify)
	})
	t.Run("verify required: no certificate, no connection", func(t *testing.T) {
		c, err := tls.Dial("tcp", required, &tls.Config{RootCAs: ca.pool, ServerName: "localhost"})
		if err == nil {
			// TLS 1.3: the client finishes first and learns of the refusal
			// on its first read.
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprint(c, "ping\n")
			_, err = bufio.NewReader(c).ReadString('\n')
		}
		assert.Error(t, err, "haproxy let a client without a certificate through")
	})
	t.Run("send-proxy-v2-ssl on a plain TCP frontend", func(t *testing.T) {
		c, err := net.Dial("tcp", plain)
		require.NoError(t, err)
		defer c.Close()
		s := exchange(t, c).ssl
		assert.Equal(t, SSL{}, s, "client 0, verify zeroed, no sub-TLV")
		assert.False(t, s.TLS())
	})
}

// tlsVersionName returns OpenSSL's name of a TLS version, as HAProxy sends it.
func tlsVersionName(v uint16) string {
	return map[uint16]string{tls.VersionTLS12: "TLSv1.2", tls.VersionTLS13: "TLSv1.3"}[v]
}
