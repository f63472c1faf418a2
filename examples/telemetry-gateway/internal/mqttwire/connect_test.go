package mqttwire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// connectBody builds a CONNECT body: protocol name, level, flags, keep alive 60, then rest (MQTT 5:
// properties first).
func connectBody(name string, level, flags byte, rest ...[]byte) []byte {
	return cat(str(name), []byte{level, flags}, u16(60), cat(rest...))
}

func TestParseConnect(t *testing.T) {
	noProps := plist()
	tests := []struct {
		name     string
		body     []byte
		want     Connect // compared when wantCode is 0; otherwise only Version
		wantCode byte
	}{
		// Well-formed packets.
		{name: "MQTT 3.1.1 minimal (MQTT 3.1.1 §3.1)", body: connectBody("MQTT", 4, 0x02, str("dev")),
			want: Connect{ProtocolName: "MQTT", Version: 4, CleanStart: true, KeepAlive: 60, ClientID: "dev",
				RequestProblemInfo: true}},
		{name: "MQTT 3.1 is MQIsdp level 3", body: connectBody("MQIsdp", 3, 0x00, str("dev")),
			want: Connect{ProtocolName: "MQIsdp", Version: 3, KeepAlive: 60, ClientID: "dev", RequestProblemInfo: true}},
		{name: "MQTT 5 without properties (MQTT 5 §3.1)", body: connectBody("MQTT", 5, 0x00, noProps, str("dev")),
			want: Connect{ProtocolName: "MQTT", Version: 5, KeepAlive: 60, ClientID: "dev", RequestProblemInfo: true}},
		{name: "empty client identifier is the server's to judge ([MQTT-3.1.3-6])",
			body: connectBody("MQTT", 4, 0x02, str("")),
			want: Connect{ProtocolName: "MQTT", Version: 4, CleanStart: true, KeepAlive: 60, RequestProblemInfo: true}},
		{name: "MQTT 5 allows a password without a user name (MQTT 5 §3.1.2.9)",
			body: connectBody("MQTT", 5, 0x40, noProps, str("d"), str("pw")),
			want: Connect{ProtocolName: "MQTT", Version: 5, KeepAlive: 60, ClientID: "d", Password: []byte("pw"),
				HasPassword: true, RequestProblemInfo: true}},
		{name: "MQTT 5 user property may repeat (MQTT 5 §3.1.2.11.8)",
			body: connectBody("MQTT", 5, 0x00, plist(property(0x26, str("k"), str("v")), property(0x26, str("k"), str("v"))), str("d")),
			want: Connect{ProtocolName: "MQTT", Version: 5, KeepAlive: 60, ClientID: "d", RequestProblemInfo: true}},
		{name: "MQTT 5 will with properties (MQTT 5 §3.1.3.2)",
			body: connectBody("MQTT", 5, 0x04|0x10|0x20, noProps, str("d"),
				plist(property(0x18, u32(5)), property(0x01, []byte{1}), property(0x26, str("a"), str("b")),
					property(0x26, str("a"), str("c"))), str("w/t"), str("bye")),
			want: Connect{ProtocolName: "MQTT", Version: 5, KeepAlive: 60, ClientID: "d", Will: true, WillQoS: 2,
				WillRetain: true, WillTopic: "w/t", WillPayload: []byte("bye"), RequestProblemInfo: true}},
		{name: "MQTT 5 authentication method and data (MQTT 5 §3.1.2.11.9)",
			body: connectBody("MQTT", 5, 0x00, plist(property(0x15, str("SCRAM")), property(0x16, str("x"))), str("d")),
			want: Connect{ProtocolName: "MQTT", Version: 5, KeepAlive: 60, ClientID: "d", AuthMethod: "SCRAM",
				RequestProblemInfo: true}},

		// Protocol name and level (MQTT 3.1.1 §3.1.2.1-2, MQTT 5 §3.1.2.1-2).
		{name: "level 6: UnsupportedProtocolVersion (3.1.1 [MQTT-3.1.2-2])",
			body: connectBody("MQTT", 6, 0x02, str("d")), want: Connect{Version: 6}, wantCode: UnsupportedProtocolVersion},
		{name: "level 2: UnsupportedProtocolVersion", body: connectBody("MQIsdp", 2, 0x02, str("d")),
			want: Connect{Version: 2}, wantCode: UnsupportedProtocolVersion},
		{name: "MQTT with level 3 does not match (MQTT 3.1.1 §3.1.2.1)", body: connectBody("MQTT", 3, 0x02, str("d")),
			want: Connect{Version: 3}, wantCode: UnsupportedProtocolVersion},
		{name: "MQIsdp with level 4 does not match", body: connectBody("MQIsdp", 4, 0x02, str("d")),
			want: Connect{Version: 4}, wantCode: UnsupportedProtocolVersion},
		{name: "another protocol's name (MQTT 5 [MQTT-3.1.2-1])", body: connectBody("HTTP", 5, 0x02, str("d")),
			want: Connect{Version: 5}, wantCode: UnsupportedProtocolVersion},
		{name: "unsupported level wins over a malformed rest", body: cat(str("MQTT"), []byte{9}),
			want: Connect{Version: 9}, wantCode: UnsupportedProtocolVersion},
		{name: "protocol name truncated", body: []byte{0, 4, 'M', 'Q'}, wantCode: MalformedPacket},
		{name: "empty body", body: nil, wantCode: MalformedPacket},

		// Connect flags (MQTT 3.1.1 §3.1.2.3-9, MQTT 5 §3.1.2.3-9).
		{name: "reserved flag set [MQTT-3.1.2-3] 3.1.1", body: connectBody("MQTT", 4, 0x03, str("d")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "reserved flag set [MQTT-3.1.2-3] 5", body: connectBody("MQTT", 5, 0x01, noProps, str("d")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "will QoS without will flag (3.1.1 [MQTT-3.1.2-13])", body: connectBody("MQTT", 4, 0x08, str("d")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "will QoS without will flag (5 [MQTT-3.1.2-11])", body: connectBody("MQTT", 5, 0x10, noProps, str("d")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "will retain without will flag (3.1.1 [MQTT-3.1.2-15])", body: connectBody("MQTT", 4, 0x20, str("d")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "will retain without will flag (5 [MQTT-3.1.2-13])", body: connectBody("MQTT", 5, 0x20, noProps, str("d")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "will QoS 3 (3.1.1 [MQTT-3.1.2-14])", body: connectBody("MQTT", 4, 0x1C, str("d"), str("w"), str("m")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "will QoS 3 (5 [MQTT-3.1.2-12])", body: connectBody("MQTT", 5, 0x1C, noProps, str("d"), noProps, str("w"), str("m")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "password without user name (3.1.1 [MQTT-3.1.2-22])",
			body: connectBody("MQTT", 4, 0x40, str("d"), str("pw")), want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "password without user name (3.1 [MQTT-3.1.2-22])",
			body: connectBody("MQIsdp", 3, 0x40, str("d"), str("pw")), want: Connect{Version: 3}, wantCode: MalformedPacket},

		// Payload (MQTT 3.1.1 §3.1.3, MQTT 5 §3.1.3) and UTF-8 (MQTT 3.1.1 §1.5.3, MQTT 5 §1.5.4).
		{name: "client identifier not UTF-8 (3.1.1 [MQTT-3.1.3-4])", body: connectBody("MQTT", 4, 0x02, str("d\xff")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "client identifier with U+0000 (5 [MQTT-1.5.4-2])", body: connectBody("MQTT", 5, 0x02, noProps, str("d\x00")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "client identifier with an encoded surrogate (5 [MQTT-1.5.4-1])",
			body: connectBody("MQTT", 5, 0x02, noProps, str("\xed\xa0\x80")), want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "client identifier with an overlong encoding ([MQTT-1.5.3-1])",
			body: connectBody("MQTT", 4, 0x02, str("\xc0\xaf")), want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "will topic not UTF-8 (3.1.1 [MQTT-3.1.3-10])", body: connectBody("MQTT", 4, 0x06, str("d"), str("\xff"), str("m")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "user name not UTF-8 (5 [MQTT-3.1.3-12])", body: connectBody("MQTT", 5, 0x80, noProps, str("d"), str("u\x00")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "password may hold any bytes (MQTT 5 §3.1.3.6)", body: connectBody("MQTT", 5, 0xC0, noProps, str("d"), str("u"), str("\x00\xff")),
			want: Connect{ProtocolName: "MQTT", Version: 5, KeepAlive: 60, ClientID: "d", Username: []byte("u"), HasUsername: true,
				Password: []byte("\x00\xff"), HasPassword: true, RequestProblemInfo: true}},
		{name: "user name flag without user name ([MQTT-3.1.2-19] 3.1.1)", body: connectBody("MQTT", 4, 0x80, str("d")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "empty will topic [MQTT-4.7.3-1]", body: connectBody("MQTT", 4, 0x06, str("d"), str(""), str("m")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "wildcard in will topic [MQTT-4.7.0-1]", body: connectBody("MQTT", 5, 0x06, noProps, str("d"), noProps, str("w/+"), str("m")),
			want: Connect{Version: 5}, wantCode: TopicNameInvalid},
		{name: "will flag without will topic ([MQTT-3.1.2-9])", body: connectBody("MQTT", 4, 0x04, str("d")),
			want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "bytes after the payload (3.1.1 [MQTT-3.1.2-18]: no user name without its flag)",
			body: connectBody("MQTT", 4, 0x02, str("d"), str("u")), want: Connect{Version: 4}, wantCode: MalformedPacket},
		{name: "one byte after the payload", body: connectBody("MQTT", 5, 0x02, noProps, str("d"), []byte{0}),
			want: Connect{Version: 5}, wantCode: MalformedPacket},

		// MQTT 5 properties (§2.2.2, §3.1.2.11).
		{name: "property not valid in CONNECT: Topic Alias (MQTT 5 §2.2.2.2)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x23, u16(1))), str("d")), want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "unknown property identifier 0x7F (MQTT 5 §2.2.2.2)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x7F, []byte{0})), str("d")), want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "property length beyond the packet (MQTT 5 §2.2.2.1)", body: connectBody("MQTT", 5, 0x02, []byte{50}, str("d")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "property value truncated", body: connectBody("MQTT", 5, 0x02, plist(property(0x11, []byte{0, 0})), str("d")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "Session Expiry Interval twice (MQTT 5 §3.1.2.11.2)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x11, u32(1)), property(0x11, u32(2))), str("d")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Receive Maximum 0 (MQTT 5 §3.1.2.11.3)", body: connectBody("MQTT", 5, 0x02, plist(property(0x21, u16(0))), str("d")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Maximum Packet Size 0 (MQTT 5 §3.1.2.11.4)", body: connectBody("MQTT", 5, 0x02, plist(property(0x27, u32(0))), str("d")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Request Response Information 2 (MQTT 5 §3.1.2.11.6)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x19, []byte{2})), str("d")), want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Request Problem Information 2 (MQTT 5 §3.1.2.11.7)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x17, []byte{2})), str("d")), want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Authentication Data without Authentication Method (MQTT 5 §3.1.2.11.10)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x16, str("x"))), str("d")), want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Authentication Method twice (MQTT 5 §3.1.2.11.9)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x15, str("a")), property(0x15, str("a"))), str("d")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "Authentication Method not UTF-8 (MQTT 5 §1.5.4)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x15, str("\xff"))), str("d")), want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "user property value not UTF-8 (MQTT 5 §1.5.7)",
			body: connectBody("MQTT", 5, 0x02, plist(property(0x26, str("k"), str("\x00"))), str("d")), want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "will property not valid for a will: Session Expiry (MQTT 5 §3.1.3.2)",
			body: connectBody("MQTT", 5, 0x06, noProps, str("d"), plist(property(0x11, u32(1))), str("w"), str("m")),
			want: Connect{Version: 5}, wantCode: MalformedPacket},
		{name: "will Payload Format Indicator 2 (MQTT 5 §3.1.3.2.3)",
			body: connectBody("MQTT", 5, 0x06, noProps, str("d"), plist(property(0x01, []byte{2})), str("w"), str("m")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "will Response Topic with a wildcard (MQTT 5 §3.1.3.2.5)",
			body: connectBody("MQTT", 5, 0x06, noProps, str("d"), plist(property(0x08, str("r/#"))), str("w"), str("m")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
		{name: "will Message Expiry twice (MQTT 5 §3.1.3.2.4)",
			body: connectBody("MQTT", 5, 0x06, noProps, str("d"), plist(property(0x02, u32(1)), property(0x02, u32(1))), str("w"), str("m")),
			want: Connect{Version: 5}, wantCode: ProtocolError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConnect(tc.body)
			requireCode(t, err, tc.wantCode)
			if tc.wantCode == 0 {
				require.Equal(t, tc.want, c)
				return
			}
			require.Equal(t, tc.want.Version, c.Version, "the server answers in the client's format")
		})
	}
}

// MQTT 5 properties come out of CONNECT as given, and their absence gives the defaults of §3.1.2.11.
func TestParseConnectProperties(t *testing.T) {
	c, err := ParseConnect(connectBody("MQTT", 5, 0x02, plist(property(0x11, u32(7)), property(0x21, u16(10)),
		property(0x27, u32(1000)), property(0x22, u16(4)), property(0x17, []byte{0}), property(0x19, []byte{1})), str("d")))
	require.NoError(t, err)
	require.Equal(t, uint32(7), c.SessionExpiry)
	require.Equal(t, uint16(10), c.ReceiveMaximum)
	require.Equal(t, uint32(1000), c.MaxPacketSize)
	require.Equal(t, uint16(4), c.TopicAliasMax)
	require.False(t, c.RequestProblemInfo)
	require.True(t, c.RequestResponseInfo)
}

// A CONNECT cut anywhere is refused as malformed, never read past its end.
func TestParseConnectTruncated(t *testing.T) {
	full := connectBody("MQTT", 5, 0xC4|0x08, plist(property(0x11, u32(7)), property(0x26, str("k"), str("v"))), str("dev"),
		plist(property(0x18, u32(1))), str("w"), str("m"), str("u"), str("p"))
	_, err := ParseConnect(full)
	require.NoError(t, err)
	for i := range len(full) {
		_, err := ParseConnect(full[:i])
		requireCode(t, err, MalformedPacket)
	}
}
