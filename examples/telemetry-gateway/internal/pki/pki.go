// Package pki makes the certificates the telemetry gateway needs when none are
// given: a self-signed server certificate generated at start, and, for the demo
// and tests, a small certificate authority that issues server and device
// certificates. It also loads the files an operator supplies.
//
// Keys are ECDSA P-256: fast to generate (well under a millisecond) and to
// handshake with, and accepted by every MQTT client the gateway is tested with
// (Go's crypto/tls, paho, libmosquitto over OpenSSL).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"time"
)

// Validity is how long generated certificates are valid, starting an hour in
// the past to tolerate clock skew.
const Validity = 365 * 24 * time.Hour

// CA is a certificate authority held in memory.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA returns a new self-signed certificate authority named cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(cn)
	tmpl.IsCA = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Pool returns a certificate pool holding only the authority.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// PEM returns the authority's certificate in PEM form, for clients' CA files
// (mosquitto_pub --cafile).
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Server issues a server certificate for hosts: IP addresses become IP SANs,
// anything else DNS SANs. The first host is also the subject's common name.
func (ca *CA) Server(hosts ...string) (tls.Certificate, error) {
	return ca.issue(hosts, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with subject CN=cn, a device identity.
func (ca *CA) Client(cn string) (tls.Certificate, error) {
	return ca.issue([]string{cn}, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(hosts []string, usage x509.ExtKeyUsage) (tls.Certificate, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, errors.New("pki: a certificate needs a name")
	}
	tmpl := template(hosts[0])
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	if usage == x509.ExtKeyUsageServerAuth {
		addSANs(tmpl, hosts)
	}
	return create(tmpl, ca.Cert, ca.Key)
}

// create makes a key and the certificate tmpl describes for it, signed by
// parent's key, or by its own key when parent is nil (self-signed).
func create(tmpl, parent *x509.Certificate, parentKey any) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// SelfSigned returns a self-signed server certificate for hosts, marked as its
// own authority so that clients can pin it as their CA file. The gateway makes
// one at start when no certificate is configured.
func SelfSigned(hosts ...string) (tls.Certificate, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, errors.New("pki: a certificate needs a name")
	}
	tmpl := template(hosts[0])
	tmpl.IsCA = true
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	addSANs(tmpl, hosts)
	return create(tmpl, nil, nil)
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		BasicConstraintsValid: true,
	}
}

func addSANs(tmpl *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

// CertPEM returns the certificate chain of c in PEM form.
func CertPEM(c tls.Certificate) []byte {
	var out []byte
	for _, der := range c.Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// KeyPEM returns the private key of c in PKCS #8 PEM form.
func KeyPEM(c tls.Certificate) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteFiles writes c's chain to certFile and its key to keyFile (mode 0600).
func WriteFiles(c tls.Certificate, certFile, keyFile string) error {
	key, err := KeyPEM(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, CertPEM(c), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, key, 0o600)
}

// Fingerprint returns the SHA-256 fingerprint of c's leaf certificate in hex,
// for logs.
func Fingerprint(c tls.Certificate) string {
	if len(c.Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(c.Certificate[0])
	return hex.EncodeToString(sum[:])
}

// LoadPool reads a PEM file of CA certificates.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("pki: %s holds no PEM certificate", file)
	}
	return p, nil
}
