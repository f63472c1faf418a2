package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerCert is a self-signed server certificate in PEM files, for real
// programs (nginx, HAProxy) that terminate TLS in a test.
type ServerCert struct {
	// Cert and Key are the certificate and its private key; Both holds the
	// two, as HAProxy's crt wants them.
	Cert, Key, Both string
	// Pool trusts the certificate, for the test's clients.
	Pool *x509.CertPool
}

// NewServerCert writes a self-signed certificate for the given DNS names
// and IP addresses into tb's temporary directory, valid for one hour.
func NewServerCert(tb testing.TB, names ...string) ServerCert {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sourceip test server"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("key: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	dir := tb.TempDir()
	sc := ServerCert{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), Both: filepath.Join(dir, "both.pem"),
		Pool: x509.NewCertPool()}
	sc.Pool.AddCert(cert)
	for path, data := range map[string][]byte{sc.Cert: certPEM, sc.Key: keyPEM, sc.Both: append(append([]byte{}, certPEM...), keyPEM...)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			tb.Fatalf("write %s: %v", path, err)
		}
	}
	return sc
}
