package mqttwire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePublish(t *testing.T) {
	noProps := plist()
	tests := []struct {
		name     string
		flags    byte
		body     []byte
		v5       bool
		want     Publish
		wantCode byte
	}{
		// Well-formed packets.
		{name: "3.1.1 QoS 0 (MQTT 3.1.1 §3.3)", flags: 0x00, body: cat(str("a/b"), []byte("x")),
			want: Publish{Topic: []byte("a/b"), Payload: []byte("x")}},
		{name: "3.1.1 QoS 1 retain", flags: 0x03, body: cat(str("a/b"), u16(5), []byte("x")),
			want: Publish{QoS: 1, Retain: true, Topic: []byte("a/b"), PacketID: 5, Payload: []byte("x")}},
		{name: "3.1.1 QoS 2 DUP", flags: 0x0C, body: cat(str("a"), u16(65535)),
			want: Publish{QoS: 2, Dup: true, Topic: []byte("a"), PacketID: 65535, Payload: []byte{}}},
		{name: "5 QoS 0 without properties (MQTT 5 §3.3)", flags: 0x00, body: cat(str("t"), noProps, []byte("p")), v5: true,
			want: Publish{Topic: []byte("t"), Payload: []byte("p")}},
		{name: "5 QoS 1 with every property a client may send (MQTT 5 §3.3.2.3)", flags: 0x02, v5: true,
			body: cat(str("t"), u16(9), plist(property(0x01, []byte{1}), property(0x02, u32(60)), property(0x23, u16(2)),
				property(0x08, str("r/t")), property(0x09, str("c")), property(0x26, str("k"), str("v")),
				property(0x26, str("k"), str("v")), property(0x03, str("text/plain"))), []byte("p")),
			want: Publish{QoS: 1, Topic: []byte("t"), PacketID: 9, TopicAlias: 2, PayloadFormat: 1, Payload: []byte("p")}},
		{name: "5 topic alias alone, empty topic (MQTT 5 §3.3.2.3.4)", flags: 0x00, v5: true,
			body: cat(str(""), plist(property(0x23, u16(1))), []byte("p")),
			want: Publish{Topic: []byte{}, TopicAlias: 1, Payload: []byte("p")}},
		{name: "5 Payload Format Indicator 0", flags: 0x00, v5: true, body: cat(str("t"), plist(property(0x01, []byte{0}))),
			want: Publish{Topic: []byte("t"), Payload: []byte{}}},
		{name: "payload may hold any bytes, U+0000 included (MQTT 5 §3.3.3)", flags: 0x00, body: cat(str("t"), []byte{0, 0xff}),
			want: Publish{Topic: []byte("t"), Payload: []byte{0, 0xff}}},
		{name: "topic with '$', spaces and multi-byte UTF-8 (MQTT 5 §4.7.3)", flags: 0x00, body: cat(str("$SYS/a b/é"), []byte{}),
			want: Publish{Topic: []byte("$SYS/a b/é"), Payload: []byte{}}},

		// Fixed header (MQTT 3.1.1 §3.3.1, MQTT 5 §3.3.1).
		{name: "QoS 3 [MQTT-3.3.1-4] 3.1.1", flags: 0x06, body: cat(str("t"), u16(1)), wantCode: MalformedPacket},
		{name: "QoS 3 [MQTT-3.3.1-4] 5", flags: 0x06, body: cat(str("t"), u16(1), noProps), v5: true, wantCode: MalformedPacket},
		{name: "DUP with QoS 0 [MQTT-3.3.1-2] 3.1.1", flags: 0x08, body: str("t"), wantCode: MalformedPacket},
		{name: "DUP with QoS 0 [MQTT-3.3.1-2] 5", flags: 0x08, body: cat(str("t"), noProps), v5: true, wantCode: MalformedPacket},

		// Topic name (MQTT 3.1.1 §3.3.2.1, MQTT 5 §3.3.2.1).
		{name: "'+' in the topic [MQTT-3.3.2-2]", flags: 0x00, body: cat(str("a/+/b"), noProps), v5: true, wantCode: TopicNameInvalid},
		{name: "'#' in the topic [MQTT-3.3.2-2]", flags: 0x00, body: str("a/#"), wantCode: TopicNameInvalid},
		{name: "topic not UTF-8 [MQTT-3.3.2-1]", flags: 0x00, body: str("a\xff"), wantCode: MalformedPacket},
		{name: "topic with U+0000 ([MQTT-4.7.3-2], [MQTT-1.5.4-2])", flags: 0x00, body: cat(str("a\x00"), noProps), v5: true,
			wantCode: MalformedPacket},
		{name: "topic with an encoded surrogate [MQTT-1.5.4-1]", flags: 0x00, body: str("\xed\xbf\xbf"), wantCode: MalformedPacket},
		{name: "empty topic in 3.1.1 [MQTT-4.7.3-1]", flags: 0x00, body: cat(str(""), []byte("p")), wantCode: MalformedPacket},
		{name: "empty topic without topic alias in 5 (MQTT 5 §3.3.2.3.4)", flags: 0x00, body: cat(str(""), noProps, []byte("p")),
			v5: true, wantCode: ProtocolError},
		{name: "topic length beyond the packet", flags: 0x00, body: []byte{0, 9, 'a'}, wantCode: MalformedPacket},
		{name: "empty body", flags: 0x00, body: nil, wantCode: MalformedPacket},

		// Packet identifier (MQTT 3.1.1 §2.3.1, MQTT 5 §2.2.1).
		{name: "packet identifier 0 at QoS 1 (3.1.1 [MQTT-2.3.1-1])", flags: 0x02, body: cat(str("t"), u16(0)), wantCode: MalformedPacket},
		{name: "packet identifier 0 at QoS 2 (5 [MQTT-2.2.1-3])", flags: 0x04, body: cat(str("t"), u16(0), noProps), v5: true,
			wantCode: ProtocolError},
		{name: "packet identifier truncated", flags: 0x02, body: cat(str("t"), []byte{1}), wantCode: MalformedPacket},

		// MQTT 5 properties (§2.2.2, §3.3.2.3).
		{name: "properties missing in 5 (MQTT 5 §3.3.2.3.1)", flags: 0x00, body: str("t"), v5: true, wantCode: MalformedPacket},
		{name: "property length beyond the packet (MQTT 5 §2.2.2.1)", flags: 0x00, body: cat(str("t"), []byte{5, 1}), v5: true,
			wantCode: MalformedPacket},
		{name: "Topic Alias 0 [MQTT-3.3.2-8]", flags: 0x00, body: cat(str("t"), plist(property(0x23, u16(0)))), v5: true,
			wantCode: TopicAliasInvalid},
		{name: "Topic Alias twice (MQTT 5 §3.3.2.3.4)", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x23, u16(1)), property(0x23, u16(1)))), wantCode: ProtocolError},
		{name: "Payload Format Indicator 2 (MQTT 5 §3.3.2.3.2)", flags: 0x00, body: cat(str("t"), plist(property(0x01, []byte{2}))),
			v5: true, wantCode: ProtocolError},
		{name: "Payload Format Indicator twice (MQTT 5 §3.3.2.3.2)", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x01, []byte{1}), property(0x01, []byte{1}))), wantCode: ProtocolError},
		{name: "Message Expiry Interval twice (MQTT 5 §3.3.2.3.3)", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x02, u32(1)), property(0x02, u32(1)))), wantCode: ProtocolError},
		{name: "Response Topic with a wildcard [MQTT-3.3.2-14]", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x08, str("r/#")))), wantCode: ProtocolError},
		{name: "Response Topic not UTF-8 [MQTT-3.3.2-13]", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x08, str("r\xff")))), wantCode: MalformedPacket},
		{name: "Correlation Data twice (MQTT 5 §3.3.2.3.6)", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x09, str("a")), property(0x09, str("b")))), wantCode: ProtocolError},
		{name: "Content Type not UTF-8 [MQTT-3.3.2-19]", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x03, str("\xc0")))), wantCode: MalformedPacket},
		{name: "Subscription Identifier from a client [MQTT-3.3.4-6]", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x0B, []byte{1}))), wantCode: ProtocolError},
		{name: "property not valid in PUBLISH: Session Expiry (MQTT 5 §2.2.2.2)", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x11, u32(1)))), wantCode: MalformedPacket},
		{name: "unknown property identifier 0x00 (MQTT 5 §2.2.2.2)", flags: 0x00, v5: true,
			body: cat(str("t"), plist(property(0x00, []byte{1}))), wantCode: MalformedPacket},
		{name: "two-byte property identifier 0x80 0x01 (MQTT 5 §2.2.2.2)", flags: 0x00, v5: true,
			body: cat(str("t"), plist([]byte{0x80, 0x01, 0})), wantCode: MalformedPacket},
		{name: "property identifier 1 encoded in two bytes [MQTT-1.5.5-1]", flags: 0x00, v5: true,
			body: cat(str("t"), plist([]byte{0x81, 0x00, 1})), wantCode: MalformedPacket},
		{name: "property value truncated", flags: 0x00, v5: true, body: cat(str("t"), plist(property(0x02, u16(1)))),
			wantCode: MalformedPacket},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePublish(tc.flags, tc.body, tc.v5)
			requireCode(t, err, tc.wantCode)
			if tc.wantCode == 0 {
				require.Equal(t, tc.want, p)
			}
		})
	}
}

// Topic and Payload alias the body: the parser copies nothing.
func TestParsePublishAliases(t *testing.T) {
	body := cat(str("t"), plist(), []byte("payload"))
	p, err := ParsePublish(0, body, true)
	require.NoError(t, err)
	require.Same(t, &body[2], &p.Topic[0])
	require.Same(t, &body[len(body)-1], &p.Payload[len(p.Payload)-1])
}

// Split and ParsePublish do not allocate on a well-formed packet.
func TestSplitParsePublishNoAllocs(t *testing.T) {
	buf := benchPublish()
	var sink Publish
	allocs := testing.AllocsPerRun(1000, func() {
		_, flags, body, _, err := Split(buf, 1<<20)
		if err != nil {
			panic(err)
		}
		sink, err = ParsePublish(flags, body, true)
		if err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
	require.Equal(t, uint16(3), sink.TopicAlias)
}
