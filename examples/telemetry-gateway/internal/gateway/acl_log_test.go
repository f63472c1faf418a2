package gateway

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestForbiddenTopicIsOneLine: a publish outside the topic prefix is logged
// as one line with every layer and the reason, over MQTT 5 and 3.1.1, and
// nothing else (a newcomer's finding, when the gateway ran on mochi-mqtt:
// MQTT 5 refused it with nothing in the log, MQTT 3.1.1 got the broker's own
// WARN line dumping the whole packet). The MQTT server's own lines pass at
// Debug here, as they would with -mqtt-log-level debug, and there are none:
// the refusal is the gateway's, not a protocol error the server ends the
// connection for.
func TestForbiddenTopicIsOneLine(t *testing.T) {
	e := start(t, func(c *Config) { c.MQTTLogLevel = slog.LevelDebug })
	for _, v := range []byte{5, 4} {
		id := fmt.Sprintf("acl%d", v)
		cfg := e.device(id, v, 2, fmt.Sprintf("127.0.0.4%d:4%d00", v, v))
		cfg.Timeout = time.Second
		c, err := device.Connect(t.Context(), cfg)
		require.NoError(t, err)
		err = c.Publish(t.Context(), "elsewhere/"+id, 1, device.Reading(id, 1, 1))
		switch v {
		case 5:
			var pe *device.PublishError
			if assert.ErrorAs(t, err, &pe, "MQTT 5") {
				assert.EqualValues(t, 0x87, pe.Code, "MQTT 5: PUBACK not authorized")
			}
		case 4:
			assert.ErrorIs(t, err, device.ErrNoAck, "MQTT 3.1.1: no acknowledgement")
			select {
			case <-c.Lost():
			case <-time.After(3 * time.Second):
				assert.Fail(t, "MQTT 3.1.1: not disconnected")
			}
		}
		c.Close()
		from := fmt.Sprintf("127.0.0.4%d", v)
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "level": "WARN", "outcome": "forbidden_topic",
			"client_id": id, "mqtt_version": fmt.Sprint(v), "topic": "elsewhere/" + id,
			"error":           `topic "elsewhere/` + id + `" is outside the topic prefix "telemetry/"`,
			"clientip.client": from, "clientip.source": "proxy-protocol", "clientip.peer": lbAddr.String() + ":*",
			"clientip.proxy": from + ":4*", "proxy_header": "v2 proxy", "tls_sni": "gateway.test", "tls_version": "TLS 1.3"})
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt disconnected", "client_id": id})
		assert.Equal(t, 1, e.logs.count(map[string]string{"client_id": id, "level": "WARN"})+e.logs.count(map[string]string{"client": id, "level": "WARN"}),
			"MQTT %d: one WARN line about the device", v)
	}
	assert.Zero(t, e.logs.count(map[string]string{"component": "mqtt"}), "the MQTT server's own lines")
	assert.Zero(t, e.logs.count(map[string]string{"level": "ERROR"}))
	assert.Zero(t, e.summary(t).Lines, "nothing in the sink")
}

// TestQoS2RefusalIsPubrec: an MQTT 5 QoS 2 PUBLISH the gateway refuses is
// answered with PUBREC and the reason code (MQTT 5 §3.5), which ends the
// exchange, never with a PUBACK, which belongs to QoS 1 (the MQTT server
// writes the PUBREC with the code the gateway's Publish returns): a forbidden
// topic (0x87) and a reading that is not valid JSON (0x99).
func TestQoS2RefusalIsPubrec(t *testing.T) {
	e := start(t, nil)
	cfg := e.device("q2", 5, 2, "127.0.0.45:4500")
	cfg.Timeout = 2 * time.Second
	c, err := device.Connect(t.Context(), cfg)
	require.NoError(t, err)
	defer c.Close()
	for _, tc := range []struct {
		topic   string
		payload []byte
		code    byte
	}{
		{"elsewhere/q2", device.Reading("q2", 1, 1), 0x87},
		{"telemetry/q2", []byte("not json"), 0x99},
	} {
		var pe *device.PublishError
		if assert.ErrorAs(t, c.Publish(t.Context(), tc.topic, 2, tc.payload), &pe, tc.topic) {
			assert.EqualValues(t, tc.code, pe.Code, tc.topic)
		}
	}
	require.NoError(t, c.Publish(t.Context(), "telemetry/q2", 2, device.Reading("q2", 2, 1)), "the connection still serves QoS 2")
	assert.Equal(t, 1, e.summary(t).Lines)
}
