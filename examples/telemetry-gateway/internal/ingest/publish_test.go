package ingest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// MQTT 3.1.1 §4.3 through a real client (paho.mqtt.golang over TLS): QoS 0,
// 1 and 2 PUBLISHes reach Handler.Publish with their topic, payload and QoS;
// each QoS 1 and 2 token completes (PUBACK from the handler; PUBREC, PUBREL,
// PUBCOMP from the server); DISCONNECT ends with Disconnected(nil).
func TestPublishPahoMQTT311(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withTLS())
	opts := pahov3.NewClientOptions().AddBroker("tls://" + hs.addr).SetTLSConfig(hs.clientTLS).
		SetClientID("p3").SetProtocolVersion(4).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(30 * time.Second).
		SetConnectTimeout(wait).SetWriteTimeout(wait)
	cl := pahov3.NewClient(opts)
	tok := cl.Connect()
	require.True(t, tok.WaitTimeout(wait))
	require.NoError(t, tok.Error())
	c := h.nextEstablished(t)
	for qos := byte(0); qos <= 2; qos++ {
		topic, payload := fmt.Sprintf("sensors/q%d", qos), fmt.Sprintf(`{"qos":%d}`, qos)
		tok := cl.Publish(topic, qos, false, payload)
		require.True(t, tok.WaitTimeout(wait), "QoS %d not acknowledged", qos)
		require.NoError(t, tok.Error())
		p := h.nextPublish(t)
		assert.Same(t, c, p.client)
		assert.Equal(t, topic, p.topic)
		assert.Equal(t, payload, p.payload)
		assert.Equal(t, qos, p.qos)
	}
	cl.Disconnect(100)
	e := h.nextDisconnected(t)
	assert.Same(t, c, e.client)
	assert.NoError(t, e.err)
}

// MQTT 5 §4.3 through a real client (paho.golang over TCP): QoS 0, 1 and 2
// reach Handler.Publish and QoS 1 and 2 complete with reason code 0.
func TestPublishPahoMQTT5(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	cl := paho.NewClient(paho.ClientConfig{Conn: paho5.NewThreadSafeConn(rc.conn)})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := cl.Connect(ctx, &paho.Connect{ClientID: "p5", CleanStart: true, KeepAlive: 30})
	require.NoError(t, err)
	c := h.nextEstablished(t)
	for qos := byte(0); qos <= 2; qos++ {
		topic, payload := fmt.Sprintf("sensors/q%d", qos), fmt.Sprintf(`{"qos":%d}`, qos)
		resp, err := cl.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Payload: []byte(payload)})
		require.NoError(t, err, "QoS %d", qos)
		if qos > 0 {
			require.NotNil(t, resp)
			assert.Equal(t, byte(0), resp.ReasonCode)
		}
		p := h.nextPublish(t)
		assert.Same(t, c, p.client)
		assert.Equal(t, topic, p.topic)
		assert.Equal(t, payload, p.payload)
		assert.Equal(t, qos, p.qos)
	}
	require.NoError(t, cl.Disconnect(&paho.Disconnect{}))
	e := h.nextDisconnected(t)
	assert.NoError(t, e.err)
}

// versions runs f for an MQTT 3.1.1 and an MQTT 5 raw client.
func versions(t *testing.T, f func(t *testing.T, v byte, v5 bool)) {
	for _, v := range []byte{4, 5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { f(t, v, v == 5) })
	}
}

// MQTT 3.1.1 §4.3.3 / MQTT 5 §4.3.3: QoS 2 method B. PUBLISH gets PUBREC and
// reaches the handler once; the same PUBLISH again (DUP) before PUBREL gets
// PUBREC again and no second Publish call [MQTT-4.3.3-2] (3.1.1) /
// [MQTT-4.3.3-9] (5); PUBREL gets PUBCOMP [MQTT-4.3.3-11]; after it the
// packet identifier is free for a new message.
func TestQoS2Exchange(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "q2")
		pubrec := mqttwire.AppendAck(nil, mqttwire.PUBREC, 9, 0, "", v5)
		rc.send(publishPkt(v5, 2, 9, "t/2", "first"))
		assert.Equal(t, pubrec, rc.read().raw)
		p := h.nextPublish(t)
		assert.Equal(t, "t/2", p.topic)
		assert.Equal(t, "first", p.payload)
		assert.Equal(t, uint16(9), p.id)

		rc.send(publishFlags(v5, 0x08|2<<1, 9, "t/2", "first")) // DUP
		assert.Equal(t, pubrec, rc.read().raw)
		rc.send(pubrel(v5, 9))
		assert.Equal(t, mqttwire.AppendAck(nil, mqttwire.PUBCOMP, 9, 0, "", v5), rc.read().raw)
		h.noPublish(t)

		rc.send(publishPkt(v5, 2, 9, "t/2", "second"))
		assert.Equal(t, pubrec, rc.read().raw)
		assert.Equal(t, "second", h.nextPublish(t).payload)
	})
}

// MQTT 5 §4.3.3 / §3.7.2.1: a PUBREL for a packet identifier with no QoS 2
// exchange gets PUBCOMP 0x92 (Packet Identifier not found); MQTT 3.1.1 has
// no such code: the plain PUBCOMP.
func TestPubrelUnknown(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "rel")
		rc.send(pubrel(v5, 77))
		want := []byte{mqttwire.PUBCOMP << 4, 2, 0, 77}
		if v5 {
			want = []byte{mqttwire.PUBCOMP << 4, 3, 0, 77, mqttwire.PacketIdentifierNotFound}
		}
		assert.Equal(t, want, rc.read().raw)
	})
}

// MQTT 5 §3.3.4: more unfinished QoS 2 exchanges than the Receive Maximum
// the CONNACK announced end the connection with DISCONNECT 0x93.
//
// An MQTT 3.1.1 client has no receive maximum, but each open QoS 2 exchange
// is state the server keeps: it is held to the server's, and the connection
// ends beyond it.
func TestQoS2ReceiveMaximum(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h, withConfig(func(c *ingest.Config) { c.ReceiveMaximum = 2 }))
		rc, _ := hs.dialConnected(t, v, "rm")
		for id := uint16(1); id <= 2; id++ {
			rc.send(publishPkt(v5, 2, id, "t", "x"))
			assert.Equal(t, mqttwire.PUBREC, rc.read().typ)
		}
		rc.send(publishPkt(v5, 2, 3, "t", "x"))
		if v5 {
			rc.expectDisconnect(mqttwire.ReceiveMaximumExceeded)
		} else {
			assert.Empty(t, rc.expectClosed())
		}
	})
}

// holder is a recorder that holds every QoS 1 PUBLISH unacknowledged and
// says so (Client.SetUnacknowledged), as a handler waiting for its store
// does.
type holder struct {
	*recorder
	held atomic.Int32
}

func (h *holder) Publish(c *ingest.Client, pk *mqttwire.Publish) (byte, string, bool) {
	if pk.QoS != 1 {
		return h.recorder.Publish(c, pk)
	}
	h.publishes <- published{client: c, topic: string(pk.Topic), payload: string(pk.Payload), qos: pk.QoS, id: pk.PacketID}
	c.SetUnacknowledged(int(h.held.Add(1)))
	return 0, "", false
}

// MQTT 5 §3.3.4: the receive maximum bounds QoS 1 and QoS 2 PUBLISHes
// together: with one QoS 1 PUBLISH that the handler holds and one open QoS 2
// exchange, a second QoS 2 PUBLISH exceeds a receive maximum of 2 (DISCONNECT
// 0x93). An MQTT 3.1.1 client has no receive maximum: only its open QoS 2
// exchanges count, so the same PUBLISH gets its PUBREC.
func TestReceiveMaximumCountsQoS1AndQoS2(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := &holder{recorder: newRecorder()}
		hs := serve(t, h, withConfig(func(c *ingest.Config) { c.ReceiveMaximum = 2 }))
		rc, _ := hs.dialConnected(t, v, "rm12")
		rc.send(publishPkt(v5, 1, 1, "t", "held"))
		assert.Equal(t, "held", h.nextPublish(t).payload)
		rc.send(publishPkt(v5, 2, 2, "t", "x"))
		assert.Equal(t, mqttwire.PUBREC, rc.read().typ, "one held and one open: within 2")
		rc.send(publishPkt(v5, 2, 3, "t", "x"))
		if v5 {
			rc.expectDisconnect(mqttwire.ReceiveMaximumExceeded)
		} else {
			assert.Equal(t, mqttwire.PUBREC, rc.read().typ, "MQTT 3.1.1: two open QoS 2 exchanges, within 2")
		}
	})
}

// MQTT 5 §3.3.2.3.4: a Topic Alias set with a topic stands for it in later
// PUBLISHes without one (the handler sees the topic), and may be set again.
func TestTopicAlias(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc, _ := hs.dialConnected(t, 5, "alias")
	steps := []struct{ topic, want string }{{"a/b", "a/b"}, {"", "a/b"}, {"c/d", "c/d"}, {"", "c/d"}}
	for _, s := range steps {
		rc.send(publishPkt(true, 0, 0, s.topic, "v", aliasProp(2)...))
		assert.Equal(t, s.want, h.nextPublish(t).topic)
	}
}

// MQTT 5 §3.3.2.3.4: the refusals of topic aliases. Above the Topic Alias
// Maximum (and 0) is DISCONNECT 0x94 [MQTT-3.3.2-8] [MQTT-3.3.2-9]; an alias
// never set, used without a topic, is a Protocol Error (0x82).
func TestTopicAliasRefused(t *testing.T) {
	cases := []struct {
		name  string
		max   uint16
		pkt   []byte
		code  byte
		first []byte // sent before pkt
	}{
		{name: "above maximum", max: 4, pkt: publishPkt(true, 0, 0, "t", "v", aliasProp(5)...), code: mqttwire.TopicAliasInvalid},
		{name: "none allowed", max: 0, pkt: publishPkt(true, 0, 0, "t", "v", aliasProp(1)...), code: mqttwire.TopicAliasInvalid},
		{name: "zero", max: 4, pkt: publishPkt(true, 0, 0, "t", "v", aliasProp(0)...), code: mqttwire.TopicAliasInvalid},
		{name: "unknown", max: 4, pkt: publishPkt(true, 0, 0, "", "v", aliasProp(3)...), code: mqttwire.ProtocolError,
			first: publishPkt(true, 0, 0, "set", "v", aliasProp(2)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRecorder()
			hs := serve(t, h, withConfig(func(c *ingest.Config) { c.TopicAliasMaximum = tc.max }))
			rc, c := hs.dialConnected(t, 5, "alias")
			if tc.first != nil {
				rc.send(tc.first)
				h.nextPublish(t)
			}
			rc.send(tc.pkt)
			rc.expectDisconnect(tc.code)
			h.noPublish(t)
			h.expectEnded(t, c, tc.code)
		})
	}
}

// MQTT 5 §3.3.2.3.4 with the largest Topic Alias Maximum the property can
// carry (65,535): every alias up to it works.
func TestTopicAliasMaximum65535(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withConfig(func(c *ingest.Config) { c.TopicAliasMaximum = 65535 }))
	rc, _ := hs.dialConnected(t, 5, "alias")
	rc.send(publishPkt(true, 0, 0, "top", "v", aliasProp(65535)...))
	assert.Equal(t, "top", h.nextPublish(t).topic)
	rc.send(publishPkt(true, 0, 0, "", "v", aliasProp(65535)...))
	assert.Equal(t, "top", h.nextPublish(t).topic)
}

// MQTT 5 §3.3.1.3: with Retain Available 0 in the CONNACK, a retained
// PUBLISH gets DISCONNECT 0x9A [MQTT-3.2.2-14] and is not handled. MQTT
// 3.1.1 has no way to refuse it: it is handled with its retain flag.
func TestRetainedPublish(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "ret")
		rc.send(publishFlags(v5, 0x01, 0, "t", "r"))
		if v5 {
			rc.expectDisconnect(mqttwire.RetainNotSupported)
			h.noPublish(t)
			return
		}
		assert.Equal(t, "r", h.nextPublish(t).payload)
	})
}

// Ingest only: every subscription is refused, with a code for each filter
// in their order (MQTT 3.1.1 [MQTT-3.8.4-5]; MQTT 5 [MQTT-3.8.4-6]
// [MQTT-3.9.3-1]): 0x87 (Not authorized) in MQTT 5, 0x80 (Failure) in MQTT
// 3.1.1 (§3.9.3); the connection goes on.
func TestSubscribeRefused(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "sub")
		body := []byte{0, 42}
		if v5 {
			body = append(body, 0)
		}
		body = append(appendStr(body, "a/#"), 1)
		body = append(appendStr(body, "b"), 0)
		rc.send(frame(mqttwire.SUBSCRIBE<<4|0x02, body))
		want := []byte{mqttwire.SUBACK << 4, 4, 0, 42, 0x80, 0x80}
		if v5 {
			want = []byte{mqttwire.SUBACK << 4, 5, 0, 42, 0, mqttwire.NotAuthorized, mqttwire.NotAuthorized}
		}
		assert.Equal(t, want, rc.read().raw)
		rc.send(publishPkt(v5, 0, 0, "still", "open"))
		assert.Equal(t, "open", h.nextPublish(t).payload)
	})
}

// MQTT 5 §3.8 through paho.golang: Subscribe returns reason code 0x87.
func TestSubscribePahoMQTT5(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	cl := paho.NewClient(paho.ClientConfig{Conn: paho5.NewThreadSafeConn(rc.conn)})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := cl.Connect(ctx, &paho.Connect{ClientID: "s5", CleanStart: true})
	require.NoError(t, err)
	defer cl.Disconnect(&paho.Disconnect{})
	ack, err := cl.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "x/y", QoS: 1}}})
	require.NotNil(t, ack, "err %v", err)
	assert.Equal(t, []byte{mqttwire.NotAuthorized}, ack.Reasons)
}

// [MQTT-3.10.4-5]: UNSUBSCRIBE gets UNSUBACK even when nothing matched; in
// MQTT 5 with 0x11 (No subscription existed) for each filter (§3.11.3).
func TestUnsubscribe(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "unsub")
		body := []byte{1, 2}
		if v5 {
			body = append(body, 0)
		}
		body = appendStr(appendStr(body, "a"), "b/+")
		rc.send(frame(mqttwire.UNSUBSCRIBE<<4|0x02, body))
		want := []byte{mqttwire.UNSUBACK << 4, 2, 1, 2}
		if v5 {
			want = []byte{mqttwire.UNSUBACK << 4, 5, 1, 2, 0, mqttwire.NoSubscriptionExisted, mqttwire.NoSubscriptionExisted}
		}
		assert.Equal(t, want, rc.read().raw)
	})
}

// [MQTT-3.12.4-1]: PINGREQ gets PINGRESP.
func TestPing(t *testing.T) {
	versions(t, func(t *testing.T, v byte, _ bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "ping")
		for range 3 {
			rc.send([]byte{mqttwire.PINGREQ << 4, 0})
			assert.Equal(t, []byte{mqttwire.PINGRESP << 4, 0}, rc.read().raw)
		}
	})
}

// MQTT 5 §3.1.2.11.4 (the server's Maximum Packet Size) / MQTT 3.1.1 §4.8:
// a packet larger than Config.MaxPacketSize ends the connection, with
// DISCONNECT 0x95 (Packet too large) for MQTT 5, before the packet is read
// whole or handled; a packet within it, larger than the read buffer, is
// handled.
func TestPacketTooLarge(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h, withConfig(func(c *ingest.Config) { c.MaxPacketSize = 20000 }))
		rc, c := hs.dialConnected(t, v, "big")
		fits := strings.Repeat("x", 19000)
		rc.send(publishPkt(v5, 1, 1, "t", fits))
		assert.Equal(t, mqttwire.PUBACK, rc.read().typ)
		assert.Equal(t, fits, h.nextPublish(t).payload)

		pkt := publishPkt(v5, 0, 0, "t", strings.Repeat("y", 20000))
		rc.send(pkt[:64]) // the header announces it: no need to send the rest
		if v5 {
			rc.expectDisconnect(mqttwire.PacketTooLarge)
		} else {
			assert.Empty(t, rc.expectClosed())
		}
		h.noPublish(t)
		h.expectEnded(t, c, mqttwire.PacketTooLarge)
	})
}

// MQTT 5 §4.13 / MQTT 3.1.1 §4.8: a malformed packet ends the connection,
// with DISCONNECT 0x81 (Malformed Packet) for MQTT 5: QoS 3 [MQTT-3.3.1-4],
// a topic length beyond the packet, a Remaining Length of five bytes
// (§2.2.3), reserved flags of PUBREL wrong [MQTT-2.2.2-2].
func TestMalformed(t *testing.T) {
	bad := map[string]func(v5 bool) []byte{
		"qos 3":            func(v5 bool) []byte { return publishFlags(v5, 0x06, 1, "t", "x") },
		"topic too long":   func(bool) []byte { return []byte{mqttwire.PUBLISH << 4, 3, 0, 9, 'a'} },
		"length 5 bytes":   func(bool) []byte { return []byte{mqttwire.PUBLISH << 4, 0x80, 0x80, 0x80, 0x80, 0x01} },
		"pubrel flags":     func(bool) []byte { return []byte{mqttwire.PUBREL << 4, 2, 0, 1} },
		"reserved type 0":  func(bool) []byte { return []byte{0, 0} },
		"pingreq with len": func(bool) []byte { return []byte{mqttwire.PINGREQ << 4, 1, 0} },
	}
	for name, pkt := range bad {
		t.Run(name, func(t *testing.T) {
			versions(t, func(t *testing.T, v byte, v5 bool) {
				h := newRecorder()
				hs := serve(t, h)
				rc, _ := hs.dialConnected(t, v, "bad")
				rc.send(pkt(v5))
				got := rc.expectClosed()
				if v5 {
					require.NotEmpty(t, got)
					last := got[len(got)-1]
					require.Equal(t, mqttwire.DISCONNECT, last.typ)
					assert.Contains(t, []byte{mqttwire.MalformedPacket, mqttwire.ProtocolError}, last.body[0],
						"reason code 0x%02x", last.body[0])
				} else {
					assert.Empty(t, got)
				}
				h.noPublish(t)
				h.nextDisconnected(t)
				assert.Equal(t, uint64(1), hs.srv.Stats().Protocol.Load())
			})
		})
	}
}

// MQTT 5 §4.13.1: a malformed PUBLISH gets exactly 0x81.
func TestMalformedPublishCode(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc, _ := hs.dialConnected(t, 5, "bad")
	rc.send(publishFlags(true, 0x06, 1, "t", "x"))
	rc.expectDisconnect(mqttwire.MalformedPacket)
}

// MQTT 5 §4.12: AUTH outside enhanced authentication is a Protocol Error
// (0x82).
func TestAuthPacket(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc, _ := hs.dialConnected(t, 5, "auth")
	rc.send([]byte{mqttwire.AUTH << 4, 0})
	rc.expectDisconnect(mqttwire.ProtocolError)
}

// [MQTT-3.14.4-1] / MQTT 3.1.1 §3.14.4: the client's DISCONNECT ends the
// connection: Disconnected(nil), once. PUBACK, PUBREC and PUBCOMP from the
// client before it are ignored (the server sends no PUBLISH).
func TestClientDisconnect(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, c := hs.dialConnected(t, v, "bye")
		rc.send(mqttwire.AppendAck(nil, mqttwire.PUBACK, 1, 0, "", v5), mqttwire.AppendAck(nil, mqttwire.PUBREC, 2, 0, "", v5),
			mqttwire.AppendAck(nil, mqttwire.PUBCOMP, 3, 0, "", v5), []byte{mqttwire.DISCONNECT << 4, 0})
		assert.Empty(t, rc.expectClosed())
		e := h.nextDisconnected(t)
		assert.Same(t, c, e.client)
		assert.NoError(t, e.err)
		assert.True(t, c.Closed())
		assert.Equal(t, 1, h.endCount(c))
		assert.Equal(t, ingest.ErrClosed, c.Write([]byte{0}))
	})
}

// MQTT 5 §3.14.2.2.2: with no Session Expiry Interval in CONNECT (0), a
// DISCONNECT that sets one above 0 is a Protocol Error, not a valid
// DISCONNECT: the server answers DISCONNECT 0x82 and Disconnected hears
// it. A client whose CONNECT set one may change it on DISCONNECT (the
// server keeps no session either way).
func TestDisconnectSessionExpiryAfterZero(t *testing.T) {
	disconnect := func(expiry uint32) []byte {
		return encode5(t, &paho5.Disconnect{Properties: &paho5.Properties{SessionExpiryInterval: &expiry}})
	}
	h := newRecorder()
	hs := serve(t, h)
	rc, c := hs.dialConnected(t, 5, "zero")
	rc.send(disconnect(60))
	rc.expectDisconnect(mqttwire.ProtocolError)
	h.expectEnded(t, c, mqttwire.ProtocolError)

	rc = hs.dialRaw(t)
	c, _ = rc.connect(h, connect5(t, &paho5.Connect{ClientID: "ten", CleanStart: true, Properties: &paho5.Properties{SessionExpiryInterval: ptr(uint32(10))}}))
	rc.send(disconnect(60))
	assert.Empty(t, rc.expectClosed())
	e := h.nextDisconnected(t)
	assert.Same(t, c, e.client)
	assert.NoError(t, e.err)
}

// ender is a recorder that ends the connection from Publish when the topic
// is "end", as a handler does for a client beyond the receive maximum or a
// reading it cannot store.
type ender struct{ *recorder }

func (h ender) Publish(c *ingest.Client, pk *mqttwire.Publish) (byte, string, bool) {
	if string(pk.Topic) == "end" {
		h.publishes <- published{client: c, topic: string(pk.Topic)}
		c.Disconnect(mqttwire.QuotaExceeded, "")
		return 0, "", false
	}
	return h.recorder.Publish(c, pk)
}

// MQTT 5 [MQTT-3.14.4-2] and MQTT 3.1.1 §4.8: a connection the server has
// ended is closed; the packets after the one whose handling ended it are
// not handled, even when they came in the same read.
func TestNothingAfterHandlerEnds(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := ender{newRecorder()}
		hs := serve(t, h)
		rc, c := hs.dialConnected(t, v, "ended")
		rc.send(append(publishPkt(v5, 0, 0, "end", "x"), publishPkt(v5, 0, 0, "late", "x")...))
		assert.Equal(t, "end", h.nextPublish(t).topic)
		if v5 {
			rc.expectDisconnect(mqttwire.QuotaExceeded)
		} else {
			assert.Empty(t, rc.expectClosed())
		}
		h.expectEnded(t, c, mqttwire.QuotaExceeded)
		h.noPublish(t)
	})
}

// [MQTT-3.14.4-1]: nothing after DISCONNECT is handled, even when it came
// in the same read.
func TestNothingAfterDisconnect(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		rc, _ := hs.dialConnected(t, v, "bye")
		rc.send(append([]byte{mqttwire.DISCONNECT << 4, 0}, publishPkt(v5, 0, 0, "late", "x")...))
		rc.expectClosed()
		h.nextDisconnected(t)
		h.noPublish(t)
	})
}

// [MQTT-3.1.4-3]: a second connection with a client id in use takes it
// over: the first is disconnected (MQTT 5: DISCONNECT 0x8E, Session taken
// over), Disconnected is called once for it, and the second goes on.
func TestSessionTakeover(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		hs := serve(t, h)
		old, oldC := hs.dialConnected(t, v, "same")
		cur, curC := hs.dialConnected(t, v, "same")
		if v5 {
			old.expectDisconnect(mqttwire.SessionTakenOver)
		} else {
			assert.Empty(t, old.expectClosed())
		}
		h.expectEnded(t, oldC, mqttwire.SessionTakenOver)
		cur.send(publishPkt(v5, 0, 0, "t", "after"))
		p := h.nextPublish(t)
		assert.Same(t, curC, p.client)
		assert.Equal(t, 1, h.endCount(oldC))
		assert.Equal(t, 0, h.endCount(curC))
		var ids []*ingest.Client
		hs.srv.Clients(func(c *ingest.Client) bool { ids = append(ids, c); return true })
		assert.Equal(t, []*ingest.Client{curC}, ids)
	})
}
