package clientip

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/internal/enumtext"
)

// Verdict is what the walk made of one hop of the chain, as [Resolver.Explain]
// reports it.
type Verdict uint8

const (
	// VerdictNone is the zero Verdict.
	VerdictNone Verdict = iota
	// VerdictTrusted: a trusted proxy (in hop-count mode, one of the
	// Config.TrustedHops counted). The walk believed the layer it delivered
	// and stepped outward.
	VerdictTrusted
	// VerdictClient: the first hop the walk did not step over: the client.
	VerdictClient
	// VerdictMasqueraded: the walk ended on this hop, a masquerading node
	// (Config.Masquerade): [ErrMasqueraded].
	VerdictMasqueraded
	// VerdictFailed: the walk stopped here with an error; Step.Reason says
	// which.
	VerdictFailed
	// VerdictUnread: beyond the hop where the walk stopped. Nothing trusted
	// vouches for it: whoever sent the request may have written it.
	VerdictUnread
)

var verdictNames = []string{
	VerdictNone:        "none",
	VerdictTrusted:     "trusted",
	VerdictClient:      "client",
	VerdictMasqueraded: "masqueraded",
	VerdictFailed:      "failed",
	VerdictUnread:      "unread",
}

// String returns the Verdict's name: "none", "trusted", "client",
// "masqueraded", "failed" or "unread".
func (v Verdict) String() string { return enumtext.String(verdictNames, v, "Verdict") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (v Verdict) MarshalText() ([]byte, error) {
	return enumtext.Marshal(verdictNames, v, "Verdict", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (v *Verdict) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(v, verdictNames, text, "Verdict", errUnknownName)
}

// Step is one hop of the chain as [Resolver.Explain] reports it.
type Step struct {
	// Hop is the hop's position counted from the socket peer (0), as in
	// [Result].Hop: the PROXY source, when there is one, is 1, then the
	// configured header's entries from the right. Every line of a
	// single-address header is at the one position such a header has.
	Hop int

	// Layer is where the hop comes from: [SourceSocket],
	// [SourceProxyProtocol], or the configured header's Source.
	Layer Source

	// Header is the configured header's canonical name for a header entry,
	// "" for the socket and PROXY layers.
	Header string

	// Entry is the text of a header entry as it appeared, without the white
	// space around it; a Forwarded entry is the whole element. For the
	// socket layer it is the unreadable RemoteAddr that
	// [Resolver.ExplainRequest] met, if any; otherwise "" for the socket and
	// PROXY layers. It may be attacker-controlled.
	Entry string

	// Addr is the hop's address in canonical form: as the walk read it for
	// a hop it read, and as the same parser reads it for an unread entry. It
	// is invalid for a Unix-domain peer and for an entry that holds no
	// address (malformed, "unknown", obfuscated).
	Addr netip.Addr

	// Port is the port of the socket and PROXY layers; 0 for header entries.
	Port uint16

	// Verdict is what the walk made of the hop.
	Verdict Verdict

	// Reason is why the walk stopped on this hop: set with VerdictFailed
	// and VerdictMasqueraded, ReasonNone otherwise.
	Reason Reason
}

// Explanation is one resolution told hop by hop, as [Resolver.Explain]
// recorded it.
type Explanation struct {
	// Steps holds the hops in chain order, from the socket peer outward:
	// every hop the walk read, the one where it stopped, and the configured
	// header's entries beyond it (VerdictUnread), up to a bound of 66 header
	// entries. A header the walk refused as too large is not listed entry by
	// entry.
	Steps []Step

	// Omitted counts the configured header's entries beyond the bound, not
	// listed in Steps.
	Omitted int

	// PeerUntrusted is the transport's [Transport].PeerUntrusted: the layer
	// that accepted the connection judged the socket peer not to be a
	// trusted proxy, so the walk took it for the client whatever the
	// resolver says of its address.
	PeerUntrusted bool

	// Result and Err are exactly what [Resolver.Resolve] (or
	// [Resolver.ResolveRequest]) returns for the same input.
	Result Result
	Err    error
}

// Reason returns the kind of x.Err, [ReasonNone] when resolution succeeded.
func (x Explanation) Reason() Reason { return ReasonOf(x.Err) }

// maxEntriesListed bounds the header entries an Explanation lists: two more than
// the longest walk, so that the entry a too-long walk stopped on and the one
// beyond it still show.
const maxEntriesListed = maxHopsLimit + 2

// trace collects the header entries a walk reads; see Resolver.trace.
type trace struct{ steps []Step }

func (t *trace) read(pos int, entry string, a netip.Addr) {
	t.steps = append(t.steps, Step{Hop: pos, Entry: entry, Addr: a})
}

// Explain resolves like [Resolver.Resolve] and tells how: each hop of the
// chain with its address, the walk's verdict on it and, where the walk
// stopped, why; and the header entries the walk never read, which whoever
// sent the request may have forged. Its Result and Err are those Resolve
// returns for the same t and h: Explain runs the same walk, on a copy of r
// that records each header entry the walk reads (the trace turns off two
// shortcuts, the trust tests on X-Forwarded-For's dotted quads and plain
// IPv6 entries as the walk parses them, whose equivalence with the general
// path the package's tests check on every fuzz input).
//
// Explain is for diagnosis, not for every request: it allocates, and the
// Explanation holds header text a client wrote. It is safe for concurrent
// use.
func (r *Resolver) Explain(t Transport, h http.Header) Explanation {
	x := r.explain(h, func(rc *Resolver, res *Result) error { return rc.resolve(res, &t, h) })
	x.PeerUntrusted = t.PeerUntrusted
	return x
}

// ExplainRequest is [Resolver.Explain] for an HTTP request, resolving like
// [Resolver.ResolveRequest]: the same transport (from the context, or
// req.RemoteAddr) and the same answer. It never modifies req.
func (r *Resolver) ExplainRequest(req *http.Request) Explanation {
	x := r.explain(req.Header, func(rc *Resolver, res *Result) error { return rc.resolveRequest(res, req) })
	t, _ := TransportFromContext(req.Context())
	x.PeerUntrusted = t.PeerUntrusted
	return x
}

func (r *Resolver) explain(h http.Header, run func(*Resolver, *Result) error) Explanation {
	rc := *r
	rc.trace, rc.quads, rc.quads6 = new(trace), false, false
	var x Explanation
	x.Err = run(&rc, &x.Result)
	x.Steps, x.Omitted = r.steps(x.Result, x.Err, rc.trace.steps, h)
	return x
}

// steps lays out the hops of a finished walk: the transport layers, then the
// header's entries, those the walk read as it read them, and gives each its
// verdict from where the walk stopped.
func (r *Resolver) steps(res Result, err error, read []Step, h http.Header) ([]Step, int) {
	reason := ReasonOf(err)
	var value string // the offending entry or RemoteAddr, if any
	if ce, ok := errors.AsType[*ChainError](err); ok {
		value = ce.Value
	}
	steps := []Step{{Layer: SourceSocket, Addr: canonicalHop(res.Peer.Addr()), Port: res.Peer.Port()}}
	base := 0
	if res.Proxy.Addr().IsValid() {
		base = 1
		steps = append(steps, Step{Hop: 1, Layer: SourceProxyProtocol, Addr: canonicalHop(res.Proxy.Addr()), Port: res.Proxy.Port()})
	}
	var entries []string
	omitted := 0
	if r.kind != headerNone && reason != ReasonHeaderTooLarge {
		entries, omitted = r.entries(h[r.header])
	}
	for i, e := range entries {
		pos := base + 1 + i
		if r.kind == headerSingle {
			pos = base + 1
		}
		s := Step{Hop: pos, Layer: r.source, Header: r.header, Entry: e}
		if len(read) > 0 && read[0].Hop == pos && read[0].Entry == e {
			s.Addr, read = read[0].Addr, read[1:]
		} else {
			s.Addr = r.parseEntry(e)
		}
		steps = append(steps, s)
	}

	stop := res.Hop
	found := false
	for i := range steps {
		s := &steps[i]
		switch {
		case s.Hop < stop:
			s.Verdict = VerdictTrusted
		case s.Hop > stop:
			s.Verdict = VerdictUnread
		default:
			found = true
			s.Verdict, s.Reason = verdictAt(reason)
			if s.Entry == "" && value != "" && s.Layer == SourceSocket {
				s.Entry = value // an unreadable RemoteAddr
			}
		}
	}
	if !found {
		// The walk stopped on a hop not listed: beyond the bound, or in a
		// header refused whole (too large, a Forwarded quote left open).
		s := Step{Hop: stop, Layer: r.source, Header: r.header, Entry: value}
		s.Verdict, s.Reason = verdictAt(reason)
		at := len(steps)
		for at > 0 && steps[at-1].Hop > stop {
			at--
		}
		steps = append(steps[:at], append([]Step{s}, steps[at:]...)...)
	}
	return steps, omitted
}

// verdictAt returns the verdict on the hop where a walk that ended with
// reason stopped.
func verdictAt(reason Reason) (Verdict, Reason) {
	switch reason {
	case ReasonNone:
		return VerdictClient, ReasonNone
	case ReasonMasqueraded:
		return VerdictMasqueraded, reason
	case ReasonAllTrusted, ReasonTooFewHops:
		// The walk stepped over every hop, this one too, and ran out.
		return VerdictTrusted, ReasonNone
	}
	return VerdictFailed, reason
}

// entries returns the entries of the configured header, lines, from the
// right, as the walk counts them, up to maxEntriesListed, and how many more there
// are. A single-address header's entries are its lines.
func (r *Resolver) entries(lines []string) ([]string, int) {
	var out []string
	total := 0
	switch r.kind {
	case headerXFF:
		for li := len(lines) - 1; li >= 0; li-- {
			l := lines[li]
			for end := len(l); end >= 0; {
				i := strings.LastIndexByte(l[:end], ',')
				e := trimOWS(l[i+1 : end])
				end = i
				if e == "" {
					continue
				}
				if total++; len(out) < maxEntriesListed {
					out = append(out, e)
				}
			}
		}
	case headerForwarded:
		var ring fwdRing
		if !ring.scan(lines) {
			return nil, 0 // no element boundary can be known
		}
		total = ring.n
		for k := 0; k < min(ring.n, maxHopsLimit, maxEntriesListed); k++ {
			out = append(out, ring.element(lines, k))
		}
	case headerSingle:
		for _, l := range lines {
			if total++; len(out) < maxEntriesListed {
				out = append(out, trimOWS(l))
			}
		}
	}
	return out, total - len(out)
}

// parseEntry returns the address an entry of the configured header holds,
// read as the walk would read it (0.0.0.0 and :: included), or the invalid
// Addr.
func (r *Resolver) parseEntry(e string) netip.Addr {
	var a netip.Addr
	var f Reason
	switch {
	case e == "":
		return netip.Addr{}
	case r.kind == headerForwarded:
		a, f = parseForwardedElement(e)
	default:
		a, f = parseListAddr(e)
	}
	if f != ReasonNone && f != ReasonUnspecified {
		return netip.Addr{}
	}
	return a
}
