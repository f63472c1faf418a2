package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startTLSAtLB runs a gateway with no TLS of its own behind lbAddr, which
// terminates TLS and reports it in the PROXY header's SSL TLV; forwarded
// certificates are verified against the test CA.
func startTLSAtLB(t *testing.T) *env {
	t.Helper()
	return start(t, func(c *Config) {
		c.LBTLS = &chain.LBTLSConfig{ClientCAs: c.TLS.ClientCAs}
		c.TLS = nil
	})
}

// TestTLSAtLBHAProxy: Debian's mosquitto_pub with client certificates
// through a real HAProxy 2.6 that terminates TLS (verify required, and a
// second frontend with verify optional and every error ignored, as a
// misconfigured load balancer would be) and sends send-proxy-v2-ssl-cn to a
// gateway with no TLS of its own. A device with a certificate the CA issued
// publishes, and the log line and the sink record name the load balancer
// that terminated TLS and what it reported. A device without a certificate,
// or with another CA's, is refused: by HAProxy where it verifies, by the
// gateway at CONNECT (MQTT 3.1.1 return code 5, MQTT 5 0x87) where HAProxy
// let it through, and so is a plain TCP client of a frontend without TLS.
func TestTLSAtLBHAProxy(t *testing.T) {
	mosq := e2e.Require(t, "mosquitto_pub")[0]
	e := startTLSAtLB(t)
	stranger, err := pki.NewCA("someone else's CA")
	require.NoError(t, err)
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name string, data []byte) string {
		files[name] = filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(files[name], data, 0o600))
		return files[name]
	}
	write("ca.pem", e.ca.PEM())
	srv, err := e.ca.Server("gateway.test", "127.0.0.1")
	require.NoError(t, err)
	srvKey, err := pki.KeyPEM(srv)
	require.NoError(t, err)
	write("haproxy.pem", append(pki.CertPEM(srv), srvKey...))
	for name, ca := range map[string]*pki.CA{"d1": e.ca, "d5": e.ca, "intruder": stranger} {
		c, err := ca.Client(name)
		require.NoError(t, err)
		require.NoError(t, pki.WriteFiles(c, write(name+".crt", nil), write(name+".key", nil)))
	}
	ports := e2e.StartHAProxy(t, 3, func(p []int) string {
		return fmt.Sprintf(haproxyDefaults+`
frontend required
    bind 127.0.0.1:%d ssl crt %s ca-file %s verify required
    default_backend gateway
frontend optional
    bind 127.0.0.1:%d ssl crt %s ca-file %s verify optional ca-ignore-err all crt-ignore-err all
    default_backend gateway
frontend plain
    bind 127.0.0.1:%d
    default_backend gateway
backend gateway
    source %s
    server gw1 %s send-proxy-v2-ssl-cn proxy-v2-options authority,ssl-cipher
`, p[0], files["haproxy.pem"], files["ca.pem"], p[1], files["haproxy.pem"], files["ca.pem"], p[2], lbAddr, e.g.MQTTAddr())
	})
	required, optional, plain := ports[0], ports[1], ports[2]

	publish := func(t *testing.T, port int, from, version, id, cert string, tlsOn bool) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		args := []string{"-h", "127.0.0.1", "-p", fmt.Sprint(port), "-A", from, "-V", version, "-i", id, "-t", "telemetry/" + id,
			"-q", "1", "-d", "-m", fmt.Sprintf(`{"device":%q,"seq":1,"values":{"temp":20.5}}`, id)}
		if tlsOn {
			args = append(args, "--cafile", files["ca.pem"])
		}
		if cert != "" {
			args = append(args, "--cert", files[cert+".crt"], "--key", files[cert+".key"])
		}
		out, err := exec.CommandContext(ctx, mosq, args...).CombinedOutput()
		return string(out), err
	}
	refused := func(t *testing.T, id, from, version, wantErr string) {
		t.Helper()
		want := map[string]string{"msg": "mqtt connection", "client_id": id, "outcome": "refused", "decision": "not_allowed",
			"connack": map[string]string{"mqttv311": "0x05", "mqttv5": "0x87"}[version], "error": wantErr,
			"clientip.client": from, "clientip.source": "proxy-protocol", "tls_terminated_by": lbAddr.String()}
		e.logs.wait(t, 5*time.Second, want)
	}

	for _, version := range []string{"mqttv311", "mqttv5"} {
		t.Run(version+" verified certificate", func(t *testing.T) {
			id := "d1"
			if version == "mqttv5" {
				id = "d5"
			}
			out, err := publish(t, required, "127.0.0.33", version, id, id, true)
			require.NoError(t, err, "mosquitto_pub:\n%s", out)
			require.Contains(t, out, "received PUBACK")
			e.logs.wait(t, 5*time.Second, map[string]string{"msg": "mqtt connection", "client_id": id, "outcome": "accepted",
				"clientip.client": "127.0.0.33", "clientip.source": "proxy-protocol", "clientip.peer": lbAddr.String() + ":*",
				"proxy_header": "v2 proxy", "tls_terminated_by": lbAddr.String(), "tls_subject": "CN=" + id, "tls_sni": "127.0.0.1",
				"lb_tls.identity": "cn", "lb_tls.reported.tls": "true", "lb_tls.reported.cert": "verified", "lb_tls.reported.cn": id,
				"lb_tls.reported.version": "TLSv1.3"})
		})
		t.Run(version+" no certificate, verify optional", func(t *testing.T) {
			out, err := publish(t, optional, "127.0.0.34", version, "nocert-"+version, "", true)
			assert.Error(t, err, "mosquitto_pub:\n%s", out)
			assert.Contains(t, strings.ToLower(out), "not authori")
			refused(t, "nocert-"+version, "127.0.0.34", version,
				"gateway: no client certificate verified at the load balancer: chain: the load balancer reports no client certificate")
		})
		t.Run(version+" another CA's certificate, verify optional", func(t *testing.T) {
			out, err := publish(t, optional, "127.0.0.35", version, "intruder", "intruder", true)
			assert.Error(t, err, "mosquitto_pub:\n%s", out)
			assert.Contains(t, strings.ToLower(out), "not authori")
			refused(t, "intruder", "127.0.0.35", version,
				"gateway: no client certificate verified at the load balancer: chain: the load balancer did not verify the client certificate*")
		})
	}
	t.Run("no certificate, verify required", func(t *testing.T) {
		out, err := publish(t, required, "127.0.0.36", "mqttv311", "nocert-required", "", true)
		assert.Error(t, err, "mosquitto_pub:\n%s", out)
		assert.NotContains(t, out, "received PUBACK")
	})
	t.Run("another CA's certificate, verify required", func(t *testing.T) {
		out, err := publish(t, required, "127.0.0.37", "mqttv311", "intruder", "intruder", true)
		assert.Error(t, err, "mosquitto_pub:\n%s", out)
		assert.NotContains(t, out, "received PUBACK")
	})
	t.Run("client id other than the certificate's CN", func(t *testing.T) {
		out, err := publish(t, required, "127.0.0.38", "mqttv311", "d9", "d1", true)
		assert.Error(t, err, "mosquitto_pub:\n%s", out)
		e.logs.wait(t, 5*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "d9", "outcome": "refused",
			"tls_subject": "CN=d1", "error": `client id "d9" is not the client certificate's common name "d1"`})
	})
	t.Run("plain TCP frontend", func(t *testing.T) {
		out, err := publish(t, plain, "127.0.0.39", "mqttv311", "plain", "", false)
		assert.Error(t, err, "mosquitto_pub:\n%s", out)
		refused(t, "plain", "127.0.0.39", "mqttv311",
			"gateway: no client certificate verified at the load balancer: chain: the load balancer reports that the client did not use TLS")
	})

	recs := e.records(t)
	require.Len(t, recs, 2, "only the devices with a verified certificate are in the sink")
	for _, r := range recs {
		p := r.Provenance
		assert.Equal(t, "127.0.0.33", p.Client, r.ID)
		assert.Equal(t, lbAddr.String(), p.TLSTerminatedBy, r.ID)
		assert.Equal(t, "TLSv1.3", p.TLSVersion, r.ID)
		assert.Equal(t, "cn", p.TLSIdentity, r.ID)
		assert.Equal(t, "CN="+r.Device, p.TLSSubject, r.ID)
		assert.Equal(t, "127.0.0.1", p.TLSServerName, r.ID)
	}
}

// sslDevice returns a device configuration that plays the load balancer
// itself: it connects from lbAddr, writes a PROXY v2 header with the device
// src and ssl's TLV, and speaks plain MQTT, as proxyproto's writer lets any
// TLS-terminating load balancer do.
func (e *env) sslDevice(t *testing.T, id string, version byte, src string, ssl *proxyproto.SSL) device.Config {
	t.Helper()
	cfg := e.device(id, version, 2, src)
	cfg.TLS = nil
	if ssl != nil {
		var err error
		cfg.TLVs, err = proxyproto.NewTLVs(ssl.TLV())
		require.NoError(t, err)
	}
	return cfg
}

// TestTLSAtLBForwardedCertificate: a load balancer that forwards the client
// certificate (PP2_SUBTYPE_SSL_CLIENT_CERT, written here with proxyproto's
// own writer) has it verified again against the gateway's client CA: a
// certificate from the gateway's CA is the identity, one from a CA only the
// load balancer trusts is refused although the load balancer says it
// verified it, and so is a CN sub-TLV that is not the certificate's. A
// certificate whose header passes 4 KiB gets through (the PROXY listener's
// MaxHeaderBytes in this mode).
func TestTLSAtLBForwardedCertificate(t *testing.T) {
	e := startTLSAtLB(t)
	stranger, err := pki.NewCA("a CA only the load balancer trusts")
	require.NoError(t, err)
	der := func(ca *pki.CA, cn string) string {
		c, err := ca.Client(cn)
		require.NoError(t, err)
		return string(c.Certificate[0])
	}
	// A certificate with a long subject: its header passes the 4 KiB a PROXY
	// listener accepts by default (proxyproto.MaxHeaderLen).
	long := func(cn string) string {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn, OrganizationalUnit: []string{strings.Repeat("u", 5000)}},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, e.ca.Cert, &key.PublicKey, e.ca.Key)
		require.NoError(t, err)
		require.Greater(t, len(der), proxyproto.MaxHeaderLen)
		return string(der)
	}
	verified := proxyproto.SSLClientTLS | proxyproto.SSLClientCertConn | proxyproto.SSLClientCertSess
	tests := []struct {
		name    string
		id      string
		version byte
		ssl     proxyproto.SSL
		wantErr string // "" for accepted
	}{
		{"the gateway's CA, MQTT 5", "f1", 5, proxyproto.SSL{Client: verified, Version: "TLSv1.3", CN: "f1", CertDER: der(e.ca, "f1")}, ""},
		{"the gateway's CA, MQTT 3.1.1, no CN sub-TLV", "f2", 4, proxyproto.SSL{Client: verified, Version: "TLSv1.2", CertDER: der(e.ca, "f2")}, ""},
		{"the gateway's CA, a certificate longer than 4 KiB", "f6", 5, proxyproto.SSL{Client: verified, Version: "TLSv1.3", CN: "f6", CertDER: long("f6")}, ""},
		{"a CA only the load balancer trusts", "f3", 5, proxyproto.SSL{Client: verified, Version: "TLSv1.3", CN: "f3", CertDER: der(stranger, "f3")},
			"gateway: no client certificate verified at the load balancer: proxyproto: client certificate does not verify*"},
		{"a CN sub-TLV that is not the certificate's", "f5", 4, proxyproto.SSL{Client: verified, Version: "TLSv1.3", CN: "f5", CertDER: der(e.ca, "f4")},
			"gateway: no client certificate verified at the load balancer: proxyproto: *"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fmt.Sprintf("127.0.0.5%d:5%d00", i, i)
			c, err := device.Connect(t.Context(), e.sslDevice(t, tt.id, tt.version, src, &tt.ssl))
			if tt.wantErr != "" {
				var ce *device.ConnectError
				if assert.ErrorAs(t, err, &ce) {
					assert.EqualValues(t, map[byte]byte{5: 0x87, 4: 5}[tt.version], ce.Code)
				}
				line := e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": tt.id, "outcome": "refused",
					"tls_terminated_by": lbAddr.String(), "lb_tls.identity": "none", "lb_tls.reported.cert": "verified"})
				assert.Regexp(t, "^"+strings.ReplaceAll(regexp.QuoteMeta(tt.wantErr), `\*`, ".*")+"$", line["error"])
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Publish(t.Context(), "telemetry/"+tt.id, 1, device.Reading(tt.id, 1, 1)))
			c.Close()
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": tt.id, "outcome": "accepted",
				"tls_subject": "CN=" + tt.id + "*", "lb_tls.identity": "certificate", "lb_tls.reported.cert_sha256": "*"})
		})
	}
	recs := e.records(t)
	require.Len(t, recs, 3)
	for _, r := range recs {
		assert.Equal(t, "certificate", r.Provenance.TLSIdentity, r.ID)
		assert.Equal(t, lbAddr.String(), r.Provenance.TLSTerminatedBy, r.ID)
	}
}

// TestTLSAtLBForgedSSL: an SSL TLV is believed only from a trusted load
// balancer. A client that writes one itself, claiming a verified
// certificate, is refused by the PROXY listener before anything is read;
// one that connects without a header has no TLS facts and is refused at
// CONNECT; so is a trusted load balancer's header without an SSL TLV.
func TestTLSAtLBForgedSSL(t *testing.T) {
	e := startTLSAtLB(t)
	forged := &proxyproto.SSL{Client: proxyproto.SSLClientTLS | proxyproto.SSLClientCertConn, Version: "TLSv1.3", CN: "victim"}
	for _, v := range []byte{4, 5} {
		// From an untrusted address, with a forged SSL TLV.
		cfg := e.sslDevice(t, "victim", v, "203.0.113.9:1000", forged)
		cfg.Local = netip.MustParseAddr("127.0.0.66")
		cfg.Timeout = 2 * time.Second
		_, err := device.Connect(t.Context(), cfg)
		require.Error(t, err, "MQTT %d: forged SSL TLV from an untrusted peer", v)
		// No CONNACK: the connection is closed before CONNECT (paho 3.1.1
		// reports that as its own code 0xfe, "network error").
		var ce *device.ConnectError
		if errors.As(err, &ce) {
			assert.Equal(t, byte(0xfe), ce.Code, "MQTT %d: %v", v, err)
		}
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "proxy",
			"rejection.reason": "untrusted_header", "rejection.peer": "127.0.0.66:*"})

		// From an untrusted address, without a header.
		cfg.Proxy, cfg.TLVs = 0, proxyproto.TLVs{}
		_, err = device.Connect(t.Context(), cfg)
		if assert.ErrorAs(t, err, &ce, "MQTT %d: direct, plain", v) {
			assert.EqualValues(t, map[byte]byte{5: 0x87, 4: 5}[v], ce.Code)
		}
		// From the load balancer, without an SSL TLV.
		id := fmt.Sprintf("nossl%d", v)
		_, err = device.Connect(t.Context(), e.sslDevice(t, id, v, "127.0.0.67:6700", nil))
		if assert.ErrorAs(t, err, &ce, "MQTT %d: no SSL TLV", v) {
			assert.EqualValues(t, map[byte]byte{5: 0x87, 4: 5}[v], ce.Code)
		}
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": id, "outcome": "refused",
			"error":           "gateway: no client certificate verified at the load balancer: chain: the PROXY header carries no SSL TLV: the load balancer reported no TLS",
			"lb_tls.reported": "none"})
	}
	assert.Equal(t, 2, e.logs.count(map[string]string{"msg": "mqtt connection", "client_id": "victim", "outcome": "refused",
		"clientip.client": "127.0.0.66", "clientip.source": "socket", "proxy_header": "none"}), "the direct clients")
	assert.Zero(t, e.summary(t).Lines)
}
