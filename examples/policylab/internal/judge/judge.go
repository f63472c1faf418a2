// Package judge compares what the kernel delivered with what
// trafficpolicy.Expect says, layer by layer, in the words of the report.
package judge

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/policylab/internal/backend"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Layers is what one connection showed at each layer, in the words of the
// report, so that the model's answer and the kernel's can be compared as
// values.
type Layers struct {
	Outcome  string // delivered, dropped, refused by the PROXY listener, …
	Peer     string // socket peer: client, node, load balancer
	Proxy    string // PROXY header source: client, none
	Survives string // where the client's address survives: socket, PROXY header, lost
	ClientIP string // clientip's answer: client (socket), client (proxy-protocol), masqueraded (flagged)
}

const Dash = "–"

const (
	OutDelivered = "delivered"
	OutDropped   = "dropped"
	OutRefusedPP = "refused by PROXY listener"
	ClientFlag   = "masqueraded (flagged)"
)

func peerWord(p trafficpolicy.Peer) string {
	switch p {
	case trafficpolicy.PeerClient:
		return "client"
	case trafficpolicy.PeerNode:
		return "node"
	case trafficpolicy.PeerLoadBalancer:
		return "load balancer"
	case trafficpolicy.PeerNone:
		return Dash
	}
	return "unknown"
}

func layerWord(s clientip.Source) string {
	switch s {
	case clientip.SourceSocket:
		return "socket"
	case clientip.SourceProxyProtocol:
		return "PROXY header"
	case clientip.SourceNone:
		return "lost"
	}
	return s.String()
}

// Expected is the model's answer in the report's words. deployed, when not
// nil, is the expectation the backend was configured for instead (the
// load-balancer path of the same Service, whose PROXY listener requires the
// header from the peers it trusts): the connections are refused where the
// model says so, with CaveatNoProxyHeaderFromNode, and served as exp says
// otherwise.
func Expected(exp trafficpolicy.Expectation, deployed *trafficpolicy.Expectation) Layers {
	switch exp.Outcome {
	case trafficpolicy.Dropped:
		return Layers{OutDropped, Dash, Dash, Dash, Dash}
	case trafficpolicy.NotExposed:
		return Layers{"not exposed", Dash, Dash, Dash, Dash}
	}
	w := Layers{Outcome: OutDelivered, Peer: peerWord(exp.Peer), Proxy: "none", Survives: layerWord(exp.Client)}
	if exp.ProxyHeader {
		w.Proxy = "client"
	}
	if exp.Recoverable() {
		w.ClientIP = "client (" + exp.Client.String() + ")"
	} else {
		w.ClientIP = ClientFlag
	}
	if deployed != nil && deployed.ProxyHeader && !exp.ProxyHeader && exp.Caveats&trafficpolicy.CaveatNoProxyHeaderFromNode != 0 {
		w.Outcome, w.Proxy, w.Survives, w.ClientIP = OutRefusedPP, Dash, Dash, Dash
	}
	return w
}

// FailWord names a failure kind in the report's words.
func FailWord(kind string) string {
	switch kind {
	case backend.FailTimeout:
		return OutDropped
	case backend.FailRefused:
		return "refused (RST)"
	case backend.FailClosed:
		return "closed without answer"
	case backend.FailUnreachable:
		return "unreachable"
	}
	return "error"
}

// PeerClass names who addr is: the caller itself, a node, the load balancer.
func PeerClass(addr, caller netip.Addr, n trafficpolicy.Network) string {
	addr = addr.Unmap()
	switch {
	case addr == caller:
		return "client"
	case n.Nodes.Contains(addr):
		return "node"
	case n.LoadBalancers.Contains(addr):
		return "load balancer"
	}
	return "other"
}

// observed is what one delivered connection showed, in the report's words.
func observed(a backend.Attempt, n trafficpolicy.Network) Layers {
	if a.Obs == nil {
		return Layers{FailWord(a.Fail), Dash, Dash, Dash, Dash}
	}
	o, client := a.Obs, a.Client.Addr()
	got := Layers{Outcome: OutDelivered, Peer: PeerClass(o.Peer.Addr(), client, n)}
	proxyClient := o.ProxyCommand == proxyproto.CommandProxy.String() && o.ProxySource.Addr() == client
	switch {
	case proxyClient:
		got.Proxy = "client"
	case o.ProxyCommand == proxyproto.CommandProxy.String():
		got.Proxy = "other (" + o.ProxySource.Addr().String() + ")"
	case o.ProxyCommand == proxyproto.CommandLocal.String():
		got.Proxy = "LOCAL"
	default:
		got.Proxy = "none"
	}
	switch {
	case o.Peer.Addr().Unmap() == client:
		got.Survives = "socket"
	case proxyClient:
		got.Survives = "PROXY header"
	default:
		got.Survives = "lost"
	}
	switch {
	case o.Err == "" && o.Client == client:
		got.ClientIP = "client (" + o.Source + ")"
	case o.Err == "":
		got.ClientIP = "wrong client " + o.Client.String() + " (" + o.Source + ")"
	case o.Err == "masqueraded" && o.Masqueraded:
		got.ClientIP = ClientFlag
	default:
		got.ClientIP = "error: " + o.Err
	}
	return got
}

// Tally counts distinct values in first-seen order.
type Tally struct {
	Keys []string
	N    map[string]int
}

// Add counts k.
func (t *Tally) Add(k string) {
	if t.N == nil {
		t.N = make(map[string]int)
	}
	if t.N[k] == 0 {
		t.Keys = append(t.Keys, k)
	}
	t.N[k]++
}

// Only reports whether k is the only value counted.
func (t *Tally) Only(k string) bool { return len(t.Keys) == 1 && t.Keys[0] == k }

func (t *Tally) String() string {
	if len(t.Keys) == 1 {
		return t.Keys[0]
	}
	parts := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, t.N[k])
	}
	return strings.Join(parts, ", ")
}

// Judgement is a row's comparison of the kernel with the model.
type Judgement struct {
	Observed, Expected Layers
	Peers              []string // distinct socket peers, "class addr"
	Problems           []string
}

// Judge compares every backend.Attempt of a row, layer by layer, with want.
// Connections a PROXY listener refused never reach the backend's handler;
// they are matched with the listener's rejections, whose peers are the
// socket peers.
func Judge(atts []backend.Attempt, rejections []proxyproto.Rejection, caller netip.Addr, want Layers, n trafficpolicy.Network) Judgement {
	var out, peer, proxy, surv, cip Tally
	peerAddrs := map[string]bool{}
	var j Judgement
	if len(atts) == 0 {
		j.Problems = append(j.Problems, "no connection was attempted")
	}
	for _, a := range atts {
		got := observed(a, n)
		if a.Fail == backend.FailClosed && len(rejections) > 0 {
			got = Layers{OutRefusedPP, Dash, Dash, Dash, Dash}
		}
		out.Add(got.Outcome)
		proxy.Add(got.Proxy)
		surv.Add(got.Survives)
		cip.Add(got.ClientIP)
		if a.Obs != nil {
			peer.Add(got.Peer)
			peerAddrs[got.Peer+" "+a.Obs.Peer.Addr().Unmap().String()] = true
		}
	}
	for _, r := range rejections {
		c := PeerClass(r.Peer.Addr(), caller, n)
		peer.Add(c)
		peerAddrs[c+" "+r.Peer.Addr().Unmap().String()] = true
		if r.Reason != proxyproto.ReasonNoHeader {
			j.Problems = append(j.Problems, fmt.Sprintf("PROXY listener refused %s: %v", r.Peer, r.Err))
		}
	}
	if peer.Keys == nil {
		peer.Add(Dash)
	}
	j.Observed = Layers{out.String(), peer.String(), proxy.String(), surv.String(), cip.String()}
	j.Expected = want
	for _, c := range []struct {
		name string
		t    *Tally
		want string
	}{
		{"outcome", &out, want.Outcome},
		{"socket peer", &peer, want.Peer},
		{"PROXY header", &proxy, want.Proxy},
		{"client address survives in", &surv, want.Survives},
		{"clientip", &cip, want.ClientIP},
	} {
		if !c.t.Only(c.want) {
			j.Problems = append(j.Problems, fmt.Sprintf("%s: kernel %q, model %q", c.name, c.t.String(), c.want))
		}
	}
	if want.Outcome == OutRefusedPP && len(rejections) != len(atts) {
		j.Problems = append(j.Problems, fmt.Sprintf("%d connections closed, %d refusals recorded", len(atts), len(rejections)))
	}
	for k := range peerAddrs {
		j.Peers = append(j.Peers, k)
	}
	slices.Sort(j.Peers)
	return j
}
