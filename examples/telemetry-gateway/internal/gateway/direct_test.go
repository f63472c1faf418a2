package gateway

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProxyRequired: with RequireProxy, a device that reaches the gateway
// directly, past the load balancer, is refused at CONNECT as not authorized
// (MQTT 5 0x87, 3.1.1 return code 5), while devices behind the load
// balancer are served; without it, the direct device is served as itself (a
// newcomer's finding: there was no way to refuse it but a firewall).
func TestProxyRequired(t *testing.T) {
	for _, required := range []bool{false, true} {
		e := start(t, func(c *Config) { c.RequireProxy = required })
		for _, v := range []byte{5, 4} {
			id := fmt.Sprintf("direct%d-%v", v, required)
			cfg := e.device(id, v, 0, "0.0.0.0:0")
			cfg.Local, cfg.Proxy = netip.MustParseAddr("127.0.0.48"), 0
			c, err := device.Connect(t.Context(), cfg)
			if !required {
				require.NoError(t, err, "MQTT %d direct, not required", v)
				c.Close()
				e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": id, "outcome": "accepted",
					"clientip.client": "127.0.0.48", "clientip.source": "socket", "proxy_header": "none"})
				continue
			}
			var ce *device.ConnectError
			if assert.ErrorAs(t, err, &ce, "MQTT %d direct", v) {
				assert.EqualValues(t, map[byte]byte{5: 0x87, 4: 5}[v], ce.Code, "MQTT %d: not authorized", v)
			}
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": id, "outcome": "refused",
				"decision": "not_allowed", "error": "gateway: the client connected directly, not through a trusted load balancer",
				"clientip.client": "127.0.0.48", "clientip.source": "socket", "proxy_header": "none"})

			id = fmt.Sprintf("behind%d", v)
			c, err = device.Connect(t.Context(), e.device(id, v, 2, "127.0.0.49:4900"))
			require.NoError(t, err, "MQTT %d behind the load balancer", v)
			require.NoError(t, c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 1, 1)))
			c.Close()
		}
	}
}
