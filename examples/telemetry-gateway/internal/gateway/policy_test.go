package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadReadingsNeverReachTheSink: MQTT 5 gets PUBACK 0x99 (payload format
// invalid) for a reading that is not valid JSON, MQTT 3.1.1 gets no
// acknowledgement at all; neither reaches the sink, and valid readings
// around them do.
func TestBadReadingsNeverReachTheSink(t *testing.T) {
	e := start(t, nil)
	for _, v := range []byte{4, 5} {
		id := map[byte]string{4: "bad3", 5: "bad5"}[v]
		cfg := e.device(id, v, 2, "127.0.0.41:4100")
		cfg.Timeout = 500 * time.Millisecond
		c, err := device.Connect(t.Context(), cfg)
		require.NoError(t, err)
		require.NoError(t, c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 1, 1)))
		err = c.Publish(t.Context(), "telemetry/"+id, 1, []byte(`{"device":"`+id+`","seq":2,"values":{"temp":`))
		var pe *device.PublishError
		switch v {
		case 5:
			if assert.ErrorAs(t, err, &pe, "MQTT 5") {
				assert.EqualValues(t, 0x99, pe.Code, "MQTT 5: PUBACK payload format invalid")
			}
		case 4:
			assert.ErrorIs(t, err, device.ErrNoAck, "MQTT 3.1.1: no acknowledgement")
		}
		// A reading for another device is refused too.
		err = c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading("someone-else", 1, 1))
		if v == 5 && assert.ErrorAs(t, err, &pe, "MQTT 5 foreign device") {
			assert.EqualValues(t, 0x87, pe.Code, "MQTT 5 foreign device: PUBACK not authorized")
		}
		if err := c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 3, 1)); v == 5 {
			require.NoError(t, err)
		}
		c.Close()
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "client_id": id, "outcome": "invalid",
			"error": "reading: payload is not valid JSON*", "clientip.client": "127.0.0.41"})
	}
	sum := e.summary(t)
	assert.Zero(t, sum.Invalid)
	assert.False(t, sum.Torn)
	for id, n := range map[string]int{"bad3/2": 0, "bad5/2": 0, "bad5/1": 1, "bad5/3": 1} {
		assert.Equal(t, n, sum.Count[id], "records of %s", id)
	}
}

// TestLongTopicIsStored: a topic may take most of a packet, and json escapes
// each '<' in it as six bytes. With a small MaxPayload its record was longer
// than the sink's line limit, which was sized by the payload alone: the
// reading was logged as a sink failure and the device disconnected with
// "server unavailable", every time it sent it again.
func TestLongTopicIsStored(t *testing.T) {
	e := start(t, func(c *Config) { c.MaxPayload = 1024 })
	c, err := device.Connect(t.Context(), e.device("long5", 5, 2, "127.0.0.41:4100"))
	require.NoError(t, err)
	defer c.Close()
	topic := "telemetry/" + strings.Repeat("<", 60000)
	require.NoError(t, c.Publish(t.Context(), topic, 1, device.Reading("long5", 1, 1)))
	recs := e.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, topic, recs[0].Topic)
}

// TestReadingTooLargeToStoreIsRefused: a reading whose record the store
// cannot hold (here a sink with a short MaxLineBytes; a JetStream store
// refuses what is over the servers' max_payload) is refused with PUBACK 0x83
// and the connection goes on. It was taken for a failed store: logged as
// one, and the device disconnected with "server unavailable", so that it
// sent the reading again for ever.
func TestReadingTooLargeToStoreIsRefused(t *testing.T) {
	e := start(t, func(c *Config) { c.Sink.MaxLineBytes = 1024 })
	c, err := device.Connect(t.Context(), e.device("big5", 5, 2, "127.0.0.41:4100"))
	require.NoError(t, err)
	defer c.Close()
	err = c.Publish(t.Context(), "telemetry/big5", 1, []byte(`{"device":"big5","seq":1,"pad":"`+strings.Repeat("x", 2000)+`"}`))
	var pe *device.PublishError
	require.ErrorAs(t, err, &pe)
	assert.EqualValues(t, 0x83, pe.Code, "PUBACK implementation specific error")
	require.NoError(t, c.Publish(t.Context(), "telemetry/big5", 1, device.Reading("big5", 2, 1)), "the connection goes on")
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "client_id": "big5", "outcome": "invalid",
		"error": "sink: record longer than MaxLineBytes*"})
	require.NoError(t, e.g.Ready())
	sum := e.summary(t)
	assert.Equal(t, 0, sum.Count["big5/1"])
	assert.Equal(t, 1, sum.Count["big5/2"])
}

// TestRateLimit: a device over its rate is slowed down, and refused with
// PUBACK 0x97 (quota exceeded) when it would have to wait too long.
func TestRateLimit(t *testing.T) {
	e := start(t, func(c *Config) { c.RateLimit, c.RateBurst, c.RateMaxWait = 20, 2, 60*time.Millisecond })
	c, err := device.Connect(t.Context(), e.device("fast", 5, 2, "127.0.0.42:4200"))
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	var refused, ok int
	for seq := range 10 {
		err := c.Publish(t.Context(), "telemetry/fast", 1, device.Reading("fast", uint64(seq), 1))
		var pe *device.PublishError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &pe) && pe.Code == 0x97:
			refused++
		default:
			require.NoError(t, err)
		}
	}
	// 2 from the burst, then one every 50ms, each wait under 60ms: all pass
	// when published one at a time.
	assert.Equal(t, 10, ok, "sequential: all accepted (%d refused)", refused)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "sequential: slowed to 20/s")
	// The MQTT server hands Publish one connection's packets one at a time
	// on its reading goroutine, which sleeps out a reading's delay before it
	// reads the next, so a single connection is only ever slowed down. Five
	// devices behind the same address (one NAT) share the bucket: their
	// waits add up past 60ms and some readings are refused.
	errs := make(chan error, 50)
	for d := range 5 {
		id := fmt.Sprintf("nat%d", d)
		nc, err := device.Connect(t.Context(), e.device(id, 5, 2, fmt.Sprintf("127.0.0.42:%d", 5000+d)))
		require.NoError(t, err)
		defer nc.Close()
		go func() {
			for seq := range 10 {
				errs <- nc.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, uint64(seq), 1))
			}
		}()
	}
	refused = 0
	for range 50 {
		var pe *device.PublishError
		if err := <-errs; errors.As(err, &pe) && pe.Code == 0x97 {
			refused++
		} else {
			require.NoError(t, err)
		}
	}
	assert.NotZero(t, refused, "five devices sharing one address at 20/s with a 60ms wait limit: something refused")
	t.Logf("shared address: %d of 50 refused", refused)
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "outcome": "rate_limited", "clientip.client": "127.0.0.42"})
}

// TestMasqueraded: under externalTrafficPolicy: Cluster the node's address
// replaces the client's. The gateway says so loudly, still serves the device
// without an allowlist, and refuses it with one.
func TestMasqueraded(t *testing.T) {
	node := netip.MustParseAddr("127.0.0.150")
	for _, allow := range []bool{false, true} {
		e := start(t, func(c *Config) {
			c.ProxyTrusted = clientip.PrefixSet{}
			c.Masquerade = clientip.MustParsePrefixSet(node.String())
			if allow {
				c.Allow = clientip.MustParsePrefixSet("127.0.0.0/8")
			}
		})
		cfg := e.device("behind-node", 5, 0, "0.0.0.0:0")
		cfg.Local, cfg.Proxy = node, 0
		c, err := device.Connect(t.Context(), cfg)
		if allow {
			var ce *device.ConnectError
			if assert.ErrorAs(t, err, &ce, "with allowlist") {
				assert.EqualValues(t, 0x87, ce.Code, "with allowlist: CONNACK not authorized")
			}
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "outcome": "refused", "decision": "masqueraded", "clientip.masqueraded": "true"})
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "CLIENTS ARE MASQUERADED*", "node": node.String()})
			continue
		}
		require.NoError(t, err)
		require.NoError(t, c.Publish(t.Context(), "telemetry/behind-node", 1, device.Reading("behind-node", 1, 1)))
		c.Close()
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "outcome": "accepted", "clientip.masqueraded": "true",
			"clientip.client": node.String(), "decision": "masqueraded", "level": "WARN"})
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "CLIENTS ARE MASQUERADED*", "node": node.String(), "level": "WARN"})
		recs := e.records(t)
		require.Len(t, recs, 1)
		assert.True(t, recs[0].Provenance.Masqueraded)
	}
}

// TestAutopaho connects eclipse/paho.golang's autopaho (MQTT 5) with an
// AttemptConnection that writes the PROXY header, as a load balancer would.
func TestAutopaho(t *testing.T) {
	e := start(t, nil)
	u, _ := url.Parse("mqtts://" + e.g.MQTTAddr())
	tlsCfg := &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, TlsCfg: tlsCfg, KeepAlive: 20, ConnectTimeout: 5 * time.Second,
		CleanStartOnInitialConnection: true,
		AttemptConnection: func(ctx context.Context, cc autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: lbAddr.AsSlice()}}
			c, err := proxyproto.DialContext(ctx, d, "tcp", u.Host, proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy,
				Source: netip.MustParseAddrPort("127.0.0.43:4300")})
			if err != nil {
				return nil, err
			}
			tc := tls.Client(c, cc.TlsCfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, err
			}
			// paho.golang's pinger writes its first PINGREQ at once, on its own
			// goroutine; without the lock it can land between the buffers of
			// a PUBLISH (eclipse-paho/paho.golang#81), and the gateway rightly
			// refuses the garbled packet ("topic name truncated").
			return packets.NewThreadSafeConn(tc), nil
		},
		ClientConfig: paho.ClientConfig{ClientID: "auto5"},
	})
	require.NoError(t, err)
	require.NoError(t, cm.AwaitConnection(ctx))
	_, err = cm.Publish(ctx, &paho.Publish{Topic: "telemetry/auto5", QoS: 1, Payload: device.Reading("auto5", 1, 21.5)})
	require.NoError(t, err)
	cm.Disconnect(ctx)
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "auto5", "clientip.client": "127.0.0.43",
		"clientip.source": "proxy-protocol", "clientip.peer": "127.0.0.200:*", "mqtt_version": "5"})
	assert.Equal(t, 1, e.summary(t).Count["auto5/1"])
}

// TestSinkFailureIsNeverAcknowledged: once the sink cannot take a reading,
// the device gets no acknowledgement and is disconnected (MQTT 5: "server
// unavailable") so that it keeps the reading and sends it again, and
// readiness fails so that the load balancer drains the gateway.
func TestSinkFailureIsNeverAcknowledged(t *testing.T) {
	for _, v := range []byte{4, 5} {
		e := start(t, nil)
		id := fmt.Sprintf("sf%d", v)
		c, err := device.Connect(t.Context(), e.device(id, v, 2, "127.0.0.46:4600"))
		require.NoError(t, err)
		require.NoError(t, c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 1, 1)))
		e.g.Sink().Close() // every later append fails, as after a write or fsync error
		assert.Error(t, e.g.Ready(), "ready with a failed sink")
		err = c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 2, 1))
		assert.ErrorIs(t, err, device.ErrNoAck, "MQTT %d: publish after the sink failed", v)
		select {
		case <-c.Lost():
		case <-time.After(3 * time.Second):
			assert.Fail(t, "device not disconnected", "MQTT %d", v)
		}
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "sink append failed", "client_id": id, "id": id + "/2"})
		s := e.summary(t)
		assert.Equal(t, 1, s.Unique)
		assert.Equal(t, 1, s.Count[id+"/1"])
	}
}

// TestCertificateBindsClientID: a device that presents a client certificate
// may only use its common name as client id (and so as device name).
func TestCertificateBindsClientID(t *testing.T) {
	e := start(t, nil)
	cert, err := e.ca.Client("meter-1")
	require.NoError(t, err)
	cfg := e.device("meter-2", 5, 2, "127.0.0.47:4700")
	cfg.TLS.Certificates = []tls.Certificate{cert}
	_, err = device.Connect(t.Context(), cfg)
	var ce *device.ConnectError
	if assert.ErrorAs(t, err, &ce, "client id other than the certificate's CN") {
		assert.EqualValues(t, 0x87, ce.Code, "CONNACK not authorized")
	}
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "meter-2", "outcome": "refused",
		"tls_subject": "CN=meter-1", "error": "client id \"meter-2\" is not the client certificate's common name \"meter-1\""})
	cfg.ID = "meter-1"
	c, err := device.Connect(t.Context(), cfg)
	require.NoError(t, err)
	c.Close()
}

// TestTopicPolicy: with a topic policy, each PUBLISH is judged by the first
// rule whose filter covers its topic, for the client the connection
// resolved to: a refused reading gets PUBACK 0x87 (MQTT 5), or ends the
// connection (MQTT 3.1.1), never reaches the sink, and is logged with its
// rule; an admitted one is stored.
func TestTopicPolicy(t *testing.T) {
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetTopics,
		Rules: []middleware.Rule{
			{Name: "secret", Target: "telemetry/secret/#", Allow: clientip.MustParsePrefixSet("127.0.0.40/30")},
			{Name: "fleet", Target: "telemetry/#", Allow: clientip.MustParsePrefixSet("127.0.0.0/24"), Deny: clientip.MustParsePrefixSet("127.0.0.66")},
		},
	})
	require.NoError(t, err)
	e := start(t, func(c *Config) { c.TopicPolicy = policy })
	tests := []struct {
		name, id, src, topic string
		version              byte
		refused              bool
		rule                 string
	}{
		{"secret topic from its range", "s1", "127.0.0.41:4400", "telemetry/secret/s1", 5, false, "secret"},
		{"secret topic from elsewhere in the fleet", "s2", "127.0.0.50:4400", "telemetry/secret/s2", 5, true, "secret"},
		{"fleet topic", "f1", "127.0.0.50:4401", "telemetry/f1", 5, false, "fleet"},
		{"fleet topic from its deny list", "f2", "127.0.0.66:4400", "telemetry/f2", 5, true, "fleet"},
		{"MQTT 3.1.1 refused: the connection ends", "f3", "127.0.0.66:4401", "telemetry/f3", 4, true, "fleet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.device(tc.id, tc.version, 2, tc.src)
			cfg.Timeout = time.Second
			c, err := device.Connect(t.Context(), cfg)
			require.NoError(t, err)
			defer c.Close()
			err = c.Publish(t.Context(), tc.topic, 1, device.Reading(tc.id, 1, 1))
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var pe *device.PublishError
			if tc.version == 5 && assert.ErrorAs(t, err, &pe) {
				assert.EqualValues(t, 0x87, pe.Code, "PUBACK not authorized")
			}
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "outcome": "forbidden_topic", "client_id": tc.id,
				"rule": tc.rule, "topic": tc.topic, "clientip.client": netip.MustParseAddrPort(tc.src).Addr().String()})
		})
	}
	sum := e.summary(t)
	for id, n := range map[string]int{"s1/1": 1, "f1/1": 1, "s2/1": 0, "f2/1": 0, "f3/1": 0} {
		assert.Equal(t, n, sum.Count[id], "records of %s", id)
	}
}

// A policy of another kind is refused at New.
func TestTopicPolicyKind(t *testing.T) {
	names, err := middleware.NewPolicy(middleware.PolicyConfig{Targets: middleware.TargetNames})
	require.NoError(t, err)
	cfg := Config{MQTTAddr: "127.0.0.1:0", TLS: &tls.Config{}, Sink: sink.Config{Path: filepath.Join(t.TempDir(), "s")}, TopicPolicy: names}
	_, err = New(cfg)
	assert.ErrorContains(t, err, "TopicPolicy judges names")
}
