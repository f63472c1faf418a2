// Package reading validates the telemetry readings devices send, over MQTT or
// HTTP, before anything reaches the sink.
//
// A reading is one JSON object that names its device and a sequence number the
// device never reuses:
//
//	{"device":"d7","seq":123,"ts":"2026-01-02T03:04:05Z","values":{"temp":21.5}}
//
// (device, seq) is the message id: MQTT packet ids are reused as soon as a
// message is acknowledged and restart with every connection, so they cannot
// tell a redelivered message from a new one; the device's own counter can.
// Any other members are kept as sent.
package reading

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDeviceLen is the longest device name accepted.
const MaxDeviceLen = 128

// DefaultMaxBytes is the largest payload accepted when the caller sets no limit.
const DefaultMaxBytes = 64 << 10

// MaxDepth is the deepest nesting of objects and arrays accepted, the
// reading's own object counting as one. The sink stores a reading one level
// deeper, inside its record, and readers of JSON bound nesting
// (encoding/json at 10,000, serde_json at 128, Ruby's JSON at 100): a deeper
// reading would be stored and acknowledged, yet its record could not be
// read back, not even by the sink when it reopens its file.
const MaxDepth = 64

// Errors from Parse, wrapped with details; test with errors.Is.
var (
	ErrTooLarge  = errors.New("reading: payload too large")
	ErrNotJSON   = errors.New("reading: payload is not valid JSON")
	ErrNotObject = errors.New("reading: payload is not a JSON object")
	ErrDevice    = errors.New(`reading: "device" must be a string of 1 to 128 letters, digits or ._:@-`)
	ErrSeq       = errors.New(`reading: "seq" must be a non-negative integer`)
	ErrTooDeep   = errors.New("reading: payload nested deeper than 64 objects and arrays")
	// ErrNamedTwice is a payload whose object has more than one member
	// that encoding/json takes for "device" (or "seq"): it keeps the last,
	// with case folded ("Device", "DEVICE"), while most readers of the
	// stored payload take the one spelt "device", or the first, or refuse it.
	ErrNamedTwice = errors.New(`reading: "device" or "seq" named more than once`)
)

// Reading is what the gateway needs from a valid payload.
type Reading struct {
	Device string
	Seq    uint64
	// Compact is the payload with insignificant white space removed, so that
	// it fits on one line of the sink. It is a fresh slice.
	Compact []byte
}

// Key returns the message id "device/seq".
func (r Reading) Key() string { return r.Device + "/" + strconv.FormatUint(r.Seq, 10) }

// Parse validates payload (at most maxBytes long; zero means DefaultMaxBytes)
// and returns its device, sequence number and compact form. The error says
// what is wrong and, for a syntax error, at which byte offset.
func Parse(payload []byte, maxBytes int) (Reading, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(payload) > maxBytes {
		return Reading{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), maxBytes)
	}
	if r, ok := parseFast(payload); ok {
		return r, nil
	}
	return parseSlow(payload)
}

// parseSlow is Parse with encoding/json, for every payload parseFast leaves
// to it: it decides the hard cases and says what is wrong.
func parseSlow(payload []byte) (Reading, error) {
	if i := invalidUTF8(payload); i >= 0 {
		// encoding/json takes it, and the sink would store it as it is:
		// JSON that readers in most other languages refuse (RFC 8259 §8.1).
		return Reading{}, fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrNotJSON, i)
	}
	var head struct {
		Device *string          `json:"device"`
		Seq    *json.RawMessage `json:"seq"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return Reading{}, fmt.Errorf("%w: %v at byte %d", ErrNotJSON, se, se.Offset)
		case firstByte(payload) != '{':
			return Reading{}, ErrNotObject
		case errors.As(err, &te) && te.Field == "device":
			return Reading{}, ErrDevice
		default:
			return Reading{}, fmt.Errorf("%w: %v", ErrNotObject, err)
		}
	}
	if firstByte(payload) != '{' { // null decodes into the struct without error
		return Reading{}, ErrNotObject
	}
	if tooDeep(payload) {
		return Reading{}, ErrTooDeep
	}
	if head.Device == nil || !validDevice(*head.Device) {
		return Reading{}, ErrDevice
	}
	if dev, seq := named(payload); dev > 1 || seq > 1 {
		return Reading{}, fmt.Errorf("%w: device %d times, seq %d times", ErrNamedTwice, dev, seq)
	}
	if head.Seq == nil {
		return Reading{}, fmt.Errorf("%w: missing", ErrSeq)
	}
	seq, err := strconv.ParseUint(string(*head.Seq), 10, 64)
	if err != nil {
		return Reading{}, fmt.Errorf("%w: got %.32s", ErrSeq, *head.Seq)
	}
	var buf bytes.Buffer
	buf.Grow(len(payload))
	if err := json.Compact(&buf, payload); err != nil { // cannot fail on input Unmarshal accepted
		return Reading{}, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	return Reading{Device: *head.Device, Seq: seq, Compact: buf.Bytes()}, nil
}

// invalidUTF8 returns the offset of the first byte of b that is not valid
// UTF-8, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// named counts the members of the object in payload (valid JSON) that
// encoding/json takes for "device" and for "seq": names equal to them under
// Unicode case folding, escapes decoded.
func named(payload []byte) (device, seq int) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if _, err := dec.Token(); err != nil { // '{'
		return 0, 0
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return device, seq
		}
		switch name, _ := t.(string); {
		case strings.EqualFold(name, "device"):
			device++
		case strings.EqualFold(name, "seq"):
			seq++
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return device, seq
		}
	}
	return device, seq
}

// tooDeep reports whether the valid JSON in b nests objects and arrays
// deeper than MaxDepth.
func tooDeep(b []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxDepth {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

func firstByte(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

func validDevice(s string) bool {
	if len(s) == 0 || len(s) > MaxDeviceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '@' || c == '-':
		default:
			return false
		}
	}
	return true
}
