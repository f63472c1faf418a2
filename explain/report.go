package explain

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// Schema is the value of [Report].Schema: the name and version of the JSON
// document this package writes. Fields may be added within a version; none
// is renamed, retyped or removed.
const Schema = "sourceip.explain/v1"

// Limits on what a Report copies from a request, so that an explanation of a
// hostile request stays small.
const (
	maxText     = 256 // bytes of one header entry, header line or TLV value
	maxLines    = 8   // lines of one header
	maxPrefixes = 64  // prefixes of one configured set
	maxTLVs     = 16
)

// Report explains one resolution: the configuration in force, every layer
// of the request or connection, the walk hop by hop, and the answer. It is
// the JSON document the [Handler] serves (see the package documentation for
// its fields) and decodes from it unchanged, so that a client such as
// cmd/sourceip can render a fetched report with [Report.WriteText].
//
// A Report holds what a client wrote (header entries, the request path) and
// the trust configuration: show it to operators only.
type Report struct {
	// Schema is [Schema].
	Schema string `json:"schema"`
	// Kind is "request" for an HTTP request, "connection" for a connection
	// accepted through middleware.NewListener, "chain" for layers given
	// directly ([ReportFor]).
	Kind string `json:"kind"`
	// Request describes the HTTP request; nil for a connection.
	Request *RequestInfo `json:"request,omitempty"`
	// Connection describes the connection; nil for a request.
	Connection *ConnInfo `json:"connection,omitempty"`
	// Summary is the answer in one line, as [clientip.Result.String]
	// writes it, followed by the error when there is one.
	Summary string `json:"summary"`
	// Config is the resolver configuration the walk ran under.
	Config ConfigInfo `json:"config"`
	// Socket is the socket layer.
	Socket SocketInfo `json:"socket"`
	// Proxy is the PROXY protocol header the connection carried, with
	// Version 0 when it carried none; nil when nothing is known of it (an
	// HTTP server without proxyproto.ConnContext, a connection from another
	// listener).
	Proxy *ProxyInfo `json:"proxy_protocol,omitempty"`
	// Steps is the chain, from the socket peer outward, with the walk's
	// verdict on each hop.
	Steps []Step `json:"steps"`
	// OmittedEntries counts the configured header's entries beyond those
	// listed in Steps.
	OmittedEntries int `json:"omitted_entries,omitempty"`
	// Headers lists every forwarding header the request carries, read or
	// not.
	Headers []HeaderInfo `json:"headers,omitempty"`
	// Result is the answer, as [clientip.Result] holds it, except that the
	// socket peer's IPv6 zone, when it is not short UTF-8 text (a RemoteAddr
	// that other middleware rewrote), is cut as a header entry is.
	Result ResultInfo `json:"result"`
	// Error is the failure, nil when a client was resolved.
	Error *ErrorInfo `json:"error,omitempty"`
	// Masqueraded reports that the answer is a masquerading node
	// (Result.Masqueraded).
	Masqueraded bool `json:"masqueraded"`
	// Recorded is, for a connection, the resolution recorded when it was
	// accepted, when it differs from the walk above (the trust
	// configuration changed since).
	Recorded *RecordedInfo `json:"recorded,omitempty"`
	// Policy compares the request with what trafficpolicy expects of the
	// configured Service policy; nil when none is configured.
	Policy *PolicyInfo `json:"policy,omitempty"`
	// Notes are observations for people, one sentence each.
	Notes []string `json:"notes,omitempty"`
}

// Resolved reports whether the walk named a client that is not a
// masquerading node.
func (r *Report) Resolved() bool { return r.Error == nil }

// RequestInfo describes an HTTP request. Its fields are what the client
// sent.
type RequestInfo struct {
	Method string `json:"method"`
	Host   string `json:"host"`
	Path   string `json:"path"`
	Proto  string `json:"proto"`
}

// ConnInfo describes a connection.
type ConnInfo struct {
	// ID is the caller's name for the connection (a gateway's connection or
	// client id), or "".
	ID string `json:"id,omitempty"`
	// Remote and Local are the connection's addresses as it reports them.
	Remote string `json:"remote"`
	Local  string `json:"local"`
}

// ConfigInfo is the resolver configuration in force, as
// [clientip.Resolver.Config] returns it. Each prefix list holds at most 64
// prefixes; the count fields say how many the set has.
type ConfigInfo struct {
	TrustedProxies      []netip.Prefix `json:"trusted_proxies"`
	TrustedProxiesCount int            `json:"trusted_proxies_count"`
	TrustedHops         int            `json:"trusted_hops,omitempty"`
	TrustUnixSocket     bool           `json:"trust_unix_socket,omitempty"`
	Header              string         `json:"header,omitempty"`
	Masquerade          []netip.Prefix `json:"masquerade,omitempty"`
	MasqueradeCount     int            `json:"masquerade_count,omitempty"`
	MaxHops             int            `json:"max_hops"`
	MaxHeaderBytes      int            `json:"max_header_bytes"`
}

// SocketInfo is the socket layer. A zero Peer is a Unix-domain socket.
type SocketInfo struct {
	Peer  netip.AddrPort `json:"peer"`
	Local netip.AddrPort `json:"local,omitzero"`
	// Unreadable is the peer address as it was given when it is not an IP
	// address and port (a RemoteAddr rewritten by other middleware).
	Unreadable string `json:"unreadable,omitempty"`
	// JudgedUntrusted reports that the PROXY listener judged the peer not
	// to be a trusted proxy when the connection arrived, so the walk takes
	// it for the client whatever the trust says now
	// (clientip.Transport.PeerUntrusted).
	JudgedUntrusted bool `json:"judged_untrusted,omitempty"`
}

// ProxyInfo is a PROXY protocol header, from proxyproto.Facts.
type ProxyInfo struct {
	Version     uint8              `json:"version"`
	Command     proxyproto.Command `json:"command"`
	Source      netip.AddrPort     `json:"source,omitzero"`
	Destination netip.AddrPort     `json:"destination,omitzero"`
	TLVs        []TLVInfo          `json:"tlvs,omitempty"`
	SSL         *SSLInfo           `json:"ssl,omitempty"`
}

// TLVInfo is one TLV of a PROXY v2 header. Value is the text of a TLV whose
// value is printable text, otherwise its bytes in hexadecimal, cut at 256
// characters.
type TLVInfo struct {
	Type  string `json:"type"`
	Value string `json:"value"`
	Hex   bool   `json:"hex,omitempty"`
	Len   int    `json:"len"`
}

// SSLInfo is the PROXY SSL TLV: what the load balancer saw of the client's
// TLS connection (see proxyproto.SSL).
type SSLInfo struct {
	TLS           bool   `json:"tls"`
	CertPresented bool   `json:"cert_presented"`
	CertVerified  bool   `json:"cert_verified"`
	Version       string `json:"version,omitempty"`
	CN            string `json:"cn,omitempty"`
	Cipher        string `json:"cipher,omitempty"`
	Cert          bool   `json:"cert,omitempty"` // the client certificate itself is in the TLV
}

// Step is one hop of the chain, as [clientip.Step] reports it, with the hop
// that delivered it and a sentence for people.
type Step struct {
	Hop     int              `json:"hop"`
	Layer   clientip.Source  `json:"layer"`
	Header  string           `json:"header,omitempty"`
	Entry   string           `json:"entry,omitempty"`
	Address netip.Addr       `json:"address,omitzero"`
	Port    uint16           `json:"port,omitempty"`
	Verdict clientip.Verdict `json:"verdict"`
	Reason  clientip.Reason  `json:"reason,omitempty"`
	// DeliveredBy is the hop that delivered this one (the socket peer has
	// none): whether its report is believed depends on whether it is
	// trusted.
	DeliveredBy *Deliverer `json:"delivered_by,omitempty"`
	Note        string     `json:"note"`
}

// Deliverer is the hop that delivered another.
type Deliverer struct {
	Hop     int        `json:"hop"`
	Address netip.Addr `json:"address,omitzero"`
	Trusted bool       `json:"trusted"`
}

// HeaderInfo is one forwarding header the request carries: at most 8 of
// its lines, each cut at 256 bytes.
type HeaderInfo struct {
	Name   string   `json:"name"`
	Read   bool     `json:"read"`
	Values []string `json:"values"`
	Lines  int      `json:"lines"`
	Note   string   `json:"note"`
}

// ResultInfo is a [clientip.Result].
type ResultInfo struct {
	Client      netip.Addr      `json:"client,omitzero"`
	Source      clientip.Source `json:"source"`
	Header      string          `json:"header,omitempty"`
	Hop         int             `json:"hop"`
	Via         netip.Addr      `json:"via,omitzero"`
	Peer        netip.AddrPort  `json:"peer"`
	Proxy       netip.AddrPort  `json:"proxy,omitzero"`
	Masqueraded bool            `json:"masqueraded,omitempty"`
}

// ErrorInfo is a resolution failure: its kind, the error's text and a hint
// for people.
type ErrorInfo struct {
	Reason  clientip.Reason `json:"reason"`
	Message string          `json:"message"`
	Hint    string          `json:"hint"`
}

// RecordedInfo is the resolution a connection recorded when it was accepted.
type RecordedInfo struct {
	Summary string     `json:"summary"`
	Result  ResultInfo `json:"result"`
	Error   *ErrorInfo `json:"error,omitempty"`
}

func resultInfo(res clientip.Result) ResultInfo {
	return ResultInfo{
		Client: res.Client, Source: res.Source, Header: res.Header, Hop: res.Hop, Via: res.Via,
		Peer: res.Peer, Proxy: res.Proxy, Masqueraded: res.Masqueraded,
	}
}

func errorInfo(err error) *ErrorInfo {
	if err == nil {
		return nil
	}
	r := clientip.ReasonOf(err)
	return &ErrorInfo{Reason: r, Message: err.Error(), Hint: hint(r)}
}

func summary(res clientip.Result, err error) string {
	if err == nil {
		return res.String()
	}
	return res.String() + ": " + err.Error()
}

// hint says what a failure usually means and where to look.
func hint(r clientip.Reason) string {
	switch r {
	case clientip.ReasonMasqueraded:
		return "the answer is a node address that stands in for a client lost to masquerading (externalTrafficPolicy: Cluster); use externalTrafficPolicy: Local, or a PROXY header or X-Forwarded-For from a load balancer"
	case clientip.ReasonNoAddress:
		return "the socket peer has no IP address (a Unix socket, or a RemoteAddr rewritten by other middleware); set TrustUnixSocket if a local proxy connects over a Unix socket"
	case clientip.ReasonMalformed:
		return "a hop the walk needs is not a plain IP address; the walk stops rather than skip it: check what the proxy that delivered it writes"
	case clientip.ReasonUnknownHop:
		return "a proxy wrote an RFC 7239 node that hides its address (unknown, an obfuscated name, or no for=); configure it to write addresses"
	case clientip.ReasonUnspecified:
		return "0.0.0.0 or :: is never a client; a proxy wrote it for a connection it could not attribute"
	case clientip.ReasonAllTrusted:
		return "every hop is a trusted proxy: the request came from inside the trusted set (an internal caller, a health check), or the set is so wide that it contains the client"
	case clientip.ReasonTooFewHops:
		return "the chain has fewer hops than TrustedHops: the request bypassed a proxy, or TrustedHops is higher than the number of proxies"
	case clientip.ReasonTooManyHops:
		return "the walk would step over more hops than MaxHops: a long chain of trusted proxies, or entries a client added inside the trusted set"
	case clientip.ReasonHeaderTooLarge:
		return "the configured header is larger than MaxHeaderBytes and was not parsed"
	case clientip.ReasonMultipleValues:
		return "a single-address header must arrive once with one address: the edge appends instead of overwriting, or a client's own copy got through"
	}
	return ""
}

// clip cuts s to at most maxText bytes, at a character boundary, marking
// the cut, and replaces each byte that is not UTF-8 with U+FFFD, as
// encoding/json would: a Report holds only text that its JSON document
// carries unchanged, so that a decoded Report renders the same text.
func clip(s string) string {
	cut := len(s) > maxText
	if cut {
		n := maxText
		for n > maxText-utf8.UTFMax && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if !utf8.ValidString(s) {
		var b strings.Builder
		for i := 0; i < len(s); {
			c, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(c) // U+FFFD for a byte that is not UTF-8
			i += size
		}
		s = b.String()
	}
	if cut {
		s += "…"
	}
	return s
}

// cleanPeer returns x with its socket peer's zone clipped (see clip): the
// zone is whatever a RemoteAddr held, and other middleware may have
// rewritten that from a client's header; netip keeps any zone.
func cleanPeer(x clientip.Explanation) clientip.Explanation {
	x.Result = cleanResultPeer(x.Result)
	return x
}

// cleanResultPeer is cleanPeer for a Result.
func cleanResultPeer(res clientip.Result) clientip.Result {
	a := res.Peer.Addr()
	if z := a.Zone(); z != "" && clip(z) != z {
		res.Peer = netip.AddrPortFrom(a.WithZone(clip(z)), res.Peer.Port())
	}
	return res
}

func prefixes(set clientip.PrefixSet) ([]netip.Prefix, int) {
	ps := set.Prefixes()
	n := len(ps)
	if n > maxPrefixes {
		ps = ps[:maxPrefixes]
	}
	if ps == nil {
		ps = []netip.Prefix{}
	}
	return ps, n
}

func configInfo(cfg clientip.Config) ConfigInfo {
	c := ConfigInfo{
		TrustedHops: cfg.TrustedHops, TrustUnixSocket: cfg.TrustUnixSocket, Header: cfg.Header,
		MaxHops: cfg.MaxHops, MaxHeaderBytes: cfg.MaxHeaderBytes,
	}
	c.TrustedProxies, c.TrustedProxiesCount = prefixes(cfg.TrustedProxies)
	c.Masquerade, c.MasqueradeCount = prefixes(cfg.Masquerade)
	if c.MasqueradeCount == 0 {
		c.Masquerade = nil
	}
	return c
}

// proxyInfo describes the PROXY header of facts f; known says whether f
// are a connection's facts at all.
func proxyInfo(f proxyproto.Facts, known bool) *ProxyInfo {
	switch {
	case !known:
		return nil
	case f.Version == 0:
		return &ProxyInfo{}
	}
	p := &ProxyInfo{Version: f.Version, Command: f.Command, Source: f.Source, Destination: f.Destination}
	for t := range f.TLVs.All() {
		if len(p.TLVs) == maxTLVs {
			break
		}
		ti := TLVInfo{Type: t.Type.String(), Len: len(t.Value)}
		if t.Type == proxyproto.TLVSSL {
			// Decoded into SSL below.
		} else if printable(t.Value) {
			ti.Value = clip(t.Value)
		} else {
			v := t.Value
			if len(v) > maxText/2 {
				v = v[:maxText/2]
			}
			ti.Value, ti.Hex = fmt.Sprintf("%x", v), true
		}
		p.TLVs = append(p.TLVs, ti)
	}
	if s, ok := f.TLVs.SSL(); ok {
		p.SSL = &SSLInfo{
			TLS: s.TLS(), CertPresented: s.CertPresented(), CertVerified: s.CertVerified(),
			Version: clip(s.Version), CN: clip(s.CN), Cipher: clip(s.Cipher), Cert: s.CertDER != "",
		}
	}
	return p
}

// printable reports whether s is printable ASCII text.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// build lays out a report of the explanation x, made under cfg, of a
// request or connection whose headers are h (nil for a connection) and
// whose PROXY facts are f, when known.
func build(cfg clientip.Config, x clientip.Explanation, f proxyproto.Facts, known bool, local netip.AddrPort, h http.Header) Report {
	rep := Report{
		Schema:      Schema,
		Summary:     summary(x.Result, x.Err),
		Config:      configInfo(cfg),
		Socket:      SocketInfo{Peer: x.Result.Peer, Local: local, JudgedUntrusted: x.PeerUntrusted},
		Proxy:       proxyInfo(f, known),
		Result:      resultInfo(x.Result),
		Error:       errorInfo(x.Err),
		Masqueraded: x.Result.Masqueraded,
	}
	if ce, ok := errors.AsType[*clientip.ChainError](x.Err); ok && ce.Hop == 0 && ce.Value != "" &&
		clientip.ReasonOf(x.Err) == clientip.ReasonNoAddress {
		rep.Socket.Unreadable = clip(ce.Value)
	}
	rep.Steps, rep.OmittedEntries = steps(cfg, x)
	rep.Headers = headerInfos(cfg, x, h)
	rep.Notes = notes(cfg, x, f, h)
	return rep
}

// steps turns the explanation's steps into the report's, with the hop that
// delivered each and a sentence.
func steps(cfg clientip.Config, x clientip.Explanation) ([]Step, int) {
	out := make([]Step, 0, len(x.Steps))
	for i, s := range x.Steps {
		st := Step{
			Hop: s.Hop, Layer: s.Layer, Header: s.Header, Entry: clip(s.Entry), Address: s.Addr, Port: s.Port,
			Verdict: s.Verdict, Reason: s.Reason,
		}
		if s.Layer == clientip.SourceSocket && s.Entry != "" {
			st.Entry = "" // an unreadable RemoteAddr, shown in Socket
		}
		var by *clientip.Step
		for j := i - 1; j >= 0; j-- {
			if x.Steps[j].Hop < s.Hop {
				by = &x.Steps[j]
				break
			}
		}
		if by != nil {
			st.DeliveredBy = &Deliverer{Hop: by.Hop, Address: by.Addr, Trusted: by.Verdict == clientip.VerdictTrusted}
		}
		st.Note = stepNote(cfg, s, by, x.PeerUntrusted)
		out = append(out, st)
	}
	return out, x.Omitted
}

// stepNote says, for people, what the walk made of a hop.
func stepNote(cfg clientip.Config, s clientip.Step, by *clientip.Step, judgedUntrusted bool) string {
	hopCount := cfg.TrustedHops > 0
	if judgedUntrusted && s.Layer == clientip.SourceSocket && s.Verdict != clientip.VerdictTrusted {
		return "judged untrusted by the PROXY listener when the connection arrived: the client, whatever the trust says now; nothing it sent is read"
	}
	switch s.Verdict {
	case clientip.VerdictTrusted:
		switch {
		case s.Layer == clientip.SourceSocket && !s.Addr.IsValid():
			return "a Unix-socket peer, trusted (TrustUnixSocket): the walk reads what it delivered"
		case hopCount && s.Hop < cfg.TrustedHops:
			return fmt.Sprintf("counted as one of the %d trusted hops (TrustedHops): the walk reads what it delivered", cfg.TrustedHops)
		case hopCount:
			return "trusted to deliver the chain (TrustedHops with TrustedProxies)"
		case s.Layer == clientip.SourceSocket:
			return "in TrustedProxies: a proxy, so the walk reads the layer it delivered"
		}
		return "in TrustedProxies: a proxy, so the walk reads what it delivered"
	case clientip.VerdictClient:
		if s.Layer == clientip.SourceSocket {
			if hopCount {
				return "outside TrustedProxies: the client; nothing it sent is read"
			}
			return "not in TrustedProxies: the client; nothing it sent is read"
		}
		if hopCount {
			return fmt.Sprintf("hop %d with TrustedHops %d: the client", s.Hop, cfg.TrustedHops)
		}
		return "the first hop not in TrustedProxies: the client"
	case clientip.VerdictMasqueraded:
		return "a masquerading node (Masquerade): it stands in for a client who is lost"
	case clientip.VerdictFailed:
		_, text, _ := strings.Cut(s.Reason.Err().Error(), ": ")
		return "the walk stops here: " + text
	case clientip.VerdictUnread:
		if by != nil && by.Verdict == clientip.VerdictClient {
			return "delivered by the client: not read, not believed (it may be forged)"
		}
		return "beyond where the walk stopped: not read, not believed (it may be forged)"
	}
	return ""
}

// headerInfos lists the forwarding headers h carries.
func headerInfos(cfg clientip.Config, x clientip.Explanation, h http.Header) []HeaderInfo {
	var out []HeaderInfo
	for _, name := range presentHeaders(h, cfg.Header) {
		lines := h[name]
		hi := HeaderInfo{Name: displayName(name), Read: name == cfg.Header, Lines: len(lines)}
		for _, l := range lines[:min(len(lines), maxLines)] {
			hi.Values = append(hi.Values, clip(l))
		}
		switch {
		case !hi.Read && cfg.Header == "":
			hi.Note = "not read: the configuration reads no header"
		case !hi.Read:
			hi.Note = "not read: the configuration reads " + displayName(cfg.Header) + " only"
		case headerRead(x):
			hi.Note = "read by the walk: see the steps"
		case len(x.Steps) > 0 && x.Steps[0].Verdict == clientip.VerdictClient:
			hi.Note = "configured, but not read: the socket peer that delivered it is not trusted"
		default:
			hi.Note = fmt.Sprintf("configured, but not read: the walk stopped at hop %d, before it", x.Result.Hop)
		}
		out = append(out, hi)
	}
	return out
}

// headerRead reports whether the walk reached the configured header.
func headerRead(x clientip.Explanation) bool {
	for _, s := range x.Steps {
		if s.Layer.FromHeader() && s.Verdict != clientip.VerdictUnread {
			return true
		}
	}
	return false
}

// notes are the report's observations for people.
func notes(cfg clientip.Config, x clientip.Explanation, f proxyproto.Facts, h http.Header) []string {
	var out []string
	res := x.Result
	peerTrusted := len(x.Steps) > 0 && x.Steps[0].Verdict == clientip.VerdictTrusted
	present := presentHeaders(h, cfg.Header)
	var others []string
	for _, n := range present {
		if n != cfg.Header {
			others = append(others, displayName(n))
		}
	}
	if x.PeerUntrusted {
		out = append(out, "The PROXY listener judged the socket peer untrusted when the connection arrived (the trust then did not trust it, or its PROXY header was discarded), so the connection keeps it as the client whatever the trust says now.")
	} else if len(x.Steps) > 0 && len(present) > 0 && x.Steps[0].Verdict == clientip.VerdictClient && res.Source == clientip.SourceSocket {
		out = append(out, fmt.Sprintf("The socket peer %s is not a trusted proxy, so no forwarding header it sent is read. If it is your proxy or load balancer, add its address to TrustedProxies.", res.Peer.Addr()))
	}
	if peerTrusted && len(others) > 0 {
		switch {
		case cfg.Header == "":
			out = append(out, "The request carries "+strings.Join(others, ", ")+", but the configuration reads no header.")
		case len(h[cfg.Header]) == 0:
			out = append(out, "The request carries "+strings.Join(others, ", ")+", but not "+displayName(cfg.Header)+", the header the configuration reads: check which header your proxy writes.")
		}
	}
	if f.Command == proxyproto.CommandLocal {
		out = append(out, "The load balancer sent a PROXY header that names no client (v2 LOCAL: its own connection, a health check; v1 UNKNOWN: its own, or one from a client it could not name). A trusted load balancer's header ends the walk there, as for a request without a forwarding header: it wrote none, so any the request carries is the client's own.")
	}
	if f.NoHeaderFromUpstream {
		out = append(out, "The connection came from one of the PROXY listener's Upstreams without a PROXY header: the load balancer relayed its client's bytes as they came, so the walk ends at the load balancer, and any forwarding header the request carries is the client's own.")
	}
	if f.Version == 0 && res.Proxy.IsValid() {
		out = append(out, "The transport carries a PROXY source, but its header's facts are not in the request context: set http.Server.ConnContext to proxyproto.ConnContext to see its TLVs.")
	}
	if res.Masqueraded {
		out = append(out, "The answer "+res.Client.String()+" is a masquerading node, not a client: do not use it for rate limits, audit logs or allowlists.")
	}
	return out
}

// quote returns s as it is when it is printable text without spaces or
// quotes, else quoted, so that nothing a client wrote can move a terminal's
// cursor.
func quote(s string) string {
	if s != "" && printable(s) && !strings.ContainsAny(s, " \"\\") {
		return s
	}
	return strconv.Quote(s)
}

// ReportFor explains the resolution of transport t and headers h (nil for
// protocols without headers) under r: a Report of kind "chain", without a
// request or connection, for tools that take the layers from elsewhere
// (cmd/sourceip takes them from its flags).
func ReportFor(r *clientip.Resolver, t clientip.Transport, h http.Header) Report {
	rep := build(r.Config(), cleanPeer(r.Explain(t, h)), proxyproto.Facts{}, false, netip.AddrPort{}, h)
	rep.Kind = "chain"
	return rep
}
