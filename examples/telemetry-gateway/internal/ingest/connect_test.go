package ingest_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	paho5 "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

func ptr[T any](v T) *T { return &v }

// MQTT 3.1.1 §3.2.2: an accepted CONNECT gets the four-byte CONNACK, session
// present 0 (no session outlives its connection, [MQTT-3.2.2-1]) and return
// code 0; Established follows.
func TestConnack311(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[tlsOn], func(t *testing.T) {
			h := newRecorder()
			var opts []option
			if tlsOn {
				opts = append(opts, withTLS())
			}
			hs := serve(t, h, opts...)
			rc := hs.dialRaw(t)
			c, ack := rc.connect(h, connect4("dev-1", true, 30))
			assert.Equal(t, []byte{mqttwire.CONNACK << 4, 2, 0, 0}, ack.raw)
			assert.Equal(t, "dev-1", c.ID)
			assert.Equal(t, byte(4), c.Version)
			assert.Equal(t, "test", c.Listener)
		})
	}
}

// MQTT 5 §3.2.2.3 through a real client (paho.golang): Maximum QoS absent
// (2 applies, §3.2.2.3.4), Retain Available 0 (§3.2.2.3.5), the configured
// Receive Maximum, Maximum Packet Size and Topic Alias Maximum, session
// present 0, and for an empty client id an Assigned Client Identifier
// [MQTT-3.2.2-16] under which Established sees the client.
func TestConnack5Properties(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withTLS(), withConfig(func(c *ingest.Config) {
		c.ReceiveMaximum, c.MaxPacketSize, c.TopicAliasMaximum = 7, 9000, 3
	}))
	rc := hs.dialRaw(t)
	cl := paho.NewClient(paho.ClientConfig{Conn: paho5.NewThreadSafeConn(rc.conn)})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ack, err := cl.Connect(ctx, &paho.Connect{CleanStart: true, KeepAlive: 30})
	require.NoError(t, err)
	defer cl.Disconnect(&paho.Disconnect{})
	require.Equal(t, byte(0), ack.ReasonCode)
	assert.False(t, ack.SessionPresent)
	p := ack.Properties
	require.NotNil(t, p)
	assert.Nil(t, p.MaximumQoS, "Maximum QoS must be absent: QoS 2 is supported")
	assert.False(t, p.RetainAvailable, "Retain Available must be 0")
	require.NotNil(t, p.ReceiveMaximum)
	assert.Equal(t, uint16(7), *p.ReceiveMaximum)
	require.NotNil(t, p.MaximumPacketSize)
	assert.Equal(t, uint32(9000), *p.MaximumPacketSize)
	require.NotNil(t, p.TopicAliasMaximum)
	assert.Equal(t, uint16(3), *p.TopicAliasMaximum)
	assert.False(t, p.WildcardSubAvailable)
	assert.False(t, p.SharedSubAvailable)
	assert.False(t, p.SubIDAvailable)
	require.NotEmpty(t, p.AssignedClientID)
	c := h.nextEstablished(t)
	assert.Equal(t, p.AssignedClientID, c.ID)
	assert.True(t, c.V5())
}

// MQTT 5 §3.2.2.3.2: a client that asks for a session expiry gets Session
// Expiry Interval 0 back (no session outlives its connection).
func TestConnack5SessionExpiry(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	_, p := rc.connect(h, connect5(t, &paho5.Connect{ClientID: "s", Properties: &paho5.Properties{SessionExpiryInterval: ptr(uint32(3600))}}))
	ack := connack5(t, p)
	require.NotNil(t, ack.Properties.SessionExpiryInterval)
	assert.Equal(t, uint32(0), *ack.Properties.SessionExpiryInterval)
}

// refused checks that the server answers pkt with a CONNACK carrying code
// (the whole packet: raw), closes the connection and never calls
// Established.
func refused(t *testing.T, h *recorder, hs *harness, pkt []byte, check func(p packet)) {
	t.Helper()
	rc := hs.dialRaw(t)
	rc.send(pkt)
	got := rc.expectClosed()
	require.Len(t, got, 1, "one CONNACK, then the close")
	require.Equal(t, mqttwire.CONNACK, got[0].typ)
	check(got[0])
	assert.Empty(t, h.established, "Established for a refused CONNECT")
	require.Eventually(t, func() bool { return hs.returned.Load() == hs.accepted.Load() }, wait, tick)
	assert.Equal(t, int64(0), hs.srv.Stats().Parked.Load())
}

// [MQTT-3.1.3-8]: an MQTT 3.1.1 client with a zero-byte client id and
// CleanSession 0 gets return code 2 (identifier rejected) and the close.
func TestConnect311EmptyIDWithoutCleanSession(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	refused(t, h, hs, connect4("", false, 0), func(p packet) {
		assert.Equal(t, []byte{mqttwire.CONNACK << 4, 2, 0, mqttwire.ConnRefusedIdentifier}, p.raw)
	})
	assert.Equal(t, uint64(1), hs.srv.Stats().Refused.Load())
}

// [MQTT-3.1.3-6]: an MQTT 3.1.1 client with a zero-byte client id and
// CleanSession 1 is accepted, under an id the server assigns.
func TestConnect311EmptyIDCleanSession(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	c, _ := rc.connect(h, connect4("", true, 0))
	assert.NotEmpty(t, c.ID)
}

// MQTT 5 §4.12: there is no enhanced authentication here; a CONNECT with an
// Authentication Method gets CONNACK 0x8C (Bad authentication method)
// [MQTT-4.12.0-1].
func TestConnect5AuthMethod(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	refused(t, h, hs, connect5(t, &paho5.Connect{ClientID: "a", CleanStart: true, Properties: &paho5.Properties{AuthMethod: "SCRAM-SHA-1"}}), func(p packet) {
		assert.Equal(t, mqttwire.BadAuthenticationMethod, connack5(t, p).ReasonCode)
	})
}

// [MQTT-3.2.2-13] with the CONNACK's Retain Available 0: an MQTT 5 CONNECT
// with Will Retain 1 gets CONNACK 0x9A (Retain not supported).
func TestConnect5WillRetain(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	refused(t, h, hs, connect5(t, &paho5.Connect{ClientID: "w", CleanStart: true, WillFlag: true, WillRetain: true, WillTopic: "t", WillMessage: []byte("bye"), WillProperties: &paho5.Properties{}}), func(p packet) {
		assert.Equal(t, mqttwire.RetainNotSupported, connack5(t, p).ReasonCode)
	})
}

// MQTT 5 §3.2.2.2 / MQTT 3.1.1 §3.2.2.3: the handler's refusal reaches the
// client as its reason code (MQTT 5, with the reason string when the client
// asked for problem information) or as the MQTT 3.1.1 return code for it.
func TestConnectRefusedByHandler(t *testing.T) {
	h := newRecorder()
	h.connectCode, h.connectReason = mqttwire.NotAuthorized, "not on the list"
	hs := serve(t, h)
	refused(t, h, hs, connect5(t, &paho5.Connect{ClientID: "r", CleanStart: true}), func(p packet) {
		ack := connack5(t, p)
		assert.Equal(t, mqttwire.NotAuthorized, ack.ReasonCode)
		assert.Equal(t, "not on the list", ack.Properties.ReasonString)
	})
	refused(t, h, hs, connect5(t, &paho5.Connect{ClientID: "r", CleanStart: true, Properties: &paho5.Properties{RequestProblemInfo: ptr(byte(0))}}), func(p packet) {
		assert.Empty(t, connack5(t, p).Properties.ReasonString, "[MQTT-3.1.2-29]: no reason string when Request Problem Information is 0")
	})
	refused(t, h, hs, connect4("r", true, 0), func(p packet) {
		assert.Equal(t, []byte{mqttwire.CONNACK << 4, 2, 0, mqttwire.ConnRefusedNotAuthorized}, p.raw)
	})
}

// MQTT 3.1.1 §3.1.2.2 / MQTT 5 §3.1.2.2: an unsupported protocol level gets
// return code 1 in MQTT 3.1.1's four-byte CONNACK [MQTT-3.1.2-2].
func TestConnectUnsupportedVersion(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	pkt := connect4("v", true, 0)
	pkt[8] = 3 // protocol level 3 under the name "MQTT"
	rc := hs.dialRaw(t)
	rc.send(pkt)
	got := rc.expectClosed()
	require.Len(t, got, 1)
	assert.Equal(t, []byte{mqttwire.CONNACK << 4, 2, 0, mqttwire.ConnRefusedProtocolVersion}, got[0].raw)
	assert.Empty(t, h.established)
}

// [MQTT-3.1.2-25]: the server sends nothing larger than the client's
// Maximum Packet Size; when that is the CONNACK itself, the connection
// closes without CONNACK and is never established.
func TestConnackLargerThanClientMaximum(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	rc.send(connect5(t, &paho5.Connect{ClientID: "m", CleanStart: true, Properties: &paho5.Properties{MaximumPacketSize: ptr(uint32(8))}}))
	assert.Empty(t, rc.expectClosed(), "nothing may reach the client")
	assert.Empty(t, h.established)
	require.Eventually(t, func() bool { return hs.returned.Load() == 1 }, wait, tick)
}

// [MQTT-3.1.0-1]: the first packet must be CONNECT; anything else closes the
// connection without an answer.
func TestFirstPacketNotConnect(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	rc.send(mqttwire.AppendPingresp(nil)[:1], []byte{0}) // a PINGRESP, from the client
	assert.Empty(t, rc.expectClosed())
	assert.Empty(t, h.established)
}

// [MQTT-3.1.0-2]: a second CONNECT is a protocol violation: MQTT 5 clients
// get DISCONNECT 0x82, MQTT 3.1.1 clients the close; Disconnected hears it.
func TestSecondConnect(t *testing.T) {
	for _, v := range []byte{4, 5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			h := newRecorder()
			hs := serve(t, h)
			rc, c := hs.dialConnected(t, v, "twice")
			if v == 5 {
				rc.send(connect5(t, &paho5.Connect{ClientID: "twice", CleanStart: true}))
				rc.expectDisconnect(mqttwire.ProtocolError)
			} else {
				rc.send(connect4("twice", true, 0))
				assert.Empty(t, rc.expectClosed())
			}
			h.expectEnded(t, c, mqttwire.ProtocolError)
			assert.Equal(t, uint64(1), hs.srv.Stats().Protocol.Load())
		})
	}
}

// New refuses a Config without a Handler.
func TestNewRequiresHandler(t *testing.T) {
	_, err := ingest.New(ingest.Config{})
	require.Error(t, err)
}

var _ net.Conn = (*splitConn)(nil)
