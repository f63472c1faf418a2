package gateway

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHAProxyMosquitto: Debian's mosquitto_pub over TLS through a real
// HAProxy 2.6 that connects to the gateway from 127.0.0.200 with
// send-proxy-v2. The gateway must log the device's own 127.x address as the
// client, HAProxy's as the socket peer, and refuse the device outside the
// allowlist with "not authorised".
func TestHAProxyMosquitto(t *testing.T) {
	mosq := e2e.Require(t, "mosquitto_pub")[0]
	e := start(t, func(c *Config) { c.Allow = clientip.MustParsePrefixSet("127.0.0.0/26") })
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, e.ca.PEM(), 0o644))
	front := startHAProxy(t, e.g.MQTTAddr())

	tests := []struct {
		id, from, version string
		refused           bool
	}{
		{"mosq-311", "127.0.0.31", "mqttv311", false},
		{"mosq-5", "127.0.0.32", "mqttv5", false},
		{"mosq-far", "127.0.0.99", "mqttv5", true},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, port, _ := net.SplitHostPort(front)
			out, err := exec.CommandContext(ctx, mosq, "-h", "127.0.0.1", "-p", port, "--cafile", caFile, "-A", tt.from,
				"-V", tt.version, "-i", tt.id, "-t", "telemetry/"+tt.id, "-q", "1", "-d",
				"-m", fmt.Sprintf(`{"device":%q,"seq":1,"values":{"temp":20.5}}`, tt.id)).CombinedOutput()
			if tt.refused {
				assert.Error(t, err, "mosquitto_pub from %s:\n%s", tt.from, out)
				assert.Contains(t, strings.ToLower(string(out)), "not authori", "mosquitto_pub from %s", tt.from)
			} else {
				require.NoError(t, err, "mosquitto_pub:\n%s", out)
				require.Contains(t, string(out), "received PUBACK", "mosquitto_pub")
			}
			want := map[string]string{
				"msg": "mqtt connection", "client_id": tt.id, "clientip.client": tt.from, "clientip.source": "proxy-protocol",
				"clientip.peer": "127.0.0.200:*", "proxy_header": "v2 proxy", "clientip.proxy": tt.from + ":*", "proxy_destination": front,
				"tls_sni": "127.0.0.1", // libmosquitto sends the IP literal as SNI
				"outcome": map[bool]string{false: "accepted", true: "refused"}[tt.refused],
			}
			if tt.refused {
				want["connack"] = "0x87"
			}
			e.logs.wait(t, 5*time.Second, want)
		})
	}
	s := e.summary(t)
	assert.Equal(t, 2, s.Unique, "sink %+v", s)
	assert.Equal(t, 1, s.Count["mosq-311/1"], "sink %+v", s)
	assert.Equal(t, 1, s.Count["mosq-5/1"], "sink %+v", s)
}

// haproxyDefaults begins the tests' HAProxy configurations: TCP mode, one
// thread.
const haproxyDefaults = `global
    nbthread 1
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s`

// startHAProxy runs HAProxy in front of backend, connecting to it from
// 127.0.0.200 with send-proxy-v2, and returns its frontend address; it is
// stopped when the test ends.
func startHAProxy(t *testing.T, backend string) string {
	t.Helper()
	port := e2e.StartHAProxy(t, 1, func(p []int) string {
		return fmt.Sprintf(haproxyDefaults+`
frontend mqtts
    bind 127.0.0.1:%d
    default_backend gateway
backend gateway
    source 127.0.0.200
    server gw1 %s send-proxy-v2
`, p[0], backend)
	})[0]
	return fmt.Sprintf("127.0.0.1:%d", port)
}
