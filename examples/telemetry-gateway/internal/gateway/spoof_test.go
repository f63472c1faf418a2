package gateway

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
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
	if err != nil {
		t.Fatal(err)
	}
	genuine := func(t *testing.T, seq uint64) {
		t.Helper()
		cfg := e.device("meter-1", 5, 2, "127.0.0.16:40000")
		cfg.TLS.Certificates = []tls.Certificate{cert}
		c, err := device.Connect(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 2 { // the second is a redelivery
			if err := c.Publish(t.Context(), "telemetry/meter-1", 1, device.Reading("meter-1", seq, 21.5)); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}

	// Over HTTP.
	if status, body := post(t, httpFrom("127.0.0.61"), "http://"+e.g.HTTPAddr()+"/v1/telemetry", "", `{"device":"meter-1","seq":7,"values":{"temp":-999}}`); status != 201 {
		t.Fatalf("forged POST: %d %s", status, body)
	}
	genuine(t, 7)

	// Over MQTT, without the certificate.
	evil, err := device.Connect(t.Context(), e.device("meter-1", 4, 2, "127.0.0.66:40000"))
	if err != nil {
		t.Fatalf("connect without a certificate: %v", err)
	}
	if err := evil.Publish(t.Context(), "telemetry/meter-1", 1, device.Reading("meter-1", 8, -999)); err != nil {
		t.Fatal(err)
	}
	evil.Close()
	genuine(t, 8)

	genuineIn := map[string]int{}
	for _, r := range e.records(t) {
		if r.Provenance.TLSSubject != "" && strings.Contains(string(r.Payload), "21.5") {
			genuineIn[r.ID]++
		}
	}
	if genuineIn["meter-1/7"] != 1 || genuineIn["meter-1/8"] != 1 {
		t.Errorf("genuine readings in the sink: %v; want meter-1/7 and meter-1/8 once each", genuineIn)
	}
}
