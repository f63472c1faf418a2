package explain

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// PolicyInfo compares one request or connection with what
// [trafficpolicy.Expect] says of the configured Service policy.
type PolicyInfo struct {
	// Expectation is the expectation in sentences, with the kube-proxy rule
	// it rests on.
	Expectation string `json:"expectation"`
	// Peer, ClientLayer and ProxyHeader are what the policy expects: who
	// the socket sees, the layer the client's address survives in
	// (clientip.SourceNone when it is lost), and whether a PROXY header
	// arrives.
	Peer        trafficpolicy.Peer `json:"peer"`
	ClientLayer clientip.Source    `json:"client_layer"`
	ProxyHeader bool               `json:"proxy_header"`
	// Recipe is the clientip configuration the policy calls for, for people.
	Recipe string `json:"recipe"`
	// Checks compare each expectation with what this request shows.
	Checks []PolicyCheck `json:"checks"`
}

// PolicyCheck is one comparison of expectation and observation.
type PolicyCheck struct {
	// Name is "delivered", "proxy_header", "peer", "client_layer",
	// "recipe_header", "recipe_trust" or "recipe_masquerade".
	Name string `json:"name"`
	// Status is "ok", "mismatch", or "unknown" when the observation or the
	// addresses needed to judge it are missing.
	Status string `json:"status"`
	Text   string `json:"text"`
}

// Check statuses.
const (
	statusOK       = "ok"
	statusMismatch = "mismatch"
	statusUnknown  = "unknown"
)

// policyInfo compares the request's resolution res, made under cfg, with
// the expectation of case c in network n. sawProxy is whether a PROXY
// header arrived; proxyKnown whether that is known.
func policyInfo(c trafficpolicy.Case, n trafficpolicy.Network, cfg clientip.Config, res clientip.Result, err error, sawProxy, proxyKnown bool) *PolicyInfo {
	e := trafficpolicy.Expect(c)
	p := &PolicyInfo{
		Expectation: e.String(), Peer: e.Peer, ClientLayer: e.Client, ProxyHeader: e.ProxyHeader, Recipe: e.Recipe(),
	}
	add := func(name, status, text string) {
		p.Checks = append(p.Checks, PolicyCheck{Name: name, Status: status, Text: text})
	}
	if e.Outcome != trafficpolicy.Delivered {
		add("delivered", statusMismatch, "the policy says this path is "+e.Outcome.String()+", yet the request arrived: the configured case is not the one in force")
		return p
	}

	switch {
	case !proxyKnown:
		add("proxy_header", statusUnknown, "whether a PROXY header arrived is not known here (serve through a proxyproto.Listener with http.Server.ConnContext set to proxyproto.ConnContext)")
	case e.ProxyHeader && !sawProxy:
		add("proxy_header", statusMismatch, "the policy expects the load balancer's PROXY header; none arrived")
	case !e.ProxyHeader && sawProxy:
		add("proxy_header", statusMismatch, "a PROXY header arrived where the policy expects none")
	default:
		add("proxy_header", statusOK, "a PROXY header arrived as expected, or none as expected")
	}

	peer := res.Peer.Addr().Unmap()
	switch got, known := peerKind(peer, n, e.Peer); {
	case !known:
		add("peer", statusUnknown, "the socket peer "+addrText(peer)+" cannot be classed: the policy expects "+e.Sees()+", and Network does not list those addresses")
	case got != e.Peer:
		add("peer", statusMismatch, "the socket peer "+addrText(peer)+" is not what the policy expects: "+e.Sees())
	default:
		add("peer", statusOK, "the socket peer "+addrText(peer)+" is the "+e.Sees()+", as expected")
	}

	switch {
	case e.Client == clientip.SourceNone && (res.Masqueraded || err != nil):
		add("client_layer", statusOK, "the policy says the client is lost, and the answer is flagged or refused")
	case e.Client == clientip.SourceNone:
		add("client_layer", statusMismatch, "the policy says the client is lost, yet "+res.Client.String()+" was taken for it: add the node addresses to Masquerade")
	case err != nil:
		add("client_layer", statusMismatch, "the policy expects the client in the "+e.Client.String()+" layer; resolution failed")
	case res.Source != e.Client:
		add("client_layer", statusMismatch, "the policy expects the client in the "+e.Client.String()+" layer; it came from "+res.Source.String())
	default:
		add("client_layer", statusOK, "the client came from the "+res.Source.String()+" layer, as expected")
	}

	rc, rerr := e.Config(n)
	if rerr != nil {
		add("recipe_trust", statusUnknown, rerr.Error())
		return p
	}
	if canonicalHeader(rc.Header) == canonicalHeader(cfg.Header) {
		add("recipe_header", statusOK, "the configured header matches the recipe")
	} else {
		add("recipe_header", statusMismatch, "the recipe reads "+orNone(rc.Header)+"; the configuration reads "+orNone(cfg.Header))
	}
	// Trusting less than the recipe loses clients; trusting more believes
	// whoever the extra addresses are about any address, which is the
	// dangerous direction, so both are mismatches.
	switch extra := uncovered(cfg.TrustedProxies, rc.TrustedProxies); {
	case !covers(cfg.TrustedProxies, rc.TrustedProxies):
		add("recipe_trust", statusMismatch, "TrustedProxies misses addresses the recipe trusts ("+e.Trust.String()+": "+rc.TrustedProxies.String()+")")
	case len(extra) > 0:
		add("recipe_trust", statusMismatch, "TrustedProxies trusts more than the recipe ("+e.Trust.String()+": "+orNothing(rc.TrustedProxies)+"): whoever sits in "+prefixList(extra)+" is believed about any address; keep them only if they are proxies in front of the load balancer")
	default:
		add("recipe_trust", statusOK, "TrustedProxies covers the groups the recipe trusts ("+e.Trust.String()+")")
	}
	if covers(cfg.Masquerade, rc.Masquerade) {
		add("recipe_masquerade", statusOK, "Masquerade covers the nodes and load balancers")
	} else {
		add("recipe_masquerade", statusMismatch, "Masquerade misses addresses that stand in for clients ("+rc.Masquerade.String()+")")
	}
	return p
}

// peerKind classes a socket peer by the addresses n lists, and reports
// whether it could: a peer that is in neither group is a client only when
// the group the policy expects is listed.
func peerKind(a netip.Addr, n trafficpolicy.Network, want trafficpolicy.Peer) (trafficpolicy.Peer, bool) {
	switch {
	case a.IsValid() && n.LoadBalancers.Contains(a):
		return trafficpolicy.PeerLoadBalancer, true
	case a.IsValid() && n.Nodes.Contains(a):
		return trafficpolicy.PeerNode, true
	}
	switch want {
	case trafficpolicy.PeerLoadBalancer:
		return trafficpolicy.PeerClient, n.LoadBalancers.Len() > 0
	case trafficpolicy.PeerNode:
		return trafficpolicy.PeerClient, n.Nodes.Len() > 0
	case trafficpolicy.PeerClient:
		return trafficpolicy.PeerClient, n.Nodes.Len() > 0 || n.LoadBalancers.Len() > 0
	}
	return trafficpolicy.PeerUnknown, false
}

// covers reports whether set covers every prefix of sub.
func covers(set, sub clientip.PrefixSet) bool {
	for _, p := range sub.Prefixes() {
		if !set.Covers(p) {
			return false
		}
	}
	return true
}

// uncovered returns the prefixes of set that sub does not cover whole.
func uncovered(set, sub clientip.PrefixSet) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range set.Prefixes() {
		if !sub.Covers(p) {
			out = append(out, p)
		}
	}
	return out
}

// prefixList writes ps comma-separated, at most eight of them.
func prefixList(ps []netip.Prefix) string {
	const most = 8
	var b strings.Builder
	for i, p := range ps {
		if i == most {
			fmt.Fprintf(&b, " and %d more", len(ps)-most)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

func orNothing(s clientip.PrefixSet) string {
	if s.Len() == 0 {
		return "nothing"
	}
	return s.String()
}

func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return "unix"
	}
	return a.String()
}

func orNone(h string) string {
	if h == "" {
		return "no header"
	}
	return h
}
