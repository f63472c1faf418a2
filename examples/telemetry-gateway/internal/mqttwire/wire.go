package mqttwire

import (
	"bytes"
	"unicode/utf8"
)

// The data representations of MQTT 3.1.1 §1.5 and MQTT 5 §1.5. Each reader takes its value off the
// front of b and returns the rest; ok is false when b is too short. None allocates.

func readU16(b []byte) (v uint16, rest []byte, ok bool) {
	if len(b) < 2 {
		return 0, b, false
	}
	return uint16(b[0])<<8 | uint16(b[1]), b[2:], true
}

func readU32(b []byte) (v uint32, rest []byte, ok bool) {
	if len(b) < 4 {
		return 0, b, false
	}
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), b[4:], true
}

// readVBI reads a Variable Byte Integer (MQTT 5 §1.5.5, MQTT 3.1.1 §2.2.3): at most four bytes.
func readVBI(b []byte) (v int, rest []byte, ok bool) {
	mul := 1
	for i := 0; i < 4 && i < len(b); i++ {
		v += int(b[i]&0x7f) * mul
		if b[i]&0x80 == 0 {
			return v, b[i+1:], true
		}
		mul *= 128
	}
	return 0, b, false
}

// readBinary reads Binary Data (MQTT 5 §1.5.6): a two-byte length and that many bytes, aliasing b.
func readBinary(b []byte) (v, rest []byte, ok bool) {
	n, rest, ok := readU16(b)
	if !ok || len(rest) < int(n) {
		return nil, b, false
	}
	return rest[:n:n], rest[n:], true
}

// validString reports whether s is a well-formed UTF-8 Encoded String: valid UTF-8 without the
// encodings of surrogates (MQTT 5 §1.5.4 [MQTT-1.5.4-1], MQTT 3.1.1 §1.5.3 [MQTT-1.5.3-1]) and without
// U+0000 ([MQTT-1.5.4-2], [MQTT-1.5.3-2]). Go's UTF-8 decoder refuses surrogates and overlong forms.
func validString(s []byte) bool {
	return utf8.Valid(s) && bytes.IndexByte(s, 0) < 0
}

// readString reads a UTF-8 Encoded String, aliasing b. bad is true when it is there but not
// well-formed (see validString); ok is false when b is too short.
func readString(b []byte) (v, rest []byte, ok, bad bool) {
	v, rest, ok = readBinary(b)
	if !ok {
		return nil, b, false, false
	}
	return v, rest, true, !validString(v)
}

// hasWildcard reports whether a topic name contains a wildcard character ('+' or '#'), which topic
// names must not ([MQTT-3.3.2-2], MQTT 5 §4.7.1).
func hasWildcard(topic []byte) bool {
	return bytes.IndexByte(topic, '+') >= 0 || bytes.IndexByte(topic, '#') >= 0
}

func appendU16(dst []byte, v uint16) []byte { return append(dst, byte(v>>8), byte(v)) }

func appendU32(dst []byte, v uint32) []byte {
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendVBI appends v, 0 ≤ v ≤ maxVBI, as a Variable Byte Integer.
func appendVBI(dst []byte, v int) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

// vbiLen is how many bytes appendVBI writes for v.
func vbiLen(v int) int {
	switch {
	case v < 128:
		return 1
	case v < 16384:
		return 2
	case v < 2097152:
		return 3
	}
	return 4
}

// maxVBI is the largest value a Variable Byte Integer holds (268,435,455).
const maxVBI = 1<<28 - 1

// maxString is the longest UTF-8 Encoded String or Binary Data (65,535 bytes).
const maxString = 1<<16 - 1

// clipString cuts s to at most maxString bytes at a rune boundary, so that an over-long reason string
// is sent shortened rather than as a corrupt packet.
func clipString(s string) string {
	if len(s) <= maxString {
		return s
	}
	n := maxString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func appendString(dst []byte, s string) []byte {
	dst = appendU16(dst, uint16(len(s)))
	return append(dst, s...)
}
