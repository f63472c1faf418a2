package gateway

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Spoofing trick: someone without meter-1's client certificate writes its
// next (device, seq) first — over HTTP, which does not authenticate devices,
// or over MQTT under meter-1's client id while certificates are optional.
// The genuine reading, sent with the certificate and acknowledged, must still
// be in the sink, and its redelivery must still be recognised (found by the
// project's review, 2026-12-02).
func TestForgedReadingDoesNotSwallowGenuineOne(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.HTTPTrusted = clientip.MustParsePrefixSet("127.0.0.50")
		c.HTTPHeader = "X-Forwarded-For"
	})
	cert, err := e.ca.Client("meter-1")
	require.NoError(t, err)
	genuine := func(t *testing.T, seq uint64) {
		t.Helper()
		cfg := e.device("meter-1", 5, 2, "127.0.0.16:40000")
		cfg.TLS.Certificates = []tls.Certificate{cert}
		c, err := device.Connect(t.Context(), cfg)
		require.NoError(t, err)
		defer c.Close()
		for range 2 { // the second is a redelivery
			require.NoError(t, c.Publish(t.Context(), "telemetry/meter-1", 1, device.Reading("meter-1", seq, 21.5)), "publish")
		}
	}

	// Over HTTP.
	status, body := post(t, httpFrom("127.0.0.61"), "http://"+e.g.HTTPAddr()+"/v1/telemetry", "", `{"device":"meter-1","seq":7,"values":{"temp":-999}}`)
	require.Equal(t, 201, status, "forged POST: %s", body)
	genuine(t, 7)

	// Over MQTT, without the certificate.
	evil, err := device.Connect(t.Context(), e.device("meter-1", 4, 2, "127.0.0.66:40000"))
	require.NoError(t, err, "connect without a certificate")
	require.NoError(t, evil.Publish(t.Context(), "telemetry/meter-1", 1, device.Reading("meter-1", 8, -999)))
	evil.Close()
	genuine(t, 8)

	genuineIn := map[string]int{}
	for _, r := range e.records(t) {
		if r.Provenance.TLSSubject != "" && strings.Contains(string(r.Payload), "21.5") {
			genuineIn[r.ID]++
		}
	}
	assert.Equal(t, map[string]int{"meter-1/7": 1, "meter-1/8": 1}, genuineIn, "genuine readings in the sink, once each")
}
