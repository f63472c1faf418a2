package pki

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
)

func TestSelfSignedVerifiesAsItsOwnRoot(t *testing.T) {
	c, err := SelfSigned("127.0.0.1", "gateway.test")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	for _, name := range []string{"127.0.0.1", "gateway.test"} {
		if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("verify as %s: %v", name, err)
		}
	}
}

func TestCAIssuesServerAndClient(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Client("device-7")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{srv},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s := <-got; s != "CN=device-7" {
		t.Errorf("server saw subject %q, want CN=device-7", s)
	}
}

func TestWriteAndLoad(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server("localhost")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := WriteFiles(srv, cf, kf); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(cf, kf); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := WriteFiles(tls.Certificate{Certificate: [][]byte{ca.Cert.Raw}, PrivateKey: ca.Key}, caFile, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPool(caFile); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPool(kf); err == nil {
		t.Error("LoadPool accepted a key file")
	}
}
