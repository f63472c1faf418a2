package proxyproto

import (
	"log/slog"
	"net/netip"
	"time"
)

// Reason classifies why a [Listener] refused a connection, for metrics labels
// and log fields. Each Reason matches one sentinel error.
type Reason uint8

const (
	// ReasonNoHeader: a trusted upstream sent no header under
	// [HeaderlessRefuse] ([ErrNoHeader]).
	ReasonNoHeader Reason = iota
	// ReasonUntrusted: a peer the listener does not trust sent a header under
	// [UntrustedClose] ([ErrUntrustedHeader]).
	ReasonUntrusted
	// ReasonTimeout: the header, or the first bytes of a silent client, did
	// not arrive within ReadHeaderTimeout ([ErrTimeout]).
	ReasonTimeout
	// ReasonIncomplete: the connection ended inside the header ([ErrIncomplete]).
	ReasonIncomplete
	// ReasonInvalid: the header broke a rule ([ErrInvalidHeader]).
	ReasonInvalid

	numReasons
)

var reasonNames = []string{"no_header", "untrusted_header", "timeout", "incomplete", "invalid"}

// String returns "no_header", "untrusted_header", "timeout", "incomplete" or
// "invalid".
func (r Reason) String() string { return enumString(r, reasonNames, "Reason") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (r Reason) MarshalText() ([]byte, error) { return enumMarshal(r, reasonNames, "Reason") }

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (r *Reason) UnmarshalText(text []byte) error {
	return enumUnmarshal(r, text, reasonNames, "Reason")
}

// Rejection describes one connection a [Listener] closed instead of handing
// it to Accept, with what was known about it. It is passed to Config.OnReject.
type Rejection struct {
	// Peer and Local are the socket's addresses (Peer is the zero value for a
	// Unix-domain socket).
	Peer, Local netip.AddrPort

	// Trusted reports whether Peer is a trusted upstream.
	Trusted bool

	// Version is the header version whose signature was seen, or 0.
	Version uint8

	// Reason classifies Err.
	Reason Reason

	// Err wraps the sentinel matching Reason with details, such as which rule
	// the header broke.
	Err error

	// Duration is the time from accepting the connection to refusing it.
	Duration time.Duration
}

// LogValue implements [slog.LogValuer]: a group with the peer and local
// addresses, whether the peer is trusted, the version, the reason, the error
// and the duration. The error is left out when Err is nil, as in a Rejection
// the caller built; any Rejection, the zero value included, can be logged.
func (r Rejection) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("peer", addrPortString(r.Peer)),
		slog.String("local", addrPortString(r.Local)),
		slog.Bool("trusted", r.Trusted),
		slog.Int("version", int(r.Version)),
		slog.String("reason", r.Reason.String()))
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", r.Err.Error()))
	}
	attrs = append(attrs, slog.Duration("duration", r.Duration))
	return slog.GroupValue(attrs...)
}

// Stats are a [Listener]'s counters since it was created.
type Stats struct {
	// Accepted counts connections handed to Accept.
	Accepted uint64
	// Proxied counts accepted connections whose header was a PROXY command.
	Proxied uint64
	// Local counts accepted connections whose header was a LOCAL command.
	Local uint64
	// Ignored counts headers from untrusted peers discarded under
	// [UntrustedIgnore]; those connections are in Accepted too.
	Ignored uint64
	// Rejected counts refused connections by [Reason]: those whose first
	// bytes were read and judged, each reported to Config.OnReject unless
	// counted in Unreported.
	Rejected [numReasons]uint64
	// Unreported counts the rejections, among Rejected, not reported to
	// Config.OnReject because Config.MaxOnReject calls were already running.
	Unreported uint64
	// Shed counts connections from untrusted peers closed on arrival, unread
	// and not reported to Config.OnReject, because a pending budget was
	// spent, by [ShedReason]. They are not in Rejected.
	Shed [numShedReasons]uint64
	// Pending is the number of connections now waiting for their header or
	// for Accept. Accept frees a connection's slot before it returns it, so
	// Stats called after Accept returns counts that connection in Accepted
	// and not here.
	Pending int
	// PendingUntrusted is the part of Pending from untrusted peers, bounded
	// by Config.MaxPendingUntrusted; the rest is from trusted proxies,
	// bounded by Config.MaxPending.
	PendingUntrusted int
	// AcceptErrors counts errors from the inner listener's Accept other than
	// those caused by Close: temporary ones (such as running out of file
	// descriptors), after which it backed off and retried, and the permanent
	// one, if any, that stopped it. Each was reported to
	// Config.OnAcceptError.
	AcceptErrors uint64
}

// TotalRejected returns the sum of Rejected.
func (s Stats) TotalRejected() uint64 {
	var n uint64
	for _, v := range s.Rejected {
		n += v
	}
	return n
}

// TotalShed returns the sum of Shed.
func (s Stats) TotalShed() uint64 {
	var n uint64
	for _, v := range s.Shed {
		n += v
	}
	return n
}
