package mqttwire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Builders for hand-made packets: each returns the wire bytes of one MQTT data representation.

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }

func u32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// str is a UTF-8 Encoded String or Binary Data: a two-byte length and s.
func str(s string) []byte { return cat(u16(uint16(len(s))), []byte(s)) }

// plist is an MQTT 5 property list: the Property Length and the properties.
func plist(props ...[]byte) []byte {
	body := cat(props...)
	return cat(appendVBI(nil, len(body)), body)
}

// prop is one property: its identifier and its encoded value.
func property(id byte, value ...[]byte) []byte { return cat(append([][]byte{{id}}, value...)...) }

// packet is a whole packet: the first byte, the Remaining Length and the body.
func packet(first byte, body []byte) []byte {
	return cat([]byte{first}, appendVBI(nil, len(body)), body)
}

// requireCode asserts that err is an *Error with code; code 0 asserts no error.
func requireCode(t *testing.T, err error, code byte) {
	t.Helper()
	if code == 0 {
		require.NoError(t, err)
		return
	}
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equalf(t, code, e.Code, "got %v", err)
}
