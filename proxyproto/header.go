package proxyproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"

	pp "github.com/pires/go-proxyproto"
)

// Header is one PROXY protocol header: what [ParseHeader] returns after
// validation and what [WriteHeader] sends. It is a small comparable value.
//
// A parsed Header is normalised: IPv4-mapped IPv6 addresses are unmapped
// (HAProxy sends ::ffff:a.b.c.d in a TCP6 header when one side is IPv4), and a
// LOCAL header has no addresses and no TLVs, since the specification says its
// protocol block is discarded.
type Header struct {
	// Version is 1 (text) or 2 (binary).
	Version uint8

	// Command is CommandProxy or CommandLocal.
	Command Command

	// Source and Destination are the original connection's client and
	// server addresses; the zero value for LOCAL.
	Source, Destination netip.AddrPort

	// TLVs are a v2 header's type-length-value fields, as sent (including
	// any PP2_TYPE_CRC32C field, already verified when parsed; the writer
	// fills that field with the checksum of the header it writes).
	TLVs TLVs

	// AddChecksum makes the writer append a PP2_TYPE_CRC32C TLV computed over
	// the whole header (v2 only), unless TLVs already hold one. ParseHeader
	// never sets it: a checksum that was present and verified stays in TLVs.
	AddChecksum bool
}

// ParseHeader parses and validates the PROXY protocol header at the start of
// b and reports its length. b must hold the whole header; bytes after it are
// not looked at. It applies every check a [Listener] applies to a trusted
// upstream's header, and nothing about trust: the caller decides whether the
// sender may speak for its clients. Since b already holds the header, it
// accepts any length the specification allows (up to [MaxHeaderBytesLimit]);
// a Listener's limit is Config.MaxHeaderBytes.
//
// Errors wrap [ErrNoHeader] when b does not start with a signature,
// [ErrIncomplete] when b ends inside the header, and [ErrInvalidHeader]
// (possibly with [ErrChecksum], [ErrUniqueIDTooLong], [ErrFamilyMismatch] or
// [ErrInvalidSSL]) when the header breaks a rule. It is safe for concurrent
// use and allocates a few small objects per call (go-proxyproto's parser)
// plus the TLV bytes.
func ParseHeader(b []byte) (Header, int, error) {
	k, n, err := frame(b, MaxHeaderBytesLimit-v2FixedLen)
	switch {
	case k == frameNone:
		return Header{}, 0, ErrNoHeader
	case err != nil:
		return Header{}, 0, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	case n == 0:
		return Header{}, 0, ErrIncomplete
	}
	h, err := parseFrame(b[:n])
	if err != nil {
		return Header{}, 0, err
	}
	return h, n, nil
}

// parser feeds one framed header to go-proxyproto's parser. The buffer is
// large enough for any header go-proxyproto is given, so it never sees a
// short read.
type parser struct {
	src bytes.Reader
	br  *bufio.Reader
	v2  [v2FixedLen + 216]byte // a v2 header's fixed part and address block
}

var parserPool = sync.Pool{New: func() any {
	p := new(parser)
	p.br = bufio.NewReaderSize(&p.src, len(p.v2))
	return p
}}

// parseFrame parses and validates raw, which frame reported as one complete
// header. go-proxyproto is given a v2 header's fixed part and address block
// only, with the length field cut to match: this package validates the TLVs
// itself (validate), and go-proxyproto would refuse a length above its
// process-wide MaxV2HeaderSize and copy the TLVs once more.
func parseFrame(raw []byte) (Header, error) {
	p := parserPool.Get().(*parser)
	in := raw
	if len(raw) > v2FixedLen && raw[0] == sigV2[0] {
		if a := v2AddrLen(raw[13]); len(raw)-v2FixedLen > a {
			in = p.v2[:copy(p.v2[:], raw[:v2FixedLen+a])]
			binary.BigEndian.PutUint16(in[14:16], uint16(a))
		}
	}
	p.src.Reset(in)
	p.br.Reset(&p.src)
	ph, err := pp.Read(p.br)
	left := p.br.Buffered() + p.src.Len()
	p.src.Reset(nil)
	parserPool.Put(p)
	if err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	if left != 0 {
		return Header{}, fmt.Errorf("%w: parser stopped %d bytes before the end of the header", ErrInvalidHeader, left)
	}
	return validate(ph, raw)
}

// addrPort converts an address go-proxyproto decoded, unmapping IPv4-mapped
// addresses and rejecting what is not a TCP address.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok || t == nil || t.Zone != "" || t.Port < 0 || t.Port > 0xffff {
		return netip.AddrPort{}, false
	}
	ip, ok := netip.AddrFromSlice(t.IP)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(t.Port)), true
}

// netipTo16 returns a as a 16-byte address (IPv4 becomes IPv4-mapped).
func netipTo16(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// socketAddrPort returns a socket address as an AddrPort, unmapped (a zone is kept);
// the zero value for addresses without an IP (Unix sockets).
func socketAddrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UnixAddr, nil:
		// A Unix socket's address is a path the client chose when it bound
		// its socket, which can read "127.0.0.1:9": it never names an IP peer.
		return netip.AddrPort{}
	}
	// Another net.Addr type is read as an IP address only if its network is
	// an IP one, for the same reason.
	if !ipNetwork(a.Network()) {
		return netip.AddrPort{}
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// ipNetwork reports whether network names an IP transport ("tcp", "udp6", …).
func ipNetwork(network string) bool {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "ip", "ip4", "ip6":
		return true
	}
	return false
}
