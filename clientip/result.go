package clientip

import (
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
)

// Result is the answer of a [Resolver] with its provenance: the client, where
// it came from, and what each layer of the chain showed, so that one log line
// can print the whole path without parsing anything again. It is a small
// comparable value.
type Result struct {
	// Client is the resolved client address in canonical form: IPv4-mapped
	// addresses are unmapped and no zone is kept. It is the invalid Addr when
	// resolution failed, except with ErrMasqueraded, where it names the node.
	Client netip.Addr

	// Via is the trusted hop that reported Client: the proxy nearest to it,
	// also when Client is a masquerading node (ErrMasqueraded), whether the
	// node was the first untrusted hop or the outermost trusted one. It is
	// invalid for SourceSocket, when that hop is a Unix socket, and when
	// resolution failed on an unreadable hop. With ErrAllTrusted and
	// ErrTooFewHops it is the outermost hop the walk stepped over.
	Via netip.Addr

	// Peer is the socket layer as the kernel reported it (the zero value for a
	// Unix-domain socket).
	Peer netip.AddrPort

	// Proxy is the PROXY protocol layer: the source address the upstream's
	// header carried, or the zero value.
	Proxy netip.AddrPort

	// Header is the canonical name of the configured header when hop Hop is
	// one of its entries: the header Client came from, or the one in which
	// the walk stopped. It is "" when Hop is the socket peer or the PROXY
	// source, whether the header was absent or present but empty.
	Header string

	// Hop is Client's position in the chain counted from the socket peer (0):
	// 1 is the PROXY source when there is one, then the header's entries from
	// the right. On failure it is the position where the walk stopped.
	Hop int

	// Source is the layer Client came from; SourceNone on failure.
	Source Source

	// Masqueraded reports that Client is in Config.Masquerade: a node that
	// stands in for the real client, which is lost.
	Masqueraded bool
}

// IsValid reports whether r names a client (possibly a masquerading node; see
// Masqueraded).
func (r Result) IsValid() bool { return r.Client.IsValid() }

// ClientAddrPort returns the client with its port when the layer that
// delivered it carries one (socket and PROXY protocol); otherwise the port is 0.
func (r Result) ClientAddrPort() netip.AddrPort {
	switch r.Source {
	case SourceSocket:
		return netip.AddrPortFrom(r.Client, r.Peer.Port())
	case SourceProxyProtocol:
		return netip.AddrPortFrom(r.Client, r.Proxy.Port())
	}
	return netip.AddrPortFrom(r.Client, 0)
}

func peerString(p netip.AddrPort) string {
	if !p.Addr().IsValid() {
		return "unix"
	}
	return p.String()
}

// String returns a one-line description such as
// "203.0.113.7 from x-forwarded-for hop 2 via 10.0.0.3 (peer 10.0.0.1:4431)".
func (r Result) String() string {
	var b strings.Builder
	if r.Client.IsValid() {
		b.WriteString(r.Client.String())
	} else {
		b.WriteString("unresolved")
	}
	switch {
	case r.Source == SourceHeader:
		b.WriteString(" from ")
		b.WriteString(r.Header)
	case r.Source != SourceNone:
		b.WriteString(" from ")
		b.WriteString(r.Source.String())
	case r.Header != "":
		b.WriteString(" in ")
		b.WriteString(r.Header)
	}
	if r.Hop > 0 {
		b.WriteString(" hop ")
		b.WriteString(strconv.Itoa(r.Hop))
	}
	if r.Via.IsValid() {
		b.WriteString(" via ")
		b.WriteString(r.Via.String())
	}
	if r.Masqueraded {
		b.WriteString(" masqueraded")
	}
	b.WriteString(" (peer ")
	b.WriteString(peerString(r.Peer))
	if r.Proxy.IsValid() {
		b.WriteString(", proxy ")
		b.WriteString(r.Proxy.String())
	}
	b.WriteByte(')')
	return b.String()
}

// LogValue implements [slog.LogValuer]: a group with the client, its source,
// header, hop and via, the socket peer, the PROXY source, and the masquerade
// flag, leaving out what is empty.
func (r Result) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 8)
	if r.Client.IsValid() {
		attrs = append(attrs, slog.String("client", r.Client.String()))
	}
	attrs = append(attrs, slog.String("source", r.Source.String()))
	if r.Header != "" {
		attrs = append(attrs, slog.String("header", r.Header))
	}
	attrs = append(attrs, slog.Int("hop", r.Hop))
	if r.Via.IsValid() {
		attrs = append(attrs, slog.String("via", r.Via.String()))
	}
	attrs = append(attrs, slog.String("peer", peerString(r.Peer)))
	if r.Proxy.IsValid() {
		attrs = append(attrs, slog.String("proxy", r.Proxy.String()))
	}
	if r.Masqueraded {
		attrs = append(attrs, slog.Bool("masqueraded", true))
	}
	return slog.GroupValue(attrs...)
}
