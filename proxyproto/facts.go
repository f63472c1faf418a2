package proxyproto

import (
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// Facts is what one accepted connection tells about its layers: the socket
// (the load balancer, when there is one) and the PROXY protocol header it
// sent. It is a small comparable value; the zero value describes no
// connection.
type Facts struct {
	// Peer and Local are the socket's addresses as the kernel reports them,
	// IPv4-mapped addresses unmapped. Peer is the zero value for a Unix-domain
	// socket.
	Peer, Local netip.AddrPort

	// Version is the header's version, 1 or 2, or 0 when the connection had
	// no header or its header was not believed (a peer the listener does not
	// trust, under [UntrustedIgnore]).
	Version uint8

	// Command is CommandProxy or CommandLocal with a header, CommandNone
	// without.
	Command Command

	// Source and Destination are the header's addresses, IPv4-mapped
	// addresses unmapped: the client and the address it connected to. They
	// are the zero value unless Command is CommandProxy.
	Source, Destination netip.AddrPort

	// TLVs are the header's TLVs, only for a v2 PROXY command; never those of
	// a LOCAL header.
	TLVs TLVs

	// PeerUntrusted reports that the listener, when the connection arrived,
	// did not take Peer for a trusted proxy (its Trust's resolver then did
	// not trust Peer), or that Peer sent a header the listener discarded
	// under [UntrustedIgnore], after which the bytes are someone else's.
	// Transport passes it on, so clientip takes Peer for the client even if
	// the trust changes while the connection is open.
	PeerUntrusted bool

	// NoHeaderFromUpstream reports that Peer is one of the listener's
	// Config.Upstreams, the load balancers that speak PROXY (or a trusted
	// Unix-domain peer, which Upstreams does not narrow, of a listener with
	// Upstreams), and sent no header (allowed under [HeaderlessAllow]). What follows is what the load
	// balancer relayed as it came, so no trusted hop wrote any of it: a
	// forwarding header in it is its client's own claim. Transport passes it
	// on as clientip.Transport.ProxyLocal, so the walk ends at Peer
	// (clientip.ErrAllTrusted) instead of reading that header. A listener
	// without Upstreams cannot tell a PROXY load balancer from a proxy that
	// writes forwarding headers and never sets it.
	NoHeaderFromUpstream bool
}

// Transport returns exactly what clientip needs to resolve the connection:
// the socket peer, and the PROXY source when the upstream sent a PROXY
// command. A [Listener] only records a PROXY command from a trusted upstream,
// so clientip then reports the client with source "proxy-protocol" and keeps
// the load balancer as the socket layer. It does not allocate.
func (f Facts) Transport() clientip.Transport {
	t := clientip.Transport{Peer: f.Peer, PeerUntrusted: f.PeerUntrusted}
	switch f.Command {
	case CommandProxy:
		t.Proxy = f.Source
	case CommandLocal:
		t.ProxyLocal = true
	default:
		t.ProxyLocal = f.NoHeaderFromUpstream
	}
	return t
}

func addrPortString(p netip.AddrPort) string {
	if !p.IsValid() {
		return "unix"
	}
	return p.String()
}

// String returns a one-line description such as
// "peer 10.0.0.5:41234 v2 proxy 203.0.113.7:5555 -> 192.0.2.10:8883 tlvs authority,crc32c"
// or "peer 198.51.100.4:50000 no header".
func (f Facts) String() string {
	var b strings.Builder
	b.WriteString("peer ")
	b.WriteString(addrPortString(f.Peer))
	if f.Version == 0 {
		b.WriteString(" no header")
		if f.NoHeaderFromUpstream {
			b.WriteString(" from upstream")
		}
		return b.String()
	}
	b.WriteString(" v")
	b.WriteString(strconv.Itoa(int(f.Version)))
	b.WriteByte(' ')
	b.WriteString(f.Command.String())
	if f.Command == CommandProxy {
		b.WriteByte(' ')
		b.WriteString(f.Source.String())
		b.WriteString(" -> ")
		b.WriteString(f.Destination.String())
	}
	if f.TLVs.Len() > 0 {
		b.WriteString(" tlvs ")
		b.WriteString(f.TLVs.String())
	}
	return b.String()
}

// LogValue implements [slog.LogValuer]: a group with the socket peer and
// local address, the header's version and command, its source and
// destination, the authority and unique id TLVs, and
// no_header_from_upstream=true for a listed upstream that sent no header,
// leaving out what is empty.
func (f Facts) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs,
		slog.String("peer", addrPortString(f.Peer)),
		slog.String("local", addrPortString(f.Local)),
		slog.Int("version", int(f.Version)),
		slog.String("command", f.Command.String()))
	if f.Command == CommandProxy {
		attrs = append(attrs,
			slog.String("source", f.Source.String()),
			slog.String("destination", f.Destination.String()))
	}
	if v, ok := f.TLVs.Authority(); ok {
		attrs = append(attrs, slog.String("authority", v))
	}
	if v, ok := f.TLVs.UniqueID(); ok {
		attrs = append(attrs, slog.String("unique_id", strconv.Quote(v)))
	}
	if f.NoHeaderFromUpstream {
		attrs = append(attrs, slog.Bool("no_header_from_upstream", true))
	}
	return slog.GroupValue(attrs...)
}
