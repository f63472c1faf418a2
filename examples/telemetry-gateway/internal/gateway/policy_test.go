package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/proxyproto"
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
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 1, 1)); err != nil {
			t.Fatal(err)
		}
		err = c.Publish(t.Context(), "telemetry/"+id, 1, []byte(`{"device":"`+id+`","seq":2,"values":{"temp":`))
		var pe *device.PublishError
		switch v {
		case 5:
			if !errors.As(err, &pe) || pe.Code != 0x99 {
				t.Errorf("MQTT 5: %v, want PUBACK 0x99", err)
			}
		case 4:
			if !errors.Is(err, device.ErrNoAck) {
				t.Errorf("MQTT 3.1.1: %v, want no acknowledgement", err)
			}
		}
		// A reading for another device is refused too.
		err = c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading("someone-else", 1, 1))
		if v == 5 && (!errors.As(err, &pe) || pe.Code != 0x87) {
			t.Errorf("MQTT 5 foreign device: %v, want PUBACK 0x87", err)
		}
		if err := c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 3, 1)); err != nil && v == 5 {
			t.Fatal(err)
		}
		c.Close()
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "client_id": id, "outcome": "invalid",
			"error": "reading: payload is not valid JSON*", "client": "127.0.0.41"})
	}
	sum := e.summary(t)
	if sum.Invalid != 0 || sum.Torn || sum.Count["bad3/2"] != 0 || sum.Count["bad5/2"] != 0 || sum.Count["bad5/1"] != 1 || sum.Count["bad5/3"] != 1 {
		t.Errorf("sink: %+v", sum)
	}
}

// TestRateLimit: a device over its rate is slowed down, and refused with
// PUBACK 0x97 (quota exceeded) when it would have to wait too long.
func TestRateLimit(t *testing.T) {
	e := start(t, func(c *Config) { c.RateLimit, c.RateBurst, c.RateMaxWait = 20, 2, 60*time.Millisecond })
	c, err := device.Connect(t.Context(), e.device("fast", 5, 2, "127.0.0.42:4200"))
	if err != nil {
		t.Fatal(err)
	}
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
			t.Fatal(err)
		}
	}
	// 2 from the burst, then one every 50ms, each wait under 60ms: all pass
	// when published one at a time.
	if ok != 10 || time.Since(start) < 300*time.Millisecond {
		t.Errorf("sequential: %d accepted, %d refused in %v; want all accepted, slowed to 20/s", ok, refused, time.Since(start))
	}
	// mochi handles one connection's packets one at a time, so a single
	// connection is only ever slowed down. Five devices behind the same
	// address (one NAT) share the bucket: their waits add up past 60ms and
	// some readings are refused.
	errs := make(chan error, 50)
	for d := range 5 {
		id := fmt.Sprintf("nat%d", d)
		nc, err := device.Connect(t.Context(), e.device(id, 5, 2, fmt.Sprintf("127.0.0.42:%d", 5000+d)))
		if err != nil {
			t.Fatal(err)
		}
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
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused == 0 {
		t.Error("five devices sharing one address at 20/s with a 60ms wait limit: nothing refused")
	}
	t.Logf("shared address: %d of 50 refused", refused)
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt reading refused", "outcome": "rate_limited", "client": "127.0.0.42"})
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
			if !errors.As(err, &ce) || ce.Code != 0x87 {
				t.Errorf("with allowlist: %v, want CONNACK 0x87", err)
			}
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "outcome": "refused", "decision": "masqueraded", "clientip.masqueraded": "true"})
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "CLIENTS ARE MASQUERADED*", "node": node.String()})
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Publish(t.Context(), "telemetry/behind-node", 1, device.Reading("behind-node", 1, 1)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "outcome": "accepted", "clientip.masqueraded": "true",
			"clientip.client": node.String(), "decision": "masqueraded", "level": "WARN"})
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "CLIENTS ARE MASQUERADED*", "node": node.String(), "level": "WARN"})
		if recs := e.records(t); len(recs) != 1 || !recs[0].Provenance.Masqueraded {
			t.Errorf("records %+v", recs)
		}
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
			return tc, nil
		},
		ClientConfig: paho.ClientConfig{ClientID: "auto5"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.AwaitConnection(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.Publish(ctx, &paho.Publish{Topic: "telemetry/auto5", QoS: 1, Payload: device.Reading("auto5", 1, 21.5)}); err != nil {
		t.Fatal(err)
	}
	cm.Disconnect(ctx)
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "auto5", "clientip.client": "127.0.0.43",
		"clientip.source": "proxy-protocol", "clientip.peer": "127.0.0.200:*", "mqtt_version": "5"})
	if s := e.summary(t); s.Count["auto5/1"] != 1 {
		t.Errorf("sink %+v", s)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 1, 1)); err != nil {
			t.Fatal(err)
		}
		e.g.Sink().Close() // every later append fails, as after a write or fsync error
		if err := e.g.Ready(); err == nil {
			t.Error("ready with a failed sink")
		}
		if err := c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, 2, 1)); !errors.Is(err, device.ErrNoAck) {
			t.Errorf("MQTT %d: publish after the sink failed: %v, want no acknowledgement", v, err)
		}
		select {
		case <-c.Lost():
		case <-time.After(3 * time.Second):
			t.Errorf("MQTT %d: device not disconnected", v)
		}
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "sink append failed", "client_id": id, "id": id + "/2"})
		if s := e.summary(t); s.Unique != 1 || s.Count[id+"/1"] != 1 {
			t.Errorf("sink %+v", s)
		}
	}
}

// TestCertificateBindsClientID: a device that presents a client certificate
// may only use its common name as client id (and so as device name).
func TestCertificateBindsClientID(t *testing.T) {
	e := start(t, nil)
	cert, err := e.ca.Client("meter-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.device("meter-2", 5, 2, "127.0.0.47:4700")
	cfg.TLS.Certificates = []tls.Certificate{cert}
	_, err = device.Connect(t.Context(), cfg)
	var ce *device.ConnectError
	if !errors.As(err, &ce) || ce.Code != 0x87 {
		t.Errorf("client id other than the certificate's CN: %v, want CONNACK 0x87", err)
	}
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "meter-2", "outcome": "refused",
		"tls_subject": "CN=meter-1", "error": "client id \"meter-2\" is not the client certificate's common name \"meter-1\""})
	cfg.ID = "meter-1"
	c, err := device.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
