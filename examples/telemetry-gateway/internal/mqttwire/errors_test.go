package mqttwire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestErrorIs(t *testing.T) {
	_, err := ParsePublish(0x06, str("t"), false)
	require.EqualError(t, err, "mqttwire: PUBLISH: QoS 3 [MQTT-3.3.1-4] (0x81 Malformed Packet)")
	require.ErrorIs(t, err, &Error{Code: MalformedPacket})
	require.ErrorIs(t, err, &Error{Code: MalformedPacket, Msg: "PUBLISH: QoS 3 [MQTT-3.3.1-4]"})
	require.NotErrorIs(t, err, &Error{Code: ProtocolError})
	require.NotErrorIs(t, err, &Error{Code: MalformedPacket, Msg: "other"})
	require.False(t, errors.Is(err, errors.New("mqttwire: PUBLISH: QoS 3")))
}

// The Variable Byte Integer round trip at each length boundary (MQTT 5 §1.5.5, MQTT 3.1.1 §2.2.3).
func TestVBI(t *testing.T) {
	for _, tc := range []struct {
		v    int
		size int
	}{{0, 1}, {127, 1}, {128, 2}, {16383, 2}, {16384, 3}, {2097151, 3}, {2097152, 4}, {maxVBI, 4}} {
		b := appendVBI(nil, tc.v)
		require.Len(t, b, tc.size, "value %d", tc.v)
		require.Equal(t, tc.size, vbiLen(tc.v))
		v, rest, ok := readVBI(b)
		require.True(t, ok)
		require.Equal(t, tc.v, v)
		require.Empty(t, rest)
	}
}
