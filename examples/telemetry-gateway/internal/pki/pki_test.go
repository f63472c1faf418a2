package pki

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSelfSignedVerifiesAsItsOwnRoot(t *testing.T) {
	c, err := SelfSigned("127.0.0.1", "gateway.test")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	for _, name := range []string{"127.0.0.1", "gateway.test"} {
		_, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		assert.NoError(t, err, "verify as %s", name)
	}
}

func TestCAIssuesServerAndClient(t *testing.T) {
	ca, err := NewCA("test CA")
	require.NoError(t, err)
	srv, err := ca.Server("127.0.0.1")
	require.NoError(t, err)
	cli, err := ca.Client("device-7")
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{srv},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			got <- err.Error()
			return
		}
		got <- tc.ConnectionState().PeerCertificates[0].Subject.String()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cli}})
	require.NoError(t, err)
	c.Close()
	assert.Equal(t, "CN=device-7", <-got, "the subject the server saw")
}

func TestWriteAndLoad(t *testing.T) {
	ca, err := NewCA("test CA")
	require.NoError(t, err)
	srv, err := ca.Server("localhost")
	require.NoError(t, err)
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	require.NoError(t, WriteFiles(srv, cf, kf))
	_, err = tls.LoadX509KeyPair(cf, kf)
	require.NoError(t, err)
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, WriteFiles(tls.Certificate{Certificate: [][]byte{ca.Cert.Raw}, PrivateKey: ca.Key}, caFile, filepath.Join(dir, "ca.key")))
	_, err = LoadPool(caFile)
	require.NoError(t, err)
	_, err = LoadPool(kf)
	assert.Error(t, err, "LoadPool accepted a key file")
}
