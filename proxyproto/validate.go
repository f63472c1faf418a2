package proxyproto

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	pp "github.com/pires/go-proxyproto"
)

// Checks this package applies on top of go-proxyproto's parser. Each cites the
// section of the PROXY protocol specification (haproxy doc/proxy-protocol.txt)
// it enforces; validate_test.go has a named test for each.

// maxUniqueID is the longest PP2_TYPE_UNIQUE_ID value (spec 2.2.5).
const maxUniqueID = 128

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	zeroCRC    [4]byte // stands for the checksum field while it is computed
)

// validate turns a header go-proxyproto parsed from raw into a Header, or
// rejects it.
func validate(ph *pp.Header, raw []byte) (Header, error) {
	h := Header{Version: ph.Version}
	switch ph.Command {
	case pp.LOCAL:
		// Spec 2.2: for LOCAL "the receiver must accept this connection as
		// valid and must use the real connection endpoints and discard the
		// protocol block including the family". Its addresses and TLVs are
		// dropped; only a checksum among them is verified, since spec 2.2.3
		// has it cover the whole header whatever the command.
		h.Command = CommandLocal
		if h.Version == 2 {
			if err := checkLocalCRC(raw); err != nil {
				return Header{}, err
			}
		}
		return h, nil
	case pp.PROXY:
		h.Command = CommandProxy
	default:
		return Header{}, fmt.Errorf("%w: command %#x", ErrInvalidHeader, byte(ph.Command))
	}

	tp := ph.TransportProtocol
	switch {
	case tp.IsUnix():
		return Header{}, fmt.Errorf("%w: %w: AF_UNIX addresses carry no IP address", ErrInvalidHeader, ErrFamilyMismatch)
	case !tp.IsStream():
		return Header{}, fmt.Errorf("%w: %w: datagram transport in a header on a stream connection", ErrInvalidHeader, ErrFamilyMismatch)
	case !tp.IsIPv4() && !tp.IsIPv6():
		return Header{}, fmt.Errorf("%w: %w: family %#x", ErrInvalidHeader, ErrFamilyMismatch, byte(tp))
	}
	src, ok1 := addrPort(ph.SourceAddr)
	dst, ok2 := addrPort(ph.DestinationAddr)
	if !ok1 || !ok2 {
		return Header{}, fmt.Errorf("%w: %w: addresses are not TCP addresses", ErrInvalidHeader, ErrFamilyMismatch)
	}
	if tp.IsIPv4() && (!src.Addr().Is4() || !dst.Addr().Is4()) {
		return Header{}, fmt.Errorf("%w: %w: IPv6 address in an IPv4 header", ErrInvalidHeader, ErrFamilyMismatch)
	}
	if h.Version == 1 {
		if err := v1Family(raw, tp.IsIPv6()); err != nil {
			return Header{}, err
		}
	}
	h.Source, h.Destination = src, dst

	if h.Version == 2 {
		off := v2FixedLen + 12
		if tp.IsIPv6() {
			off = v2FixedLen + 36
		}
		hasSSL, err := checkTLVs(raw, off)
		if err != nil {
			return Header{}, err
		}
		if off < len(raw) {
			h.TLVs = TLVs{raw: string(raw[off:])}
		}
		if hasSSL {
			v, _ := h.TLVs.Lookup(TLVSSL)
			if _, err := parseSSL(v); err != nil {
				return Header{}, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
			}
		}
	}
	return h, nil
}

// v1Family enforces spec 2.1, "the advertised protocol family dictates what
// format to use": TCP4 addresses are dotted quads and TCP6 addresses are IPv6
// text (an IPv4-mapped ::ffff:a.b.c.d is IPv6 text). go-proxyproto checks this
// too unless its process-wide V1AcceptIPv4InTCP6 is set; this check does not
// depend on that variable.
func v1Family(raw []byte, six bool) error {
	// "PROXY TCPx src dst sport dport\r\n": fields 2 and 3 are the addresses.
	rest := raw
	for i := 0; i < 4; i++ {
		var f []byte
		f, rest, _ = bytes.Cut(rest, []byte{' '})
		if i >= 2 && (bytes.IndexByte(f, ':') >= 0) != six {
			return fmt.Errorf("%w: %w: v1 address %q does not match the family", ErrInvalidHeader, ErrFamilyMismatch, f)
		}
	}
	return nil
}

// checkTLVs walks the TLV vector of a v2 PROXY header that starts at raw[off:]
// and enforces: well-formed framing (spec 2.2: a TLV that runs past the
// header is malformed), UNIQUE_ID at most 128 bytes (spec 2.2.5), and, when a
// PP2_TYPE_CRC32C TLV is present, that it is 4 bytes, appears once, and equals
// the CRC32c (Castagnoli) of the whole header with the checksum field zeroed
// (spec 2.2.3: "If it is not [equal], the receiver MUST treat the TCP
// connection containing the header as invalid"). It reports whether there is
// a PP2_TYPE_SSL TLV, and refuses a second one (spec 2.2.6 describes one
// <client> and <verify> per connection; two would leave the receiver to guess
// which is the client's), for the caller to decode. It does not allocate
// unless it fails.
func checkTLVs(raw []byte, off int) (hasSSL bool, err error) {
	crcAt := -1
	for i := off; i < len(raw); {
		if len(raw)-i < 3 {
			return false, fmt.Errorf("%w: truncated TLV at byte %d", ErrInvalidHeader, i)
		}
		typ := TLVType(raw[i])
		l := int(binary.BigEndian.Uint16(raw[i+1 : i+3]))
		v := i + 3
		if v+l > len(raw) {
			return false, fmt.Errorf("%w: TLV %s at byte %d runs past the header", ErrInvalidHeader, typ, i)
		}
		switch typ {
		case TLVCRC32C:
			if crcAt >= 0 {
				return false, fmt.Errorf("%w: %w: two CRC32C TLVs", ErrInvalidHeader, ErrChecksum)
			}
			if l != 4 {
				return false, fmt.Errorf("%w: %w: CRC32C TLV is %d bytes, not 4", ErrInvalidHeader, ErrChecksum, l)
			}
			crcAt = v
		case TLVUniqueID:
			if l > maxUniqueID {
				return false, fmt.Errorf("%w: %w: %d bytes", ErrInvalidHeader, ErrUniqueIDTooLong, l)
			}
		case TLVSSL:
			if hasSSL {
				return false, fmt.Errorf("%w: %w: two SSL TLVs", ErrInvalidHeader, ErrInvalidSSL)
			}
			hasSSL = true
		}
		i = v + l
	}
	if crcAt >= 0 {
		want := binary.BigEndian.Uint32(raw[crcAt:])
		if got := headerCRC(raw, crcAt); got != want {
			return false, fmt.Errorf("%w: %w: header says %08x, computed %08x", ErrInvalidHeader, ErrChecksum, want, got)
		}
	}
	return hasSSL, nil
}

// headerCRC returns the CRC32c of raw with the 4 bytes at at taken as zero.
func headerCRC(raw []byte, at int) uint32 {
	c := crc32.Update(0, castagnoli, raw[:at])
	c = crc32.Update(c, castagnoli, zeroCRC[:])
	return crc32.Update(c, castagnoli, raw[at+4:])
}

// checkLocalCRC enforces spec 2.2.3 on a v2 LOCAL header: "If the checksum is
// provided as part of the PROXY header", its CRC32c must be that "of the
// whole PROXY header", with no exception for LOCAL. A PROXY header whose
// command byte was corrupted into LOCAL is caught by it, and would otherwise
// be taken for the load balancer's own connection.
//
// Where a LOCAL header's TLVs start is not certain, since the receiver must
// ignore the family: a sender may follow the family's address block (HAProxy
// sends UNSPEC, with none), or write no address block under a family that
// has one (AWS NLB health checks: family TCP4, then a CRC32C TLV and NOOP
// padding, kubernetes/kubernetes#57250). Both layouts are tried, the
// family's first; a layout whose TLVs do not run exactly to the end of the
// header holds none. A checksum that matches in either layout passes (a
// chance match is one in 2^32); one that is found and matches in neither, or
// that is not 4 bytes or appears twice, fails with [ErrChecksum]. Other TLVs
// of a LOCAL header are never looked at, so a LOCAL header without a
// checksum, or whose TLVs are not well formed, passes as the spec requires.
// It does not allocate unless it fails.
func checkLocalCRC(raw []byte) error {
	var failed error
	layouts := [2]int{v2FixedLen + v2AddrLen(raw[13]), v2FixedLen}
	for i, off := range layouts {
		if i > 0 && off == layouts[0] {
			break
		}
		at, framed, err := findCRC(raw, off)
		switch {
		case !framed || at < 0 && err == nil:
			continue
		case err == nil:
			want := binary.BigEndian.Uint32(raw[at:])
			got := headerCRC(raw, at)
			if got == want {
				return nil
			}
			err = fmt.Errorf("%w: %w: LOCAL header says %08x, computed %08x", ErrInvalidHeader, ErrChecksum, want, got)
		}
		if failed == nil {
			failed = err
		}
	}
	return failed
}

// findCRC walks the TLV vector that starts at raw[off:] and returns the
// offset of the value of its PP2_TYPE_CRC32C TLV, or -1; err reports a
// CRC32C TLV that is not 4 bytes or appears twice. framed is false when the
// TLVs do not run exactly to the end of raw.
func findCRC(raw []byte, off int) (at int, framed bool, err error) {
	at = -1
	if off > len(raw) {
		return -1, false, nil
	}
	for i := off; i < len(raw); {
		if len(raw)-i < 3 {
			return -1, false, nil
		}
		l := int(binary.BigEndian.Uint16(raw[i+1 : i+3]))
		v := i + 3
		if v+l > len(raw) {
			return -1, false, nil
		}
		if TLVType(raw[i]) == TLVCRC32C && err == nil {
			switch {
			case at >= 0:
				err = fmt.Errorf("%w: %w: two CRC32C TLVs in a LOCAL header", ErrInvalidHeader, ErrChecksum)
			case l != 4:
				err = fmt.Errorf("%w: %w: CRC32C TLV is %d bytes, not 4", ErrInvalidHeader, ErrChecksum, l)
			default:
				at = v
			}
		}
		i = v + l
	}
	return at, true, err
}
