package explain

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/termtext"
)

// maxUnreadShown bounds the unread entries the text rendering lists; the
// JSON document lists them all, up to the bound of a Report.
const maxUnreadShown = 4

// warning ends every text rendering.
const warning = "This page shows the trust configuration: serve it to operators only."

// WriteText writes the report for people, as the Handler serves it to curl:
// the answer, the configuration, each layer, the walk as a table, the
// forwarding headers, the policy checks and the notes. Everything a client
// wrote is quoted when it is not plain printable text, and any other field
// that holds a character a terminal acts on (a report decoded from a
// fetched document holds anyone's text) is escaped as [strconv.Quote]
// escapes it, so that no control character reaches the terminal.
func (r *Report) WriteText(w io.Writer) error {
	p := &printer{w: w}
	switch {
	case r.Request != nil:
		p.f("sourceip explain: request %s %s (host %s, %s)\n", quote(r.Request.Method), quote(r.Request.Path), quote(r.Request.Host), quote(r.Request.Proto))
	case r.Connection != nil:
		id := ""
		if r.Connection.ID != "" {
			id = " " + quote(r.Connection.ID)
		}
		p.f("sourceip explain: connection%s from %s to %s\n", id, quote(r.Connection.Remote), quote(r.Connection.Local))
	default:
		p.f("sourceip explain: chain\n")
	}
	if r.Error == nil {
		p.f("answer:  %s\n", r.Summary)
	} else {
		p.f("answer:  unresolved (%s)\n", r.Error.Reason)
		p.f("error:   %s\n", r.Error.Message)
		if r.Error.Hint != "" {
			p.f("hint:    %s\n", r.Error.Hint)
		}
		if r.Result.Client.IsValid() {
			p.f("result:  %s\n", r.Summary)
		}
	}
	if r.Recorded != nil {
		p.f("at accept: %s\n", r.Recorded.Summary)
	}
	p.f("config:  %s\n", r.Config.text())
	p.f("socket:  peer %s", peerText(r.Socket.Peer))
	if r.Socket.Unreadable != "" {
		p.f(" (unreadable address %s)", quote(r.Socket.Unreadable))
	}
	if r.Socket.JudgedUntrusted {
		p.f(" (judged untrusted when the connection arrived)")
	}
	if r.Socket.Local.IsValid() {
		p.f(", local %s", r.Socket.Local)
	}
	p.f("\n")
	r.Proxy.writeText(p)

	p.f("\n")
	r.writeWalk(p)
	if r.Policy != nil {
		p.f("\npolicy: %s\n", r.Policy.Expectation)
		for _, c := range r.Policy.Checks {
			p.f("  %-8s  %-17s  %s\n", c.Status, c.Name, c.Text)
		}
	}
	if len(r.Notes) > 0 {
		p.f("\nnotes:\n")
		for _, n := range r.Notes {
			p.f("  - %s\n", n)
		}
	}
	if r.Kind != "chain" {
		p.f("\n%s\n", warning)
	}
	return p.err
}

// WriteWalk writes the part of [Report.WriteText] that tells the walk: the
// table of steps and the forwarding headers.
func (r *Report) WriteWalk(w io.Writer) error {
	p := &printer{w: w}
	r.writeWalk(p)
	return p.err
}

func (r *Report) writeWalk(p *printer) {
	p.f("walk, from the socket peer outward:\n")
	tw := tabwriter.NewWriter(p, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  hop\tlayer\tentry\taddress\tverdict\tnote\n")
	unread, hidden := 0, 0
	for _, s := range r.Steps {
		if s.Verdict == clientip.VerdictUnread {
			if unread++; unread > maxUnreadShown {
				hidden++
				continue
			}
		}
		layer := s.Layer.String()
		if s.Header != "" {
			layer = displayName(canonicalHeader(s.Header))
		}
		entry := "-"
		if s.Entry != "" {
			entry = quote(s.Entry)
		}
		addr := "-"
		switch {
		case s.Port != 0 || (s.Layer == clientip.SourceSocket && s.Address.IsValid()):
			addr = netip.AddrPortFrom(s.Address, s.Port).String()
		case s.Address.IsValid():
			addr = s.Address.String()
		case s.Layer == clientip.SourceSocket:
			addr = "unix"
		}
		verdict := s.Verdict.String()
		if s.Reason != clientip.ReasonNone && s.Verdict != clientip.VerdictMasqueraded {
			verdict += " (" + s.Reason.String() + ")"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(s.Hop, layer, entry, addr, verdict, s.Note)...)
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	if n := hidden + r.OmittedEntries; n > 0 {
		p.f("  … and %d more entries beyond, not read\n", n)
	}

	if len(r.Headers) > 0 {
		p.f("\nforwarding headers:\n")
		for _, h := range r.Headers {
			vals := make([]string, len(h.Values))
			for i, v := range h.Values {
				vals[i] = strconv.Quote(v)
			}
			more := ""
			if h.Lines > len(h.Values) {
				more = fmt.Sprintf(" … (%d lines)", h.Lines)
			}
			p.f("  %s: %s%s\n      %s\n", h.Name, strings.Join(vals, ", "), more, h.Note)
		}
	}
}

func (c ConfigInfo) text() string {
	var parts []string
	switch {
	case c.TrustedHops > 0 && c.TrustedProxiesCount == 0:
		parts = append(parts, fmt.Sprintf("hop-count mode: %d trusted hops", c.TrustedHops))
	case c.TrustedHops > 0:
		parts = append(parts, fmt.Sprintf("hop-count mode: %d trusted hops, peers trusted: %s", c.TrustedHops, prefixText(c.TrustedProxies, c.TrustedProxiesCount)))
	case c.TrustedProxiesCount == 0:
		parts = append(parts, "trusts no proxy")
	default:
		parts = append(parts, "trusted "+prefixText(c.TrustedProxies, c.TrustedProxiesCount))
	}
	if c.TrustUnixSocket {
		parts = append(parts, "Unix-socket peers trusted")
	}
	if c.Header == "" {
		parts = append(parts, "reads no header")
	} else {
		parts = append(parts, "header "+displayName(canonicalHeader(c.Header)))
	}
	if c.MasqueradeCount > 0 {
		parts = append(parts, "masquerade "+prefixText(c.Masquerade, c.MasqueradeCount))
	}
	parts = append(parts, fmt.Sprintf("max hops %d", c.MaxHops), fmt.Sprintf("max header bytes %d", c.MaxHeaderBytes))
	return strings.Join(parts, "; ")
}

func prefixText(ps []netip.Prefix, n int) string {
	s := make([]string, 0, min(len(ps), 8))
	for _, p := range ps[:min(len(ps), 8)] {
		s = append(s, p.String())
	}
	text := strings.Join(s, ", ")
	if n > len(s) {
		text += fmt.Sprintf(" … (%d prefixes)", n)
	}
	return text
}

func peerText(p netip.AddrPort) string {
	if !p.Addr().IsValid() {
		return "unix"
	}
	return p.String()
}

func (p *ProxyInfo) writeText(pr *printer) {
	switch {
	case p == nil:
		pr.f("proxy:   nothing known of a PROXY header\n")
		return
	case p.Version == 0:
		pr.f("proxy:   none: the connection carried no PROXY header\n")
		return
	}
	pr.f("proxy:   v%d %s", p.Version, p.Command)
	if p.Source.IsValid() {
		pr.f(" %s -> %s", p.Source, p.Destination)
	}
	pr.f("\n")
	for _, t := range p.TLVs {
		switch {
		case t.Hex:
			pr.f("         tlv %s (%d bytes): 0x%s\n", t.Type, t.Len, t.Value)
		case t.Value == "":
			pr.f("         tlv %s (%d bytes)\n", t.Type, t.Len)
		default:
			pr.f("         tlv %s (%d bytes): %s\n", t.Type, t.Len, quote(t.Value))
		}
	}
	if s := p.SSL; s != nil {
		pr.f("         ssl: tls %v, certificate presented %v, verified %v", s.TLS, s.CertPresented, s.CertVerified)
		for _, kv := range [][2]string{{"version", s.Version}, {"cn", s.CN}, {"cipher", s.Cipher}} {
			if kv[1] != "" {
				pr.f(", %s %s", kv[0], quote(kv[1]))
			}
		}
		pr.f("\n")
	}
}

// printer writes formatted text and keeps the first error. Its arguments
// pass through terminalSafe: a document decoded from JSON (cmd/sourceip
// -fetch) is anyone's text, and a socket peer's IPv6 zone is whatever the
// RemoteAddr held.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, terminalSafe(args...)...)
	}
}

// terminalSafe returns args with every string, Stringer and error among
// them escaped as by [strconv.Quote], without the quotes, when it holds a
// character a terminal acts on (see termtext.Line); other values are left as
// they are. A Stringer becomes a string, so format it with %s or %v. It
// modifies args in place.
func terminalSafe(args ...any) []any {
	for i, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		default:
			continue
		}
		if !termtext.Line(s) {
			q := strconv.Quote(s)
			s = q[1 : len(q)-1]
		}
		args[i] = s
	}
	return args
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	p.err = err
	return n, err
}

// WriteText writes the advice for people: the watch, the outcomes under
// the configuration in force, the proposal (also as Go), the findings with
// the dangerous ones first, and a table of the peers.
func (adv *Advice) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.f("sourceip advice: %d requests sampled of %d seen (one in %d)", adv.Sampled, adv.Seen, adv.SampleEvery)
	if !adv.Since.IsZero() {
		p.f(", %s to %s", adv.Since.UTC().Format(time.RFC3339), adv.Until.UTC().Format(time.RFC3339))
	}
	p.f("\ncurrent:  %s\n", adv.Current.text())
	var outs []string
	for _, o := range adv.Outcomes {
		outs = append(outs, fmt.Sprintf("%s %d", o.Reason, o.Count))
	}
	p.f("outcomes: %s\n", orDash(strings.Join(outs, ", ")))
	p.f("proposal: %s", adv.Proposal.text())
	if adv.Preset != "" {
		p.f(" (preset %s)", adv.Preset)
	}
	p.f("\n\n")
	for l := range strings.Lines(adv.Go) {
		p.f("    %s\n", strings.TrimSuffix(l, "\n"))
	}
	if len(adv.Findings) > 0 {
		p.f("\nfindings:\n")
		for _, f := range adv.Findings {
			sev := f.Severity.String()
			if f.Severity == SeverityDanger {
				sev = "DANGER"
			}
			p.f("  %-7s  %s: %s\n", sev, f.Kind, f.Text)
		}
	}
	if len(adv.Peers) > 0 {
		p.f("\npeers, by requests:\n")
		tw := tabwriter.NewWriter(p, 2, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "  address\trole\ttrusted\trequests\tproxy-protocol\tno-forwarding\theaders\tdepths\tclients\tupstreams\n")
		for _, pi := range adv.Peers {
			role := pi.Role
			if pi.Provider != "" {
				role += " (" + pi.Provider + ")"
			}
			var hs, ds, us []string
			for _, h := range pi.Headers {
				hs = append(hs, fmt.Sprintf("%s %d", h.Name, h.Requests))
			}
			for d, n := range pi.Depths {
				if n > 0 {
					label := strconv.Itoa(d)
					if d == len(pi.Depths)-1 {
						label += "+"
					}
					ds = append(ds, label+":"+strconv.FormatUint(n, 10))
				}
			}
			for _, c := range pi.UpstreamClasses {
				us = append(us, fmt.Sprintf("%s %d", c.Class, c.Count))
			}
			for _, u := range pi.Upstreams {
				us = append(us, u.String())
			}
			fmt.Fprintf(tw, "  %s\t%s\t%v\t%d\t%d\t%d\t%s\t%s\t~%d\t%s\n", terminalSafe(pi.Address, role, pi.Trusted, pi.Requests,
				pi.ProxyProtocol, pi.NoForwarding, orDash(strings.Join(hs, ", ")), orDash(strings.Join(ds, " ")), pi.Clients, orDash(strings.Join(us, ", ")))...)
		}
		if err := tw.Flush(); err != nil && p.err == nil {
			p.err = err
		}
	}
	p.f("\nNothing was applied: review the proposal, then configure it yourself.\n")
	return p.err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
