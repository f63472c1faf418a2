package mqttwire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplit(t *testing.T) {
	publish := packet(0x30, cat(str("a/b"), []byte("hi")))
	tests := []struct {
		name     string
		buf      []byte
		max      int
		wantTyp  byte
		wantBody []byte
		wantN    int
		wantCode byte
	}{
		{name: "empty buffer: more bytes needed", buf: nil, max: 100},
		{name: "first byte only: more bytes needed", buf: []byte{0xC0}, max: 100},
		{name: "PINGREQ (MQTT 3.1.1 §3.12, MQTT 5 §3.12)", buf: []byte{0xC0, 0x00}, max: 100,
			wantTyp: PINGREQ, wantBody: []byte{}, wantN: 2},
		{name: "first of two packets", buf: cat(publish, []byte{0xC0, 0x00}), max: 100,
			wantTyp: PUBLISH, wantBody: publish[2:], wantN: len(publish)},
		{name: "body not all there: more bytes needed", buf: publish[:len(publish)-1], max: 100},
		{name: "Remaining Length continues past the buffer: more bytes needed", buf: []byte{0x30, 0x80}, max: 100},
		{name: "packet of exactly max bytes", buf: publish, max: len(publish),
			wantTyp: PUBLISH, wantBody: publish[2:], wantN: len(publish)},
		{name: "two-byte Remaining Length (MQTT 5 §1.5.5)", buf: packet(0x30, cat(str("t"), make([]byte, 200))),
			max: 1000, wantTyp: PUBLISH, wantBody: cat(str("t"), make([]byte, 200)), wantN: 3 + 203},
		{name: "four-byte Remaining Length of 268,435,455 is not an error (MQTT 5 §1.5.5)",
			buf: []byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, max: 1 << 30},

		{name: "one byte over max: PacketTooLarge", buf: publish, max: len(publish) - 1, wantCode: PacketTooLarge},
		{name: "too large is refused before the body arrives (MQTT 5 §3.1.2.11.4)",
			buf: []byte{0x30, 0x80, 0x80, 0x01}, max: 16000, wantCode: PacketTooLarge},
		{name: "max 0 accepts nothing", buf: []byte{0xC0, 0x00}, max: 0, wantCode: PacketTooLarge},
		{name: "Remaining Length of five bytes (MQTT 3.1.1 §2.2.3, MQTT 5 §1.5.5)",
			buf: []byte{0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}, max: 1 << 30, wantCode: MalformedPacket},
		{name: "fifth length byte refused before it arrives", buf: []byte{0x30, 0x80, 0x80, 0x80, 0x80},
			max: 1 << 30, wantCode: MalformedPacket},
		{name: "packet type 0 is reserved (MQTT 3.1.1 §2.2.1, MQTT 5 §2.1.2)", buf: []byte{0x00, 0x00},
			max: 100, wantCode: MalformedPacket},
		{name: "packet type 0 refused from its first byte", buf: []byte{0x00}, max: 100, wantCode: MalformedPacket},
		{name: "PUBREL flags 0000 [MQTT-3.6.1-1]", buf: []byte{0x60, 0x02, 0, 1}, max: 100, wantCode: MalformedPacket},
		{name: "SUBSCRIBE flags 0000 [MQTT-3.8.1-1]", buf: []byte{0x80, 0x00}, max: 100, wantCode: MalformedPacket},
		{name: "UNSUBSCRIBE flags 0011 [MQTT-3.10.1-1]", buf: []byte{0xA3, 0x00}, max: 100, wantCode: MalformedPacket},
		{name: "CONNECT flags 0001 (3.1.1 [MQTT-2.2.2-2], 5 [MQTT-2.1.3-1])", buf: []byte{0x11, 0x00}, max: 100,
			wantCode: MalformedPacket},
		{name: "PINGREQ flags 1000 (3.1.1 [MQTT-2.2.2-2], 5 [MQTT-2.1.3-1])", buf: []byte{0xC8, 0x00}, max: 100,
			wantCode: MalformedPacket},
		{name: "DISCONNECT flags 0010 [MQTT-3.14.1-1]", buf: []byte{0xE2, 0x00}, max: 100, wantCode: MalformedPacket},
		{name: "PUBLISH flags pass to ParsePublish", buf: []byte{0x3F, 0x00}, max: 100,
			wantTyp: PUBLISH, wantBody: []byte{}, wantN: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			typ, _, body, n, err := Split(tc.buf, tc.max)
			requireCode(t, err, tc.wantCode)
			require.Equal(t, tc.wantN, n)
			require.Equal(t, tc.wantTyp, typ)
			if tc.wantN > 0 {
				require.Equal(t, tc.wantBody, body)
				require.Equal(t, len(body), cap(body), "body's capacity must end at the packet")
			}
		})
	}
}

// A stream split byte by byte yields the same packets as one split whole.
func TestSplitByteByByte(t *testing.T) {
	stream := cat(packet(0x30, cat(str("a"), make([]byte, 300))), []byte{0xC0, 0x00},
		packet(0x62, u16(7)), []byte{0xE0, 0x00})
	var got []byte
	var buf []byte
	for i := range stream {
		buf = append(buf, stream[i])
		for {
			typ, _, _, n, err := Split(buf, 1000)
			require.NoError(t, err)
			if n == 0 {
				break
			}
			got = append(got, typ)
			buf = buf[n:]
		}
	}
	require.Equal(t, []byte{PUBLISH, PINGREQ, PUBREL, DISCONNECT}, got)
	require.Empty(t, buf)
}
