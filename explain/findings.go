package explain

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// judge adds the findings behind adv: what each peer looks like, which
// header the proxies write, and the dangers of the configuration in force.
// deepTrust counts the resolutions that stepped over a header entry and
// found every hop trusted.
func (a *Advisor) judge(adv *Advice, stats []peerStats, rv *clientip.Resolver, deepTrust uint64) {
	cur := rv.Config()
	add := func(k FindingKind, s Severity, peer netip.Addr, format string, args ...any) {
		adv.Findings = append(adv.Findings, Finding{Kind: k, Severity: s, Peer: peer, Text: fmt.Sprintf(format, args...)})
	}
	pct := func(k, n uint64) string { return fmt.Sprintf("%.0f%%", 100*share(k, n)) }

	if adv.Sampled < minSamples {
		add(FindingFewSamples, SeverityWarning, netip.Addr{}, "the advice rests on %d sampled requests: watch longer before trusting it", adv.Sampled)
	}
	if adv.EvictedPeers > 0 {
		add(FindingFewSamples, SeverityInfo, netip.Addr{}, "%d peers lost their place in the table of %d: rare peers are not all listed (raise MaxPeers)", adv.EvictedPeers, a.cfg.MaxPeers)
	}

	var direct, total uint64
	var proxyHeaders [len(forwardingHeaders)]uint64
	var proxyRequests uint64
	for i := range stats {
		p := &stats[i]
		total += p.n
		role := a.role(p)
		trusted := rv.TrustsPeer(p.addr)
		switch role {
		case "proxy":
			proxyRequests += p.n
			for j, n := range p.headers {
				proxyHeaders[j] += n
			}
			what := "PROXY headers"
			if share(p.proxy, p.n) < mostly {
				what = "forwarding headers"
			}
			add(FindingProxy, SeverityInfo, p.addr, "%s looks like a proxy: %s in %s of its %d requests, about %d distinct clients behind it", p.addr, what, pct(p.n-p.none, p.n), p.n, p.clients())
			if a.cfg.Nodes.Contains(p.addr) {
				// trafficpolicy's recipe for a load balancer in front of
				// externalTrafficPolicy: Cluster trusts the nodes too, with
				// the same caveat (CaveatNodePortsOpen).
				const caveat = "%s is a node (Nodes), and the proposal trusts what it delivers: under externalTrafficPolicy: Cluster, whoever reaches a node port without the load balancer writes a forwarding or PROXY header of its own and is believed, so trust the nodes only while their node ports are closed to clients, or use externalTrafficPolicy: Local"
				if p.none > 0 {
					add(FindingNodeSNAT, SeverityDanger, p.addr, caveat+"; %d of its %d requests (%s) carried no header at all: clients reach it without the load balancer, unless those are the load balancer's health checks", p.addr, p.none, p.n, pct(p.none, p.n))
				} else {
					add(FindingNodeSNAT, SeverityWarning, p.addr, caveat, p.addr)
				}
			}
			if d := p.usualDepth(); d > 1 {
				add(FindingDepth, SeverityInfo, p.addr, "%s usually sends %d entries: another proxy layer is in front of it (the proposal trusts it when its addresses are few and internal, or when they are a platform's published ranges)", p.addr, d)
			}
			if share(p.headers[headerIndex("Cloudfront-Viewer-Address")], p.n) > 0 {
				add(FindingHeaderFormat, SeverityInfo, p.addr, "%s sends CloudFront-Viewer-Address, which writes an IPv6 viewer with its port and no brackets (2001:db8::1:443 is itself an address): read X-Forwarded-For instead", p.addr)
			}
		case "direct":
			direct += p.n
		case "unclear":
			if p.clients() >= a.cfg.MinClients && a.forgeable(p) {
				add(FindingUnclear, SeverityWarning, p.addr, "%s sends forwarding headers in %s of its %d requests, with about %d distinct addresses in them, but it is a public address outside every platform's published ranges: a client that writes a different header on every request looks the same; the proposal does not trust it: add it to TrustedProxies yourself only if it is your proxy", p.addr, pct(p.n-p.none, p.n), p.n, p.clients())
				break
			}
			add(FindingUnclear, SeverityWarning, p.addr, "%s sends forwarding headers in %s of its %d requests, but only about %d distinct clients are behind it: a client that forges them, or a proxy seen too little; the proposal does not trust it", p.addr, pct(p.n-p.none, p.n), p.n, p.clients())
		case "node":
			add(FindingNodeSNAT, SeverityWarning, p.addr, "node %s delivers %d requests without a PROXY or forwarding header: kube-proxy masquerades them (externalTrafficPolicy: Cluster) and the clients are lost; the proposal flags the nodes in Masquerade, and externalTrafficPolicy: Local or a PROXY header keeps the clients", p.addr, p.n)
		}

		// Dangers of the configuration in force.
		if trusted && role != "node" && p.none > 0 {
			s := SeverityWarning
			if share(p.none, p.n) >= dangerShare {
				s = SeverityDanger
			}
			add(FindingTrustedWithoutHeaders, s, p.addr, "%s is trusted, yet %d of its %d requests (%s) carried no forwarding header and no PROXY header: if it is a client and not a proxy, it can send a header of its own and be believed; unless those are its own requests (health checks), stop trusting it", p.addr, p.none, p.n, pct(p.none, p.n))
		}
		if p.leftmost > 0 {
			add(FindingLeftmost, SeverityDanger, p.addr, "%d requests from %s were answered with the leftmost entry of a header longer than it usually sends: the walk stepped over an entry a client wrote, so the trusted set contains clients (a leftmost-entry configuration)", p.leftmost, p.addr)
		}
	}
	if direct > 0 {
		add(FindingDirect, SeverityInfo, netip.Addr{}, "%s of requests (%d) arrive directly, from peers that send no forwarding or PROXY header: they are their own clients", pct(direct, total), direct)
	}
	if proxyRequests > 0 {
		var names []string
		for j, n := range proxyHeaders {
			if share(n, proxyRequests) >= mostly {
				names = append(names, displayName(forwardingHeaders[j]))
			}
		}
		if len(names) > 0 {
			add(FindingHeader, SeverityInfo, netip.Addr{}, "the proxies write %s", strings.Join(names, " and "))
		} else {
			add(FindingHeader, SeverityInfo, netip.Addr{}, "the proxies write no forwarding header consistently")
		}
	}
	if adv.Preset != "" {
		for _, p := range a.presets {
			if p.name == adv.Preset {
				add(FindingPreset, SeverityInfo, netip.Addr{}, "the proxies are %s's edge, or sit behind it: its published ranges (snapshot of %s) fit; preset %q", p.title, p.date.Format("2006-01-02"), p.name)
			}
		}
	}

	// The configured header never arrives from a trusted peer.
	if cur.Header != "" {
		var fromTrusted, carried uint64
		for i := range stats {
			p := &stats[i]
			if !rv.TrustsPeer(p.addr) {
				continue
			}
			fromTrusted += p.n
			if j := headerIndex(cur.Header); j >= 0 {
				carried += p.headers[j]
			} else {
				carried += p.other
			}
		}
		if fromTrusted > 0 && carried == 0 {
			add(FindingHeaderNeverWritten, SeverityDanger, netip.Addr{}, "the configuration reads %s, which none of the %d requests from trusted peers carried: the proxies do not write it, so no client behind them is named, and whoever reaches a trusted peer without passing through a proxy that overwrites it can supply it", displayName(cur.Header), fromTrusted)
		}
	}

	// A trusted set so wide that it contains clients.
	for _, p := range cur.TrustedProxies.Prefixes() {
		if a.wide(p) {
			what := "public address space"
			for _, e := range embedsIPv4 {
				if e.prefix.Bits() <= p.Bits() && e.prefix.Contains(p.Addr()) {
					what = e.what
					break
				}
			}
			add(FindingTooWide, SeverityDanger, netip.Addr{}, "TrustedProxies holds %s, %s wider than any proxy fleet: clients inside it are believed about any address", p, what)
		}
	}
	if n := deepTrust; n > 0 {
		s := SeverityWarning
		if share(n, adv.Sampled) >= dangerShare {
			s = SeverityDanger
		}
		add(FindingTooWide, s, netip.Addr{}, "in %d of %d requests (%s) every header entry was a trusted address: the trusted set contains their clients, or internal callers reach the service through the proxies", n, adv.Sampled, pct(n, adv.Sampled))
	}
	if cur.TrustedHops > 0 && cur.TrustedProxies.Len() == 0 && direct > 0 {
		add(FindingTrustedWithoutHeaders, SeverityDanger, netip.Addr{}, "hop-count mode without TrustedProxies trusts every socket peer, and %d requests arrive directly: their clients choose the address the walk returns", direct)
	}
}

// embedsIPv4 are the IPv6 prefixes whose addresses carry an IPv4 address
// from bit at on, each of them for the whole of IPv4 (the list
// ranges.CheckSet refuses whole): trusting 64:ff9b::/96 trusts every IPv4
// address that reaches the service through a NAT64 translator, and a
// Teredo server's /64 every IPv4 client that tunnels through it.
var embedsIPv4 = [...]struct {
	prefix netip.Prefix
	at     int
	what   string
}{
	// The IPv4 address is the last 32 bits (RFC 6052 §2.2); network-specific
	// prefixes of RFC 8215's local-use /48 are read as the /96 format.
	{netip.MustParsePrefix("64:ff9b::/96"), 96, "NAT64 space that carries public IPv4 addresses"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), 96, "NAT64 space that carries public IPv4 addresses"},
	// 2002:V4HI:V4LO::/48 belongs to the IPv4 address V4 (RFC 3056 §2).
	{netip.MustParsePrefix("2002::/16"), 16, "6to4 space that carries public IPv4 addresses"},
	// The client's IPv4 address, inverted, is the last 32 bits (RFC 4380
	// §4); anyone can use any Teredo server.
	{netip.MustParsePrefix("2001::/32"), 96, "Teredo space that carries public IPv4 addresses"},
}

// wide reports whether the trusted prefix p holds public address space
// wider than any proxy fleet: shorter than /16 for IPv4 (wideV4), or than
// /48 for IPv6 (wideV6: a /48 is one end site's assignment, RFC 6177, and a
// shorter one an ISP's allocation with its customers in it), or, inside an
// IPv6 prefix that carries IPv4 addresses (embedsIPv4), standing for more
// than an IPv4 /16; and not covered whole by internal space or by one
// platform's published ranges (Cloudflare's /32s are its own proxies).
// ranges.CheckSet's floors (/8, /16, an IPv4 /8 inside the embedding
// prefixes) are lower: they refuse a provider's list outright, where this
// warns about one operator's configuration.
func (a *Advisor) wide(p netip.Prefix) bool {
	bits := p.Bits()
	wide := p.Addr().Is4() && bits < wideV4 || p.Addr().Is6() && bits < wideV6
	for _, e := range embedsIPv4 {
		if e.prefix.Bits() <= bits && e.prefix.Contains(p.Addr()) {
			wide = wide || bits-e.at < wideV4
		}
	}
	if !wide || a.internal.Covers(p) {
		return false
	}
	for _, ps := range a.presets {
		if ps.set.Covers(p) {
			return false
		}
	}
	return true
}
