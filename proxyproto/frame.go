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
	// accepts unless Config.MaxHeaderBytes says more: 4096 bytes,
	// go-proxyproto's default limit. The specification allows 65535; 4 KiB
	// leaves room for an SSL TLV with a common name or a small client
	// certificate while bounding what any connection can make the listener
	// buffer.
	MaxV2Payload = 4096

	// MaxHeaderLen is the longest header a [Listener] reads unless
	// Config.MaxHeaderBytes says more, and always from an untrusted peer;
	// every pending connection has a buffer of about this size.
	MaxHeaderLen = v2FixedLen + MaxV2Payload

	// MaxHeaderBytesLimit is the longest header the specification allows: a
	// v2 header whose 16-bit length field is 65535. It is the largest
	// Config.MaxHeaderBytes, and [ParseHeader] accepts headers up to it.
	MaxHeaderBytesLimit = v2FixedLen + 0xffff
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
	errV2TooLong = errors.New("v2 length exceeds the limit")
)

// frame reports what b starts with. For frameV1 and frameV2, n is the length
// of the complete header, or 0 while more bytes are needed; err reports a
// header that can never become complete, such as a v2 header whose length
// field is above maxV2. It does not allocate.
func frame(b []byte, maxV2 int) (k frameKind, n int, err error) {
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
		l := v2Length(b)
		if l > maxV2 {
			return frameV2, 0, errV2TooLong
		}
		if len(b) < v2FixedLen+l {
			return frameV2, 0, nil
		}
		return frameV2, v2FixedLen + l, nil
	}
	return frameNone, 0, nil
}

// v2Length returns the length field of a v2 header whose fixed part b holds.
func v2Length(b []byte) int { return int(binary.BigEndian.Uint16(b[14:16])) }

// v2AddrLen returns the length of the address block of a v2 header whose
// family byte is fam (spec 2.2): 12 for AF_INET, 36 for AF_INET6, 216 for
// AF_UNIX, 0 otherwise.
func v2AddrLen(fam byte) int {
	switch fam >> 4 {
	case 0x1:
		return 12
	case 0x2:
		return 36
	case 0x3:
		return 216
	}
	return 0
}
