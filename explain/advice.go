package explain

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/enumtext"
)

// AdviceSchema is the value of [Advice].Schema.
const AdviceSchema = "sourceip.advice/v1"

// Thresholds of the advice, as fractions of a peer's sampled requests.
const (
	mostly         = 0.9    // "the peer sends X": in at least 90% of its requests
	always         = 0.99   // a header chosen for a provider edge: in 99%
	minSamples     = 100    // fewer sampled requests earn a warning
	dangerShare    = 0.1    // a danger, not a warning, from 10% of requests
	maxProposed    = 64     // peers proposed one by one
	wideV4, wideV6 = 16, 48 // a public trusted prefix shorter than these is "wide" (see Advisor.wide)
)

// Advice is an [Advisor]'s proposal: the clientip configuration that fits
// the traffic it watched, what it saw of each socket peer, and the findings
// behind the proposal, dangerous ones flagged. Nothing is applied: Config
// is for the operator to review.
type Advice struct {
	Schema      string    `json:"schema"`
	Since       time.Time `json:"since,omitzero"`
	Until       time.Time `json:"until,omitzero"`
	Seen        uint64    `json:"seen"`    // observations offered while watching
	Sampled     uint64    `json:"sampled"` // observations recorded
	SampleEvery int       `json:"sample_every"`
	// UnixPeers counts sampled observations from a peer without an IP
	// address, which have no row in Peers.
	UnixPeers uint64 `json:"unix_peers,omitempty"`
	// EvictedPeers counts peers that lost their place in the bounded table.
	EvictedPeers uint64         `json:"evicted_peers"`
	Outcomes     []OutcomeCount `json:"outcomes"` // under the configuration in force
	Peers        []PeerInfo     `json:"peers"`    // by requests, most first
	Current      ConfigInfo     `json:"current"`
	Proposal     ConfigInfo     `json:"proposal"`
	// Preset names the platform preset the proposal rests on, as
	// clientip/presets names its Platform ("cloudflare", "cloudfront",
	// "fastly", "azure-front-door", "google-load-balancer"), "" for none.
	Preset string `json:"preset,omitempty"`
	// Go is the proposal as Go source.
	Go       string    `json:"go"`
	Findings []Finding `json:"findings"`

	// Config is the proposal as a clientip.Config that [clientip.New]
	// accepts. It is not part of the JSON document.
	Config clientip.Config `json:"-"`
}

// OutcomeCount counts the resolutions that ended one way.
type OutcomeCount struct {
	Reason clientip.Reason `json:"reason"`
	Count  uint64          `json:"count"`
}

// PeerInfo is what an Advisor saw of one socket peer.
type PeerInfo struct {
	Address netip.Addr `json:"address"`
	// Role is "proxy" (sends forwarding or PROXY headers, with many
	// clients behind it), "direct" (sends none: a client), "node" (a
	// node that delivers traffic without them: masquerading), or "unclear"
	// (sends forwarding headers with few clients behind them, or is a
	// public address outside every platform's published ranges that names
	// its clients in forwarding headers: a client that writes a different
	// header on every request looks the same).
	Role string `json:"role"`
	// Provider is the preset whose published ranges contain the peer.
	Provider string `json:"provider,omitempty"`
	// Trusted reports whether the configuration in force trusts the peer.
	Trusted       bool          `json:"trusted"`
	Requests      uint64        `json:"requests"`
	ProxyProtocol uint64        `json:"proxy_protocol"`
	NoForwarding  uint64        `json:"no_forwarding"` // no forwarding header and no PROXY header
	Headers       []HeaderCount `json:"headers,omitempty"`
	// Depths counts requests by the number of entries in X-Forwarded-For
	// (or Forwarded); the last bucket is 8 or more.
	Depths []uint64 `json:"depths"`
	// Clients estimates the distinct clients behind the peer, within about
	// 13%: the larger of the distinct values it reports (PROXY source,
	// rightmost list entry, or single-address header) and the distinct
	// second-rightmost entries (the clients behind a fixed proxy layer).
	Clients int `json:"clients"`
	// Upstreams are the distinct rightmost list entries when there were at
	// most four: a fixed proxy layer behind the peer.
	Upstreams []netip.Addr `json:"upstreams,omitempty"`
	// UpstreamClasses counts the rightmost list entries by class: a
	// preset's name, "internal", "public" or "unreadable".
	UpstreamClasses []ClassCount   `json:"upstream_classes,omitempty"`
	Leftmost        uint64         `json:"leftmost,omitempty"`
	Outcomes        []OutcomeCount `json:"outcomes"`
}

// HeaderCount counts the requests that carried a header.
type HeaderCount struct {
	Name     string `json:"name"`
	Requests uint64 `json:"requests"`
}

// ClassCount counts header entries of one address class.
type ClassCount struct {
	Class string `json:"class"`
	Count uint64 `json:"count"`
}

// Severity grades a [Finding].
type Severity uint8

const (
	// SeverityInfo: what the traffic shows.
	SeverityInfo Severity = iota
	// SeverityWarning: worth a look before trusting the proposal.
	SeverityWarning
	// SeverityDanger: the configuration in force lets clients choose their
	// address, or lets it be lost.
	SeverityDanger
)

var severityNames = []string{"info", "warning", "danger"}

// String returns "info", "warning" or "danger".
func (s Severity) String() string { return enumtext.String(severityNames, s, "Severity") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (s Severity) MarshalText() ([]byte, error) {
	return enumtext.Marshal(severityNames, s, "Severity", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (s *Severity) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(s, severityNames, text, "Severity", errUnknownName)
}

// FindingKind names what a [Finding] is about.
type FindingKind uint8

const (
	// FindingProxy: a peer looks like a proxy.
	FindingProxy FindingKind = iota
	// FindingDirect: some traffic arrives directly.
	FindingDirect
	// FindingUnclear: a peer sends forwarding headers with few clients
	// behind it: a client that forges them, or a proxy seen too little.
	FindingUnclear
	// FindingHeader: which header the proxies write.
	FindingHeader
	// FindingDepth: the proxies' headers hold more than one entry: another
	// proxy layer in front of them.
	FindingDepth
	// FindingPreset: the proxies are a platform's published edge.
	FindingPreset
	// FindingNodeSNAT: node addresses deliver traffic without headers:
	// masquerading under externalTrafficPolicy: Cluster; or they deliver
	// headers and the proposal trusts them, which holds only while their
	// node ports are closed to clients.
	FindingNodeSNAT
	// FindingTrustedWithoutHeaders: a trusted peer sends requests without
	// forwarding headers; if it is a client, it can forge one.
	FindingTrustedWithoutHeaders
	// FindingHeaderNeverWritten: the configured header never arrives from a
	// trusted peer.
	FindingHeaderNeverWritten
	// FindingLeftmost: answers taken from the leftmost entry of headers
	// longer than the proxies write: the walk believed an entry a client
	// wrote.
	FindingLeftmost
	// FindingTooWide: the trusted set is so wide that it contains clients:
	// a public prefix (not internal space, not covered by one platform's
	// published ranges) shorter than /16 for IPv4 or /48 for IPv6, or a
	// part of NAT64, 6to4 or Teredo space that stands for more than an IPv4
	// /16; or header entries that were all trusted addresses.
	FindingTooWide
	// FindingHeaderFormat: a header whose format clientip cannot read
	// safely.
	FindingHeaderFormat
	// FindingFewSamples: the advice rests on few observations, or the peer
	// table overflowed.
	FindingFewSamples
)

var findingNames = []string{
	"proxy", "direct", "unclear", "header", "depth", "preset", "node_snat", "trusted_without_headers",
	"header_never_written", "leftmost", "too_wide", "header_format", "few_samples",
}

// String returns the kind's name, such as "trusted_without_headers".
func (k FindingKind) String() string { return enumtext.String(findingNames, k, "FindingKind") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (k FindingKind) MarshalText() ([]byte, error) {
	return enumtext.Marshal(findingNames, k, "FindingKind", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (k *FindingKind) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(k, findingNames, text, "FindingKind", errUnknownName)
}

// Finding is one observation behind an Advice.
type Finding struct {
	Kind     FindingKind `json:"kind"`
	Severity Severity    `json:"severity"`
	Peer     netip.Addr  `json:"peer,omitzero"`
	Text     string      `json:"text"`
}

// Advice returns the proposal for what the Advisor has watched so far. It
// may be called at any time, also while observations continue.
func (a *Advisor) Advice() Advice {
	a.mu.Lock()
	adv := Advice{
		Schema: AdviceSchema, Since: a.since, Until: a.until, Seen: a.seen, Sampled: a.sampled,
		SampleEvery: a.cfg.SampleEvery, UnixPeers: a.unix, EvictedPeers: a.evicted, Outcomes: outcomes(a.reasons[:]),
		Peers: []PeerInfo{}, Findings: []Finding{},
	}
	deepTrust := a.deepTrust
	stats := make([]peerStats, 0, len(a.peers))
	for _, p := range a.peers {
		q := *p
		q.ups = slices.Clone(p.ups)
		stats = append(stats, q)
	}
	a.mu.Unlock()
	slices.SortFunc(stats, func(x, y peerStats) int {
		return cmp.Or(cmp.Compare(y.n, x.n), x.addr.Compare(y.addr))
	})

	rv := a.cfg.Trust.Resolver()
	cur := rv.Config()
	adv.Current = configInfo(cur)
	for i := range stats {
		adv.Peers = append(adv.Peers, a.peerInfo(&stats[i], rv))
	}
	a.propose(&adv, stats, cur)
	a.judge(&adv, stats, rv, deepTrust)
	slices.SortStableFunc(adv.Findings, func(x, y Finding) int { return cmp.Compare(y.Severity, x.Severity) })
	return adv
}

func outcomes(counts []uint64) []OutcomeCount {
	out := []OutcomeCount{}
	for r, n := range counts {
		if n > 0 {
			out = append(out, OutcomeCount{Reason: clientip.Reason(r), Count: n})
		}
	}
	return out
}

// share returns k/n, or 0.
func share(k, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(k) / float64(n)
}

// role classes a peer.
func (a *Advisor) role(p *peerStats) string {
	forwarded := share(p.n-p.none, p.n)
	switch {
	case a.cfg.Nodes.Contains(p.addr) && share(p.none, p.n) >= mostly:
		return "node"
	case forwarded >= mostly && a.presetOf(p.addr) >= 0:
		return "proxy"
	case forwarded >= mostly && p.clients() >= a.cfg.MinClients:
		if a.forgeable(p) {
			return "unclear"
		}
		return "proxy"
	case forwarded <= 1-mostly:
		return "direct"
	}
	return "unclear"
}

// forgeable reports whether p's look of a proxy could be a client's own
// doing: p is a public address outside every platform's published ranges
// whose requests name their clients in forwarding headers, not PROXY
// headers. A client that connects directly and writes a different
// X-Forwarded-For on every request has as many distinct addresses behind
// it as a proxy has clients, so traffic alone cannot tell the two apart.
// (A PROXY header is read only from a peer the listener already trusts,
// and an internal address is not a client's to choose.)
func (a *Advisor) forgeable(p *peerStats) bool {
	return !a.internal.Contains(p.addr) && a.presetOf(p.addr) < 0 && share(p.proxy, p.n) < mostly
}

func (a *Advisor) peerInfo(p *peerStats, rv *clientip.Resolver) PeerInfo {
	pi := PeerInfo{
		Address: p.addr, Role: a.role(p), Trusted: rv.TrustsPeer(p.addr), Requests: p.n,
		ProxyProtocol: p.proxy, NoForwarding: p.none, Depths: slices.Clone(p.depth[:]),
		Clients: p.clients(), Upstreams: p.ups, Leftmost: p.leftmost, Outcomes: outcomes(p.reasons[:]),
	}
	if i := a.presetOf(p.addr); i >= 0 {
		pi.Provider = a.presets[i].name
	}
	for i, n := range p.headers {
		if n > 0 {
			pi.Headers = append(pi.Headers, HeaderCount{Name: displayName(forwardingHeaders[i]), Requests: n})
		}
	}
	if p.other > 0 {
		pi.Headers = append(pi.Headers, HeaderCount{Name: displayName(rv.Config().Header), Requests: p.other})
	}
	for c, n := range p.class[0] {
		if n > 0 {
			pi.UpstreamClasses = append(pi.UpstreamClasses, ClassCount{Class: a.className(c), Count: n})
		}
	}
	return pi
}

// propose fills the proposal of adv.
func (a *Advisor) propose(adv *Advice, stats []peerStats, cur clientip.Config) {
	var proxies []*peerStats
	var nodes []netip.Prefix
	var requests uint64
	for i := range stats {
		p := &stats[i]
		switch a.role(p) {
		case "proxy":
			proxies = append(proxies, p)
			requests += p.n
		case "node":
			nodes = append(nodes, netip.PrefixFrom(p.addr, p.addr.BitLen()))
		}
	}
	var cfg clientip.Config
	var goTrusted []goExpr // Go expressions whose union is TrustedProxies
	if len(nodes) > 0 {
		cfg.Masquerade = a.cfg.Nodes
	}
	if len(proxies) == 0 {
		a.finish(adv, cfg, goTrusted)
		return
	}

	// A platform edge: most proxied requests come from one preset's ranges.
	var byPreset [classCount]uint64
	for _, p := range proxies {
		if i := a.presetOf(p.addr); i >= 0 {
			byPreset[i] += p.n
		}
	}
	edge := -1
	for i := range a.presets {
		if share(byPreset[i], requests) >= mostly {
			edge = i
		}
	}

	var trusted []netip.Prefix
	var upstream [classCount]uint64 // rightmost entries by class, behind proxies outside the edge
	for _, p := range proxies {
		// A fixed layer behind the peer: few rightmost entries, many
		// second entries (a load balancer that appends its own address,
		// replicas of an inner proxy).
		// Its public addresses are trusted only behind a platform's edge,
		// which wrote them: behind any other proxy, a fixed rightmost
		// entry may be one client that writes a different header on every
		// request.
		if p.fixedLayer(a.cfg.MinClients) {
			var public []string
			for _, u := range p.ups {
				switch {
				case a.presetOf(u) >= 0:
				case !a.internal.Contains(u) && a.presetOf(p.addr) < 0:
					public = append(public, u.String())
				case len(trusted) < maxProposed:
					trusted = append(trusted, netip.PrefixFrom(u, u.BitLen()))
				}
			}
			if len(public) > 0 {
				adv.Findings = append(adv.Findings, Finding{Kind: FindingUnclear, Severity: SeverityWarning, Peer: p.addr,
					Text: fmt.Sprintf("%s's requests end in a few fixed entries, %s, with many addresses before them: another proxy layer, or a client that writes a header of its own through %s; they are public addresses outside every platform's published ranges, so the proposal does not trust them: add them to TrustedProxies yourself only if they are your proxies", p.addr, strings.Join(public, ", "), p.addr)})
			}
		}
		if edge >= 0 && a.presets[edge].set.Contains(p.addr) {
			continue
		}
		if len(trusted) < maxProposed {
			trusted = append(trusted, netip.PrefixFrom(p.addr, p.addr.BitLen()))
		}
		for c, n := range p.class[0] {
			upstream[c] += n
		}
	}
	var outside uint64
	for c := range upstream {
		outside += upstream[c]
	}
	behind := -1 // a platform edge behind the proxies: their rightmost entries are its addresses
	for i := range a.presets {
		if i != edge && share(upstream[i], outside) >= mostly {
			behind = i
		}
	}

	set, _ := clientip.NewPrefixSet(trusted...)
	if set.Len() > 0 {
		goTrusted = append(goTrusted, goExpr{expr: fmt.Sprintf("clientip.MustParsePrefixSet(%q)", set.String())})
	}
	for _, i := range []int{edge, behind} {
		if i >= 0 {
			set = set.Union(a.presets[i].set)
			goTrusted = append(goTrusted, a.presets[i].expr(i == edge && len(trusted) == 0))
			if adv.Preset == "" {
				adv.Preset = a.presets[i].name
			}
		}
	}
	cfg.TrustedProxies = set
	cfg.Header = a.chooseHeader(proxies, edge, behind)
	a.finish(adv, cfg, goTrusted)
}

// chooseHeader returns the header the proxies write: the edge's own when
// it is in nearly every request from the edge; otherwise the forwarding
// header in most of the proxies' requests, list headers first; "" when the
// proxies write none (PROXY protocol).
func (a *Advisor) chooseHeader(proxies []*peerStats, edge, behind int) string {
	var counts [len(forwardingHeaders)]uint64
	var total, edgeTotal, edgeHeader uint64
	for _, p := range proxies {
		total += p.n
		for i, n := range p.headers {
			counts[i] += n
		}
		if edge >= 0 && a.presets[edge].set.Contains(p.addr) {
			edgeTotal += p.n
			if i := headerIndex(a.presets[edge].header); i >= 0 {
				edgeHeader += p.headers[i]
			}
		}
	}
	if edge >= 0 && behind < 0 && edgeTotal == total && share(edgeHeader, edgeTotal) >= always {
		return a.presets[edge].header
	}
	for i, name := range forwardingHeaders {
		if name == "Cloudfront-Viewer-Address" {
			continue // see presetDefs
		}
		if share(counts[i], total) >= mostly {
			return name // list headers come first in forwardingHeaders
		}
	}
	return ""
}

// goExpr is a Go expression of a proposal, with a comment.
type goExpr struct{ expr, comment string }

// finish validates the proposal and renders it as Go.
func (a *Advisor) finish(adv *Advice, cfg clientip.Config, trusted []goExpr) {
	r, err := clientip.New(cfg)
	if err != nil {
		adv.Findings = append(adv.Findings, Finding{Kind: FindingFewSamples, Severity: SeverityWarning,
			Text: "no valid configuration fits the traffic (" + err.Error() + "); the proposal trusts nothing"})
		cfg = clientip.Config{Masquerade: cfg.Masquerade}
		trusted = nil
		r = clientip.MustNew(cfg)
	}
	adv.Config = cfg
	adv.Proposal = configInfo(r.Config())
	var b strings.Builder
	for _, t := range trusted {
		if t.comment != "" {
			b.WriteString("// " + t.comment + "\n")
		}
	}
	b.WriteString("cfg := clientip.Config{\n")
	if len(trusted) > 0 {
		b.WriteString("\tTrustedProxies: " + trusted[0].expr)
		for _, t := range trusted[1:] {
			b.WriteString(".Union(" + t.expr + ")")
		}
		b.WriteString(",\n")
	}
	if cfg.Header != "" {
		fmt.Fprintf(&b, "\tHeader:         %q,\n", displayName(cfg.Header))
	}
	if cfg.Masquerade.Len() > 0 {
		fmt.Fprintf(&b, "\tMasquerade:     clientip.MustParsePrefixSet(%q),\n", cfg.Masquerade.String())
	}
	b.WriteString("}\n")
	adv.Go = b.String()
}

// fixedLayer reports whether another proxy layer with a few fixed
// addresses sits behind the peer: nearly every request has two entries or
// more, the rightmost ones take at most four values (kept in ups), and the
// second ones are many (the clients).
func (p *peerStats) fixedLayer(minClients int) bool {
	var deep uint64
	for d := 2; d < len(p.depth); d++ {
		deep += p.depth[d]
	}
	return !p.upsFull && len(p.ups) > 0 && share(deep, p.n) >= mostly && p.pos[1].estimate() >= minClients
}

// clients estimates the distinct clients behind the peer.
func (p *peerStats) clients() int { return max(p.behind.estimate(), p.pos[1].estimate()) }
