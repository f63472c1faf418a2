package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Framing: how many bytes of a stream belong to the header, decided before
// anything is parsed, so that reads are bounded and no byte after the header
// is consumed by the parser.

const (
	sigV1 = "PROXY"
	sigV2 = "\r\n\r\n\x00\r\nQUIT\n"

	// maxV1Len is the longest v1 line, CRLF included (spec section 2.1).
	maxV1Len = 107

	// v2FixedLen is the signature, version/command, family and length bytes.
	v2FixedLen = 16

	// MaxV2Payload is the largest v2 address block plus TLVs a [Listener]
	// and [ParseHeader] accept: 4096 bytes, go-proxyproto's default limit. The
	// specification allows 65535; 4 KiB leaves room for an SSL TLV carrying a
	// client certificate while bounding what a connection can make us buffer.
	MaxV2Payload = 4096

	// MaxHeaderLen is the longest header a [Listener] reads.
	MaxHeaderLen = v2FixedLen + MaxV2Payload
)

type frameKind uint8

const (
	frameMore frameKind = iota // a prefix of a signature: need more bytes
	frameNone                  // cannot start a header
	frameV1
	frameV2
)

var (
	errV1TooLong = errors.New("v1 line has no CRLF within 107 bytes (spec 2.1)")
	errV2TooLong = errors.New("v2 length exceeds the 4096-byte limit")
)

// frame reports what b starts with. For frameV1 and frameV2, n is the length
// of the complete header, or 0 while more bytes are needed; err reports a
// header that can never become complete. It does not allocate.
func frame(b []byte) (k frameKind, n int, err error) {
	if len(b) == 0 {
		return frameMore, 0, nil
	}
	switch b[0] {
	case sigV1[0]:
		m := min(len(b), len(sigV1))
		if string(b[:m]) != sigV1[:m] {
			return frameNone, 0, nil
		}
		if m < len(sigV1) {
			return frameMore, 0, nil
		}
		if i := bytes.IndexByte(b[:min(len(b), maxV1Len)], '\n'); i >= 0 {
			return frameV1, i + 1, nil
		}
		if len(b) >= maxV1Len {
			return frameV1, 0, errV1TooLong
		}
		return frameV1, 0, nil
	case sigV2[0]:
		m := min(len(b), len(sigV2))
		if string(b[:m]) != sigV2[:m] {
			return frameNone, 0, nil
		}
		if m < len(sigV2) {
			return frameMore, 0, nil
		}
		if len(b) < v2FixedLen {
			return frameV2, 0, nil
		}
		l := int(binary.BigEndian.Uint16(b[14:16]))
		if l > MaxV2Payload {
			return frameV2, 0, errV2TooLong
		}
		if len(b) < v2FixedLen+l {
			return frameV2, 0, nil
		}
		return frameV2, v2FixedLen + l, nil
	}
	return frameNone, 0, nil
}
