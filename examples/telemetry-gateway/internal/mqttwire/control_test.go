package mqttwire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePubrel(t *testing.T) {
	tests := []struct {
		name     string
		flags    byte
		body     []byte
		v5       bool
		wantID   uint16
		wantRC   byte
		wantCode byte
	}{
		{name: "3.1.1 (MQTT 3.1.1 §3.6)", flags: 2, body: u16(7), wantID: 7},
		{name: "5 without reason code: Success (MQTT 5 §3.6.2.1)", flags: 2, body: u16(7), v5: true, wantID: 7},
		{name: "5 reason code without properties (MQTT 5 §3.6.2.2)", flags: 2, body: cat(u16(7), []byte{0x92}), v5: true,
			wantID: 7, wantRC: PacketIdentifierNotFound},
		{name: "5 reason code and Reason String (MQTT 5 §3.6.2.2.2)", flags: 2, v5: true,
			body:   cat(u16(7), []byte{0x92}, plist(property(0x1F, str("gone")), property(0x26, str("k"), str("v")))),
			wantID: 7, wantRC: PacketIdentifierNotFound},
		{name: "flags 0000 [MQTT-3.6.1-1]", flags: 0, body: u16(7), wantCode: MalformedPacket},
		{name: "flags 0011 [MQTT-3.6.1-1] 5", flags: 3, body: u16(7), v5: true, wantCode: MalformedPacket},
		{name: "packet identifier truncated", flags: 2, body: []byte{7}, wantCode: MalformedPacket},
		{name: "packet identifier 0 (3.1.1 §2.3.1)", flags: 2, body: u16(0), wantCode: MalformedPacket},
		{name: "packet identifier 0 (5 §2.2.1)", flags: 2, body: u16(0), v5: true, wantCode: ProtocolError},
		{name: "3.1.1 bytes after the identifier (MQTT 3.1.1 §3.6.1: Remaining Length 2)", flags: 2, body: cat(u16(7), []byte{0}),
			wantCode: MalformedPacket},
		{name: "Reason String twice (MQTT 5 §3.6.2.2.2)", flags: 2, v5: true,
			body: cat(u16(7), []byte{0}, plist(property(0x1F, str("a")), property(0x1F, str("b")))), wantCode: ProtocolError},
		{name: "property not valid in PUBREL: Topic Alias (MQTT 5 §2.2.2.2)", flags: 2, v5: true,
			body: cat(u16(7), []byte{0}, plist(property(0x23, u16(1)))), wantCode: MalformedPacket},
		{name: "bytes after the properties", flags: 2, v5: true, body: cat(u16(7), []byte{0}, plist(), []byte{0}),
			wantCode: MalformedPacket},
		{name: "property length beyond the packet", flags: 2, v5: true, body: cat(u16(7), []byte{0, 9}), wantCode: MalformedPacket},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, rc, err := ParsePubrel(tc.flags, tc.body, tc.v5)
			requireCode(t, err, tc.wantCode)
			require.Equal(t, tc.wantID, id)
			require.Equal(t, tc.wantRC, rc)
		})
	}
}

// filterCase is a SUBSCRIBE or UNSUBSCRIBE test: the packet and what the parser returns.
type filterCase struct {
	name     string
	flags    byte
	body     []byte
	v5       bool
	wantID   uint16
	wantN    int
	wantCode byte
}

func runFilterCases(t *testing.T, tests []filterCase, parse func(byte, []byte, bool) (uint16, int, error)) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, n, err := parse(tc.flags, tc.body, tc.v5)
			requireCode(t, err, tc.wantCode)
			require.Equal(t, tc.wantID, id)
			require.Equal(t, tc.wantN, n)
		})
	}
}

func TestParseSubscribe(t *testing.T) {
	noProps := plist()
	tests := []filterCase{
		{name: "3.1.1 two filters (MQTT 3.1.1 §3.8)", flags: 2, body: cat(u16(3), str("a/#"), []byte{1}, str("+/b"), []byte{2}),
			wantID: 3, wantN: 2},
		{name: "5 with Subscription Identifier and options (MQTT 5 §3.8)", flags: 2, v5: true,
			body: cat(u16(3), plist(property(0x0B, []byte{0x80, 0x01}), property(0x26, str("k"), str("v"))), str("a"),
				[]byte{0x2D}), wantID: 3, wantN: 1},
		{name: "flags 0000 [MQTT-3.8.1-1]", flags: 0, body: cat(u16(3), str("a"), []byte{0}), wantCode: MalformedPacket},
		{name: "no filter is a protocol violation (3.1.1 [MQTT-3.8.3-3])", flags: 2, body: u16(3), wantCode: MalformedPacket},
		{name: "no filter is a Protocol Error (5 [MQTT-3.8.3-2])", flags: 2, body: cat(u16(3), noProps), v5: true,
			wantCode: ProtocolError},
		{name: "packet identifier 0 (3.1.1 [MQTT-2.3.1-1])", flags: 2, body: cat(u16(0), str("a"), []byte{0}), wantCode: MalformedPacket},
		{name: "packet identifier 0 (5 [MQTT-2.2.1-3])", flags: 2, body: cat(u16(0), noProps, str("a"), []byte{0}), v5: true,
			wantCode: ProtocolError},
		{name: "empty filter [MQTT-4.7.3-1]", flags: 2, body: cat(u16(3), str(""), []byte{0}), wantCode: MalformedPacket},
		{name: "filter not UTF-8 [MQTT-3.8.3-1]", flags: 2, body: cat(u16(3), noProps, str("a\xff"), []byte{0}), v5: true,
			wantCode: MalformedPacket},
		{name: "filter with U+0000 [MQTT-4.7.3-2]", flags: 2, body: cat(u16(3), str("a\x00"), []byte{0}), wantCode: MalformedPacket},
		{name: "options missing", flags: 2, body: cat(u16(3), str("a")), wantCode: MalformedPacket},
		{name: "3.1.1 reserved option bits set [MQTT-3-8.3-4]", flags: 2, body: cat(u16(3), str("a"), []byte{0x04}),
			wantCode: MalformedPacket},
		{name: "3.1.1 requested QoS 3 [MQTT-3-8.3-4]", flags: 2, body: cat(u16(3), str("a"), []byte{0x03}), wantCode: MalformedPacket},
		{name: "5 reserved option bits set [MQTT-3.8.3-5]", flags: 2, body: cat(u16(3), noProps, str("a"), []byte{0x40}), v5: true,
			wantCode: MalformedPacket},
		{name: "5 Maximum QoS 3 (MQTT 5 §3.8.3.1)", flags: 2, body: cat(u16(3), noProps, str("a"), []byte{0x03}), v5: true,
			wantCode: ProtocolError},
		{name: "5 Retain Handling 3 (MQTT 5 §3.8.3.1)", flags: 2, body: cat(u16(3), noProps, str("a"), []byte{0x30}), v5: true,
			wantCode: ProtocolError},
		{name: "Subscription Identifier 0 (MQTT 5 §3.8.2.1.2)", flags: 2, v5: true,
			body: cat(u16(3), plist(property(0x0B, []byte{0})), str("a"), []byte{0}), wantCode: ProtocolError},
		{name: "Subscription Identifier twice (MQTT 5 §3.8.2.1.2)", flags: 2, v5: true,
			body: cat(u16(3), plist(property(0x0B, []byte{1}), property(0x0B, []byte{2})), str("a"), []byte{0}), wantCode: ProtocolError},
		{name: "Subscription Identifier over four bytes (MQTT 5 §1.5.5)", flags: 2, v5: true,
			body: cat(u16(3), plist(property(0x0B, []byte{0x80, 0x80, 0x80, 0x80, 0x01})), str("a"), []byte{0}), wantCode: MalformedPacket},
		{name: "property not valid in SUBSCRIBE: Reason String (MQTT 5 §2.2.2.2)", flags: 2, v5: true,
			body: cat(u16(3), plist(property(0x1F, str("r"))), str("a"), []byte{0}), wantCode: MalformedPacket},
		{name: "filter length beyond the packet", flags: 2, body: cat(u16(3), []byte{0, 5, 'a'}), wantCode: MalformedPacket},
	}
	runFilterCases(t, tests, ParseSubscribe)
}

func TestParseUnsubscribe(t *testing.T) {
	noProps := plist()
	tests := []filterCase{
		{name: "3.1.1 two filters (MQTT 3.1.1 §3.10)", flags: 2, body: cat(u16(4), str("a/#"), str("b")), wantID: 4, wantN: 2},
		{name: "5 with a user property (MQTT 5 §3.10)", flags: 2, v5: true,
			body: cat(u16(4), plist(property(0x26, str("k"), str("v"))), str("a")), wantID: 4, wantN: 1},
		{name: "flags 0000 [MQTT-3.10.1-1]", flags: 0, body: cat(u16(4), str("a")), wantCode: MalformedPacket},
		{name: "no filter (3.1.1 [MQTT-3.10.3-2])", flags: 2, body: u16(4), wantCode: MalformedPacket},
		{name: "no filter (5 [MQTT-3.10.3-2])", flags: 2, body: cat(u16(4), noProps), v5: true, wantCode: ProtocolError},
		{name: "packet identifier 0 (5 [MQTT-2.2.1-3])", flags: 2, body: cat(u16(0), noProps, str("a")), v5: true,
			wantCode: ProtocolError},
		{name: "empty filter [MQTT-4.7.3-1]", flags: 2, body: cat(u16(4), str("")), wantCode: MalformedPacket},
		{name: "filter not UTF-8 [MQTT-3.10.3-1]", flags: 2, body: cat(u16(4), str("\xff")), wantCode: MalformedPacket},
		{name: "Subscription Identifier not valid in UNSUBSCRIBE (MQTT 5 §2.2.2.2)", flags: 2, v5: true,
			body: cat(u16(4), plist(property(0x0B, []byte{1})), str("a")), wantCode: MalformedPacket},
		{name: "trailing byte is a truncated filter", flags: 2, body: cat(u16(4), str("a"), []byte{0}), wantCode: MalformedPacket},
	}
	runFilterCases(t, tests, ParseUnsubscribe)
}

func TestParseDisconnect(t *testing.T) {
	tests := []struct {
		name       string
		body       []byte
		v5         bool
		wantRC     byte
		wantExpiry uint32
		wantHas    bool
		wantCode   byte
	}{
		{name: "3.1.1 empty (MQTT 3.1.1 §3.14)", body: nil},
		{name: "3.1.1 body not empty (MQTT 3.1.1 §3.14.2: no variable header)", body: []byte{0}, wantCode: MalformedPacket},
		{name: "5 empty: Normal disconnection (MQTT 5 §3.14.2.1)", body: nil, v5: true},
		{name: "5 reason code only (MQTT 5 §3.14.2.2)", body: []byte{0x04}, v5: true, wantRC: 0x04},
		{name: "5 Session Expiry Interval (MQTT 5 §3.14.2.2.2)", v5: true,
			body:       cat([]byte{0}, plist(property(0x11, u32(300)), property(0x1F, str("bye")), property(0x26, str("k"), str("v")))),
			wantExpiry: 300, wantHas: true},
		{name: "5 Session Expiry Interval 0 is present", v5: true, body: cat([]byte{0}, plist(property(0x11, u32(0)))), wantHas: true},
		{name: "5 Session Expiry Interval twice (MQTT 5 §3.14.2.2.2)", v5: true,
			body: cat([]byte{0}, plist(property(0x11, u32(1)), property(0x11, u32(1)))), wantCode: ProtocolError},
		{name: "5 Server Reference twice (MQTT 5 §3.14.2.2.5)", v5: true,
			body: cat([]byte{0}, plist(property(0x1C, str("a")), property(0x1C, str("a")))), wantCode: ProtocolError},
		{name: "5 property not valid in DISCONNECT: Topic Alias (MQTT 5 §2.2.2.2)", v5: true,
			body: cat([]byte{0}, plist(property(0x23, u16(1)))), wantCode: MalformedPacket},
		{name: "5 Reason String not UTF-8 (MQTT 5 §1.5.4)", v5: true,
			body: cat([]byte{0}, plist(property(0x1F, str("\xff")))), wantCode: MalformedPacket},
		{name: "5 property length beyond the packet", v5: true, body: []byte{0, 3, 0x11}, wantCode: MalformedPacket},
		{name: "5 bytes after the properties", v5: true, body: cat([]byte{0}, plist(), []byte{1}), wantCode: MalformedPacket},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc, expiry, has, err := ParseDisconnect(tc.body, tc.v5)
			requireCode(t, err, tc.wantCode)
			require.Equal(t, tc.wantRC, rc)
			require.Equal(t, tc.wantExpiry, expiry)
			require.Equal(t, tc.wantHas, has)
		})
	}
}
