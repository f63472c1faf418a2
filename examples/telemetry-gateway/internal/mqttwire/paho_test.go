package mqttwire

import (
	"bytes"
	"io"
	"testing"

	paho5 "github.com/eclipse/paho.golang/packets"
	paho3 "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/require"
)

// Cross-checks against the encoders and decoders of real MQTT clients: what paho writes parses here to
// the same fields, and what the Append functions write paho reads back to the fields given.

// encode returns what a paho packet writes.
func encode(t *testing.T, p io.WriterTo) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := p.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// encode3 returns what a paho.mqtt.golang (MQTT 3.1.1) packet writes.
func encode3(t *testing.T, p paho3.ControlPacket) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, p.Write(&buf))
	return buf.Bytes()
}

// splitWhole splits b, which must hold exactly one packet.
func splitWhole(t *testing.T, b []byte) (typ, flags byte, body []byte) {
	t.Helper()
	typ, flags, body, n, err := Split(b, len(b))
	require.NoError(t, err)
	require.Equal(t, len(b), n)
	return typ, flags, body
}

func ptr[T any](v T) *T { return &v }

// MQTT 5 §3.1: a paho.golang CONNECT with properties, will properties, user name and password.
func TestPaho5Connect(t *testing.T) {
	b := encode(t, &paho5.Connect{
		ProtocolName: "MQTT", ProtocolVersion: 5, CleanStart: true, KeepAlive: 30, ClientID: "dev-1",
		UsernameFlag: true, Username: "user", PasswordFlag: true, Password: []byte("pw\x00"),
		WillFlag: true, WillQOS: 1, WillRetain: true, WillTopic: "will/t", WillMessage: []byte("bye"),
		Properties: &paho5.Properties{
			SessionExpiryInterval: ptr(uint32(3600)), ReceiveMaximum: ptr(uint16(16)),
			MaximumPacketSize: ptr(uint32(4096)), TopicAliasMaximum: ptr(uint16(8)),
			RequestProblemInfo: ptr(byte(0)), RequestResponseInfo: ptr(byte(1)),
			User:       []paho5.User{{Key: "k", Value: "v"}, {Key: "k", Value: "w"}},
			AuthMethod: "SCRAM", AuthData: []byte{1, 2},
		},
		WillProperties: &paho5.Properties{
			WillDelayInterval: ptr(uint32(5)), PayloadFormat: ptr(byte(1)), MessageExpiry: ptr(uint32(9)),
			ContentType: "text/plain", ResponseTopic: "r/t", CorrelationData: []byte{7},
			User: []paho5.User{{Key: "a", Value: "b"}},
		},
	})
	typ, _, body := splitWhole(t, b)
	require.Equal(t, CONNECT, typ)
	c, err := ParseConnect(body)
	require.NoError(t, err)
	require.Equal(t, Connect{
		ProtocolName: "MQTT", Version: 5, CleanStart: true, KeepAlive: 30, ClientID: "dev-1",
		Username: []byte("user"), HasUsername: true, Password: []byte("pw\x00"), HasPassword: true,
		Will: true, WillQoS: 1, WillRetain: true, WillTopic: "will/t", WillPayload: []byte("bye"),
		SessionExpiry: 3600, ReceiveMaximum: 16, MaxPacketSize: 4096, TopicAliasMax: 8,
		RequestProblemInfo: false, RequestResponseInfo: true, AuthMethod: "SCRAM",
	}, c)
}

// MQTT 5 §3.3: a paho.golang PUBLISH with properties and a topic alias.
func TestPaho5Publish(t *testing.T) {
	b := encode(t, &paho5.Publish{
		QoS: 1, Retain: true, Duplicate: true, PacketID: 77, Topic: "sensors/t1", Payload: []byte("21.5"),
		Properties: &paho5.Properties{
			PayloadFormat: ptr(byte(1)), MessageExpiry: ptr(uint32(60)), TopicAlias: ptr(uint16(3)),
			ResponseTopic: "resp", CorrelationData: []byte("c"), ContentType: "text/plain",
			User: []paho5.User{{Key: "k", Value: "v"}, {Key: "k2", Value: "v2"}},
		},
	})
	typ, flags, body := splitWhole(t, b)
	require.Equal(t, PUBLISH, typ)
	p, err := ParsePublish(flags, body, true)
	require.NoError(t, err)
	require.Equal(t, Publish{QoS: 1, Dup: true, Retain: true, Topic: []byte("sensors/t1"), PacketID: 77,
		TopicAlias: 3, PayloadFormat: 1, Payload: []byte("21.5")}, p)
}

// MQTT 3.1.1 §3.1, §3.3: paho.mqtt.golang's CONNECT and PUBLISH.
func TestPaho3ConnectPublish(t *testing.T) {
	cp := paho3.NewControlPacket(paho3.Connect).(*paho3.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.CleanSession, cp.Keepalive = "MQTT", 4, true, 60
	cp.ClientIdentifier = "dev-3"
	cp.UsernameFlag, cp.Username, cp.PasswordFlag, cp.Password = true, "u", true, []byte("p")
	cp.WillFlag, cp.WillQos, cp.WillTopic, cp.WillMessage = true, 2, "w", []byte("x")
	typ, _, body := splitWhole(t, encode3(t, cp))
	require.Equal(t, CONNECT, typ)
	c, err := ParseConnect(body)
	require.NoError(t, err)
	require.Equal(t, Connect{ProtocolName: "MQTT", Version: 4, CleanStart: true, KeepAlive: 60,
		ClientID: "dev-3", Username: []byte("u"), HasUsername: true, Password: []byte("p"),
		HasPassword: true, Will: true, WillQoS: 2, WillTopic: "w", WillPayload: []byte("x"),
		RequestProblemInfo: true}, c)

	pp := paho3.NewControlPacket(paho3.Publish).(*paho3.PublishPacket)
	pp.Qos, pp.Retain, pp.TopicName, pp.MessageID, pp.Payload = 2, true, "a/b", 9, []byte("v")
	typ, flags, body := splitWhole(t, encode3(t, pp))
	require.Equal(t, PUBLISH, typ)
	p, err := ParsePublish(flags, body, false)
	require.NoError(t, err)
	require.Equal(t, Publish{QoS: 2, Retain: true, Topic: []byte("a/b"), PacketID: 9, Payload: []byte("v")}, p)
}

// MQTT 5 §3.4: what AppendAck writes paho.golang reads back.
func TestAppendAckPaho5(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   byte
		reason string
		size   int
	}{
		{"success is the 4-byte form §3.4.2.1", Success, "", 4},
		{"code without reason string §3.4.2.2.1", QuotaExceeded, "", 5},
		{"code with reason string", ImplementationSpecificError, "disk full", 5 + 1 + 3 + 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendAck(nil, PUBACK, 513, tc.code, tc.reason, true)
			require.Len(t, b, tc.size)
			cp, err := paho5.ReadPacket(bytes.NewReader(b))
			require.NoError(t, err)
			ack := cp.Content.(*paho5.Puback)
			require.Equal(t, uint16(513), ack.PacketID)
			require.Equal(t, tc.code, ack.ReasonCode)
			require.Equal(t, tc.reason, ack.Properties.ReasonString)
		})
	}
}
