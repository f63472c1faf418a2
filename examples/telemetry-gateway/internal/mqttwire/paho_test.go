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

// MQTT 5 §3.8, §3.10, §3.14: paho.golang's SUBSCRIBE, UNSUBSCRIBE and DISCONNECT.
func TestPaho5SubscribeUnsubscribeDisconnect(t *testing.T) {
	typ, flags, body := splitWhole(t, encode(t, &paho5.Subscribe{PacketID: 11,
		Properties: &paho5.Properties{SubscriptionIdentifier: ptr(300), User: []paho5.User{{Key: "k", Value: "v"}}},
		Subscriptions: []paho5.SubOptions{
			{Topic: "a/+", QoS: 1, NoLocal: true, RetainAsPublished: true, RetainHandling: 2},
			{Topic: "b/#", QoS: 2}, {Topic: "c", QoS: 0},
		}}))
	require.Equal(t, SUBSCRIBE, typ)
	id, n, err := ParseSubscribe(flags, body, true)
	require.NoError(t, err)
	require.Equal(t, uint16(11), id)
	require.Equal(t, 3, n)

	typ, flags, body = splitWhole(t, encode(t, &paho5.Unsubscribe{PacketID: 12, Topics: []string{"a/+", "b"},
		Properties: &paho5.Properties{User: []paho5.User{{Key: "k", Value: "v"}}}}))
	require.Equal(t, UNSUBSCRIBE, typ)
	id, n, err = ParseUnsubscribe(flags, body, true)
	require.NoError(t, err)
	require.Equal(t, uint16(12), id)
	require.Equal(t, 2, n)

	for _, d := range []*paho5.Disconnect{
		{ReasonCode: 0, Properties: &paho5.Properties{}},
		{ReasonCode: 0x04, Properties: &paho5.Properties{SessionExpiryInterval: ptr(uint32(90)), ReasonString: "bye",
			User: []paho5.User{{Key: "k", Value: "v"}}}},
	} {
		typ, _, body = splitWhole(t, encode(t, d))
		require.Equal(t, DISCONNECT, typ)
		rc, expiry, has, err := ParseDisconnect(body, true)
		require.NoError(t, err)
		require.Equal(t, d.ReasonCode, rc)
		require.Equal(t, d.Properties.SessionExpiryInterval != nil, has)
		if has {
			require.Equal(t, *d.Properties.SessionExpiryInterval, expiry)
		}
	}

	typ, flags, body = splitWhole(t, encode(t, &paho5.Pubrel{PacketID: 13, ReasonCode: 0x92,
		Properties: &paho5.Properties{ReasonString: "unknown id"}}))
	require.Equal(t, PUBREL, typ)
	id, rc, err := ParsePubrel(flags, body, true)
	require.NoError(t, err)
	require.Equal(t, uint16(13), id)
	require.Equal(t, PacketIdentifierNotFound, rc)
}

// MQTT 3.1.1 §3.6, §3.8, §3.10, §3.14: paho.mqtt.golang's PUBREL, SUBSCRIBE, UNSUBSCRIBE, DISCONNECT.
func TestPaho3ControlPackets(t *testing.T) {
	rel := paho3.NewControlPacket(paho3.Pubrel).(*paho3.PubrelPacket)
	rel.MessageID = 21
	typ, flags, body := splitWhole(t, encode3(t, rel))
	require.Equal(t, PUBREL, typ)
	id, rc, err := ParsePubrel(flags, body, false)
	require.NoError(t, err)
	require.Equal(t, uint16(21), id)
	require.Zero(t, rc)

	sub := paho3.NewControlPacket(paho3.Subscribe).(*paho3.SubscribePacket)
	sub.MessageID, sub.Topics, sub.Qoss = 22, []string{"a/#", "b/+/c"}, []byte{1, 2}
	typ, flags, body = splitWhole(t, encode3(t, sub))
	require.Equal(t, SUBSCRIBE, typ)
	id, n, err := ParseSubscribe(flags, body, false)
	require.NoError(t, err)
	require.Equal(t, uint16(22), id)
	require.Equal(t, 2, n)

	unsub := paho3.NewControlPacket(paho3.Unsubscribe).(*paho3.UnsubscribePacket)
	unsub.MessageID, unsub.Topics = 23, []string{"a/#"}
	typ, flags, body = splitWhole(t, encode3(t, unsub))
	require.Equal(t, UNSUBSCRIBE, typ)
	id, n, err = ParseUnsubscribe(flags, body, false)
	require.NoError(t, err)
	require.Equal(t, uint16(23), id)
	require.Equal(t, 1, n)

	typ, _, body = splitWhole(t, encode3(t, paho3.NewControlPacket(paho3.Disconnect)))
	require.Equal(t, DISCONNECT, typ)
	_, _, _, err = ParseDisconnect(body, false)
	require.NoError(t, err)

	typ, _, _ = splitWhole(t, encode3(t, paho3.NewControlPacket(paho3.Pingreq)))
	require.Equal(t, PINGREQ, typ)
}

// read5 decodes one MQTT 5 packet with paho.golang; the whole of b must be that packet.
func read5(t *testing.T, b []byte) *paho5.ControlPacket {
	t.Helper()
	r := bytes.NewReader(b)
	cp, err := paho5.ReadPacket(r)
	require.NoError(t, err)
	require.Zero(t, r.Len(), "bytes after the packet")
	return cp
}

// read3 decodes one MQTT 3.1.1 packet with paho.mqtt.golang; the whole of b must be that packet.
func read3(t *testing.T, b []byte) paho3.ControlPacket {
	t.Helper()
	r := bytes.NewReader(b)
	cp, err := paho3.ReadPacket(r)
	require.NoError(t, err)
	require.Zero(t, r.Len(), "bytes after the packet")
	return cp
}

// MQTT 5 §3.2: AppendConnack's properties as paho.golang reads them.
func TestAppendConnackPaho5(t *testing.T) {
	props := &ConnackProps{ReceiveMaximum: 32, MaxPacketSize: 65536, TopicAliasMax: 10, MaximumQoS: 1,
		RetainUnavailable: true, NoWildcardSubs: true, NoSubscriptionIDs: true, NoSharedSubs: true,
		AssignedClientID: "auto-1", SessionExpiry: 0, HasSessionExpiry: true, ServerKeepAlive: 30,
		HasServerKeepAlive: true, ReasonString: "welcome"}
	ack := read5(t, AppendConnack(nil, true, true, Success, props)).Content.(*paho5.Connack)
	require.True(t, ack.SessionPresent)
	require.Equal(t, Success, ack.ReasonCode)
	require.Equal(t, &paho5.Properties{
		ReceiveMaximum: ptr(uint16(32)), MaximumPacketSize: ptr(uint32(65536)), TopicAliasMaximum: ptr(uint16(10)),
		MaximumQOS: ptr(byte(1)), RetainAvailable: ptr(byte(0)), WildcardSubAvailable: ptr(byte(0)),
		SubIDAvailable: ptr(byte(0)), SharedSubAvailable: ptr(byte(0)), AssignedClientID: "auto-1",
		SessionExpiryInterval: ptr(uint32(0)), ServerKeepAlive: ptr(uint16(30)), ReasonString: "welcome",
	}, ack.Properties)

	// nil props: no properties at all; MaximumQoS 2 is the default and omitted.
	for _, p := range []*ConnackProps{nil, {MaximumQoS: 2}} {
		b := AppendConnack(nil, true, false, NotAuthorized, p)
		require.Equal(t, []byte{0x20, 3, 0, NotAuthorized, 0}, b)
		ack = read5(t, b).Content.(*paho5.Connack)
		require.Equal(t, NotAuthorized, ack.ReasonCode)
		require.Nil(t, ack.Properties.MaximumQOS)
	}
	// The zero ConnackProps sends Maximum QoS 0, as documented.
	ack = read5(t, AppendConnack(nil, true, false, Success, &ConnackProps{})).Content.(*paho5.Connack)
	require.Equal(t, ptr(byte(0)), ack.Properties.MaximumQOS)
}

// MQTT 3.1.1 §3.2: AppendConnack's four bytes as paho.mqtt.golang reads them.
func TestAppendConnackPaho3(t *testing.T) {
	for code := range ConnRefusedNotAuthorized + 1 {
		b := AppendConnack(nil, false, code == 0, code, &ConnackProps{ReasonString: "ignored"})
		require.Len(t, b, 4)
		ack := read3(t, b).(*paho3.ConnackPacket)
		require.Equal(t, code, ack.ReturnCode)
		require.Equal(t, code == 0, ack.SessionPresent)
	}
}

// MQTT 5 §3.4-§3.7: AppendAck for each acknowledgement type as paho.golang reads it.
func TestAppendAckTypesPaho5(t *testing.T) {
	for _, typ := range []byte{PUBACK, PUBREC, PUBREL, PUBCOMP} {
		for _, reason := range []string{"", "why"} {
			cp := read5(t, AppendAck(nil, typ, 300, UnspecifiedError, reason, true))
			require.Equal(t, typ, cp.Type)
			var id uint16
			var rc byte
			var props *paho5.Properties
			switch c := cp.Content.(type) {
			case *paho5.Puback:
				id, rc, props = c.PacketID, c.ReasonCode, c.Properties
			case *paho5.Pubrec:
				id, rc, props = c.PacketID, c.ReasonCode, c.Properties
			case *paho5.Pubrel:
				id, rc, props = c.PacketID, c.ReasonCode, c.Properties
			case *paho5.Pubcomp:
				id, rc, props = c.PacketID, c.ReasonCode, c.Properties
			}
			require.Equal(t, uint16(300), id)
			require.Equal(t, UnspecifiedError, rc)
			require.Equal(t, reason, props.ReasonString)
		}
	}
}

// MQTT 3.1.1 §3.4-§3.7: AppendAck's four bytes as paho.mqtt.golang reads them; PUBREL's flags are
// 0010 [MQTT-3.6.1-1].
func TestAppendAckPaho3(t *testing.T) {
	for _, typ := range []byte{PUBACK, PUBREC, PUBREL, PUBCOMP} {
		b := AppendAck(nil, typ, 0xBEEF, UnspecifiedError, "ignored", false)
		require.Len(t, b, 4)
		var id uint16
		switch c := read3(t, b).(type) {
		case *paho3.PubackPacket:
			id = c.MessageID
		case *paho3.PubrecPacket:
			id = c.MessageID
		case *paho3.PubrelPacket:
			id = c.MessageID
		case *paho3.PubcompPacket:
			id = c.MessageID
		}
		require.Equal(t, uint16(0xBEEF), id)
		_, flags, _, _, err := Split(b, 4)
		require.NoError(t, err)
		if typ == PUBREL {
			require.Equal(t, byte(0b0010), flags)
		} else {
			require.Zero(t, flags)
		}
	}
}

// SUBACK and UNSUBACK (MQTT 3.1.1 §3.9, §3.11; MQTT 5 §3.9, §3.11) as the paho libraries read them.
func TestAppendSubackUnsubackPaho(t *testing.T) {
	suback5 := read5(t, AppendSuback(nil, 5, 3, NotAuthorized, true)).Content.(*paho5.Suback)
	require.Equal(t, uint16(5), suback5.PacketID)
	require.Equal(t, []byte{NotAuthorized, NotAuthorized, NotAuthorized}, suback5.Reasons)

	unsuback5 := read5(t, AppendUnsuback(nil, 6, 2, NoSubscriptionExisted, true)).Content.(*paho5.Unsuback)
	require.Equal(t, uint16(6), unsuback5.PacketID)
	require.Equal(t, []byte{NoSubscriptionExisted, NoSubscriptionExisted}, unsuback5.Reasons)

	suback3 := read3(t, AppendSuback(nil, 7, 2, 0x80, false)).(*paho3.SubackPacket)
	require.Equal(t, uint16(7), suback3.MessageID)
	require.Equal(t, []byte{0x80, 0x80}, suback3.ReturnCodes)

	unsuback := AppendUnsuback(nil, 8, 2, 0x80, false)
	require.Len(t, unsuback, 4, "MQTT 3.1.1 UNSUBACK has no payload (§3.11.3)")
	require.Equal(t, uint16(8), read3(t, unsuback).(*paho3.UnsubackPacket).MessageID)
}

// PINGRESP (§3.13) and the server's DISCONNECT (MQTT 5 §3.14) as the paho libraries read them.
func TestAppendPingrespDisconnectPaho(t *testing.T) {
	require.Equal(t, paho5.PINGRESP, read5(t, AppendPingresp(nil)).Type)
	require.IsType(t, &paho3.PingrespPacket{}, read3(t, AppendPingresp(nil)))

	for _, tc := range []struct {
		code   byte
		reason string
		size   int
	}{
		{Success, "", 3}, // not the 2-byte form of §3.14.2.1, which paho.golang cannot read
		{ServerShuttingDown, "", 3},
		{KeepAliveTimeout, "no PINGREQ", 3 + 1 + 3 + 10},
	} {
		b := AppendDisconnect(nil, tc.code, tc.reason)
		require.Len(t, b, tc.size)
		d := read5(t, b).Content.(*paho5.Disconnect)
		require.Equal(t, tc.code, d.ReasonCode)
		require.Equal(t, tc.reason, d.Properties.ReasonString)
	}
}
