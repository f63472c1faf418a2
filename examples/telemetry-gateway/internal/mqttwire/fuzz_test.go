package mqttwire

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	paho5 "github.com/eclipse/paho.golang/packets"
	paho3 "github.com/eclipse/paho.mqtt.golang/packets"
	"github.com/stretchr/testify/require"
)

// FuzzSplitParse splits arbitrary bytes into packets and hands each to the parser for its type, for
// MQTT 5 and 3.1.1. Invariants: no panic; n ≤ len(buf); the body lies inside buf and ends at n; every
// refusal is an *Error with a reason code of 0x80 or more; a CONNECT, PUBLISH, SUBSCRIBE or
// UNSUBSCRIBE the codec accepts, paho's reader accepts too and reads the same fields.
func FuzzSplitParse(f *testing.F) {
	seeds := [][]byte{
		connectBody("MQTT", 5, 0xC4|0x08, plist(property(0x11, u32(7)), property(0x26, str("k"), str("v"))), str("dev"),
			plist(property(0x18, u32(1))), str("w"), str("m"), str("u"), str("p")),
		connectBody("MQTT", 4, 0x02, str("dev")),
	}
	for _, s := range seeds {
		f.Add(packet(0x10, s), true)
		f.Add(packet(0x10, s), false)
	}
	f.Add(cat(packet(0x32, cat(str("a/b"), u16(1), plist(property(0x23, u16(2)), property(0x01, []byte{1})), []byte("x"))),
		[]byte{0xC0, 0}), true)
	f.Add(packet(0x30, cat(str("a/b"), []byte("x"))), false)
	f.Add(packet(0x62, cat(u16(7), []byte{0x92}, plist(property(0x1F, str("r"))))), true)
	f.Add(packet(0x82, cat(u16(3), plist(property(0x0B, []byte{1})), str("a/#"), []byte{1})), true)
	f.Add(packet(0x82, cat(u16(3), str("a/#"), []byte{1})), false)
	f.Add(packet(0xA2, cat(u16(4), plist(), str("a"))), true)
	f.Add(packet(0xE0, cat([]byte{0}, plist(property(0x11, u32(1))))), true)
	f.Add([]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, true)

	f.Fuzz(func(t *testing.T, data []byte, v5 bool) {
		buf := data
		for len(buf) > 0 {
			typ, flags, body, n, err := Split(buf, 1<<16)
			if err != nil {
				requireRefusal(t, err)
				return
			}
			if n == 0 {
				return
			}
			require.LessOrEqual(t, n, len(buf))
			require.LessOrEqual(t, len(body), n)
			if len(body) > 0 {
				require.Equal(t, unsafe.Pointer(&buf[n-len(body)]), unsafe.Pointer(&body[0]), "body must alias buf and end at n")
			}
			parseAny(t, typ, flags, body, v5, buf[:n])
			buf = buf[n:]
		}
	})
}

// requireRefusal asserts that err is a refusal a server can answer: an *Error with a failure code.
func requireRefusal(t *testing.T, err error) {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "%T is not an *Error", err)
	require.GreaterOrEqual(t, e.Code, UnspecifiedError)
	require.NotEmpty(t, e.Error())
}

// parseAny runs the parser for typ on one packet split off whole.
func parseAny(t *testing.T, typ, flags byte, body []byte, v5 bool, whole []byte) {
	t.Helper()
	var err error
	switch typ {
	case CONNECT:
		var c Connect
		c, err = ParseConnect(body)
		if err == nil {
			requirePahoReadsConnect(t, c, whole)
		}
	case PUBLISH:
		var p Publish
		p, err = ParsePublish(flags, body, v5)
		if err == nil {
			requirePahoReadsPublish(t, p, whole, v5)
		}
	case PUBREL:
		_, _, err = ParsePubrel(flags, body, v5)
	case SUBSCRIBE, UNSUBSCRIBE:
		var id uint16
		var n int
		if typ == SUBSCRIBE {
			id, n, err = ParseSubscribe(flags, body, v5)
		} else {
			id, n, err = ParseUnsubscribe(flags, body, v5)
		}
		if err == nil && v5 {
			cp := readPaho5(t, whole)
			if s, ok := cp.Content.(*paho5.Subscribe); ok {
				require.Equal(t, id, s.PacketID)
				require.Len(t, s.Subscriptions, n)
			} else {
				u := cp.Content.(*paho5.Unsubscribe)
				require.Equal(t, id, u.PacketID)
				require.Len(t, u.Topics, n)
			}
		}
	case DISCONNECT:
		_, _, _, err = ParseDisconnect(body, v5)
	}
	if err != nil {
		requireRefusal(t, err)
	}
}

// readPaho5 reads one packet with paho.golang, which must accept it.
func readPaho5(t *testing.T, whole []byte) *paho5.ControlPacket {
	t.Helper()
	cp, err := paho5.ReadPacket(bytes.NewReader(whole))
	require.NoError(t, err)
	return cp
}

// requirePahoReadsConnect is the differential oracle for CONNECT: paho's reader for the version the
// codec saw accepts it and reads the same client identifier, credentials and will.
func requirePahoReadsConnect(t *testing.T, c Connect, whole []byte) {
	t.Helper()
	if c.Version == 5 {
		pc := readPaho5(t, whole).Content.(*paho5.Connect)
		require.Equal(t, c.ClientID, pc.ClientID)
		require.Equal(t, c.KeepAlive, pc.KeepAlive)
		require.Equal(t, string(c.Username), pc.Username)
		require.True(t, bytes.Equal(c.Password, pc.Password))
		require.Equal(t, c.WillTopic, pc.WillTopic)
		require.True(t, bytes.Equal(c.WillPayload, pc.WillMessage))
		return
	}
	cp, err := paho3.ReadPacket(bytes.NewReader(whole))
	require.NoError(t, err)
	pc := cp.(*paho3.ConnectPacket)
	require.Equal(t, c.ClientID, pc.ClientIdentifier)
	require.Equal(t, c.KeepAlive, pc.Keepalive)
	require.Equal(t, string(c.Username), pc.Username)
	require.True(t, bytes.Equal(c.Password, pc.Password))
	require.Equal(t, c.WillTopic, pc.WillTopic)
	require.True(t, bytes.Equal(c.WillPayload, pc.WillMessage))
}

// requirePahoReadsPublish is the differential oracle: paho's reader agrees on an accepted PUBLISH.
func requirePahoReadsPublish(t *testing.T, p Publish, whole []byte, v5 bool) {
	t.Helper()
	if v5 {
		pp := readPaho5(t, whole).Content.(*paho5.Publish)
		require.Equal(t, string(p.Topic), pp.Topic)
		require.Equal(t, p.PacketID, pp.PacketID)
		require.Equal(t, p.QoS, pp.QoS)
		require.True(t, bytes.Equal(p.Payload, pp.Payload))
		return
	}
	cp, err := paho3.ReadPacket(bytes.NewReader(whole))
	require.NoError(t, err)
	pp := cp.(*paho3.PublishPacket)
	require.Equal(t, string(p.Topic), pp.TopicName)
	require.Equal(t, p.PacketID, pp.MessageID)
	require.True(t, bytes.Equal(p.Payload, pp.Payload))
}
