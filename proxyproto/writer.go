package proxyproto

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"

	pp "github.com/pires/go-proxyproto"
)

// Format returns h in its wire form. A PROXY header needs valid Source and
// Destination without zones; when both are IPv4 (or IPv4-mapped) it is a
// TCP4 header, otherwise TCP6 with any IPv4 side written IPv4-mapped, as
// HAProxy does. A LOCAL header is "PROXY UNKNOWN\r\n" in v1 and carries no
// addresses in v2. TLVs and AddChecksum need Version 2; the TLVs are written
// as given, except that the value of the first 4-byte PP2_TYPE_CRC32C field
// among them is the checksum of the header written (spec 2.2.3), so a parsed
// header is written with a checksum of its own. Errors wrap
// [ErrInvalidHeaderValue].
func (h Header) Format() ([]byte, error) {
	if h.Version != 1 && h.Version != 2 {
		return nil, fmt.Errorf("%w: version %d", ErrInvalidHeaderValue, h.Version)
	}
	if h.Version == 1 && (h.TLVs.Len() > 0 || h.AddChecksum) {
		return nil, fmt.Errorf("%w: TLVs need version 2", ErrInvalidHeaderValue)
	}
	ph := &pp.Header{Version: h.Version}
	switch h.Command {
	case CommandProxy:
		s, d := h.Source, h.Destination
		if !s.IsValid() || !d.IsValid() || s.Addr().Zone() != "" || d.Addr().Zone() != "" {
			return nil, fmt.Errorf("%w: a PROXY header needs a source and a destination without zones", ErrInvalidHeaderValue)
		}
		sa, da := s.Addr().Unmap(), d.Addr().Unmap()
		ph.Command = pp.PROXY
		if sa.Is4() && da.Is4() {
			ph.TransportProtocol = pp.TCPv4
		} else {
			ph.TransportProtocol = pp.TCPv6
			sa, da = netipTo16(sa), netipTo16(da)
		}
		ph.SourceAddr = &net.TCPAddr{IP: sa.AsSlice(), Port: int(s.Port())}
		ph.DestinationAddr = &net.TCPAddr{IP: da.AsSlice(), Port: int(d.Port())}
	case CommandLocal:
		ph.Command = pp.LOCAL
		ph.TransportProtocol = pp.UNSPEC
	default:
		return nil, fmt.Errorf("%w: command %s", ErrInvalidHeaderValue, h.Command)
	}
	b, err := ph.Format()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHeaderValue, err)
	}
	if h.Version == 1 {
		return b, nil
	}
	// go-proxyproto wrote the fixed part and the address block; append the
	// TLVs as given (byte for byte, padding included) and fix the length.
	// A CRC32C field among them (a parsed header's, verified for the header
	// it came in) is filled with this header's checksum, as spec 2.2.3 asks
	// of a sender; AddChecksum adds one only where there is none.
	crcAt := -1
	if at := crcField(h.TLVs.raw); at >= 0 {
		crcAt = len(b) + at
	}
	b = append(b, h.TLVs.raw...)
	if h.AddChecksum && crcAt < 0 {
		b = append(b, byte(TLVCRC32C), 0, 4, 0, 0, 0, 0)
		crcAt = len(b) - 4
	}
	n := len(b) - v2FixedLen
	if n > 0xffff {
		return nil, fmt.Errorf("%w: v2 header is %d bytes long, more than 65535", ErrInvalidHeaderValue, n)
	}
	binary.BigEndian.PutUint16(b[14:16], uint16(n))
	if crcAt >= 0 {
		binary.BigEndian.PutUint32(b[crcAt:], headerCRC(b, crcAt))
	}
	return b, nil
}

// crcField returns the offset in the TLV vector raw of the value of its first
// 4-byte PP2_TYPE_CRC32C field, or -1.
func crcField(raw string) int {
	for i := 0; len(raw)-i >= 3; {
		l := int(raw[i+1])<<8 | int(raw[i+2])
		if raw[i] == byte(TLVCRC32C) && l == 4 && len(raw)-i >= 7 {
			return i + 3
		}
		i += 3 + l
	}
	return -1
}

// WriteHeader writes h to w in one Write call, as the specification asks of
// senders ("the header must be sent at once"). See [Header.Format] for what h
// may hold.
func WriteHeader(w io.Writer, h Header) error {
	b, err := h.Format()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// DialContext connects to address with d (nil means a zero [net.Dialer]) and
// writes h before returning the connection, for clients, test tools and small
// load balancers that speak to a PROXY protocol receiver. When h is a PROXY
// header with no Source or Destination, the connection's own local and remote
// addresses fill them in, without their zones (a link-local address's
// interface), which a header cannot carry.
func DialContext(ctx context.Context, d *net.Dialer, network, address string, h Header) (net.Conn, error) {
	if d == nil {
		d = new(net.Dialer)
	}
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if h.Command == CommandProxy {
		if !h.Source.IsValid() {
			h.Source = unzoned(socketAddrPort(c.LocalAddr()))
		}
		if !h.Destination.IsValid() {
			h.Destination = unzoned(socketAddrPort(c.RemoteAddr()))
		}
	}
	if err := WriteHeader(c, h); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// unzoned returns p without its address's zone.
func unzoned(p netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(p.Addr().WithZone(""), p.Port())
}
