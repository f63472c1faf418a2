package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// layers is what one connection showed at each layer, in the words of the
// report, so that the model's answer and the kernel's can be compared as
// values.
type layers struct {
	Outcome  string // delivered, dropped, refused by the PROXY listener, …
	Peer     string // socket peer: client, node, load balancer
	Proxy    string // PROXY header source: client, none
	Survives string // where the client's address survives: socket, PROXY header, lost
	ClientIP string // clientip's answer: client (socket), client (proxy-protocol), masqueraded (flagged)
}

const dash = "–"

const (
	outDelivered = "delivered"
	outDropped   = "dropped"
	outRefusedPP = "refused by PROXY listener"
	clientFlag   = "masqueraded (flagged)"
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
		return dash
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

// trusts reports whether a clientip recipe that trusts t trusts a socket
// peer of kind p.
func trusts(t trafficpolicy.Trust, p trafficpolicy.Peer) bool {
	switch p {
	case trafficpolicy.PeerNode:
		return t&trafficpolicy.TrustNodes != 0
	case trafficpolicy.PeerLoadBalancer:
		return t&trafficpolicy.TrustLoadBalancers != 0
	}
	return false
}

// expected is the model's answer in the report's words. deployed, when not
// nil, is the expectation the backend was configured for instead (the
// load-balancer path of the same Service): its PROXY listener refuses a
// trusted peer that sends no header (proxyproto's HeaderlessRefuse).
func expected(exp trafficpolicy.Expectation, deployed *trafficpolicy.Expectation) layers {
	switch exp.Outcome {
	case trafficpolicy.Dropped:
		return layers{outDropped, dash, dash, dash, dash}
	case trafficpolicy.NotExposed:
		return layers{"not exposed", dash, dash, dash, dash}
	}
	w := layers{Outcome: outDelivered, Peer: peerWord(exp.Peer), Proxy: "none", Survives: layerWord(exp.Client)}
	if exp.ProxyHeader {
		w.Proxy = "client"
	}
	if exp.Recoverable() {
		w.ClientIP = "client (" + exp.Client.String() + ")"
	} else {
		w.ClientIP = clientFlag
	}
	if deployed != nil && deployed.ProxyHeader && !exp.ProxyHeader && trusts(deployed.Trust, exp.Peer) {
		w.Outcome, w.Proxy, w.Survives, w.ClientIP = outRefusedPP, dash, dash, dash
	}
	return w
}

func failWord(kind string) string {
	switch kind {
	case failTimeout:
		return outDropped
	case failRefused:
		return "refused (RST)"
	case failClosed:
		return "closed without answer"
	case failUnreachable:
		return "unreachable"
	}
	return "error"
}

// peerClass names who addr is: the caller itself, a node, the load balancer.
func peerClass(addr, caller netip.Addr, n trafficpolicy.Network) string {
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
func observed(a attempt, n trafficpolicy.Network) layers {
	if a.Obs == nil {
		return layers{failWord(a.Fail), dash, dash, dash, dash}
	}
	o, client := a.Obs, a.Client.Addr()
	got := layers{Outcome: outDelivered, Peer: peerClass(o.Peer.Addr(), client, n)}
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
		got.ClientIP = clientFlag
	default:
		got.ClientIP = "error: " + o.Err
	}
	return got
}

// tally counts distinct values in first-seen order.
type tally struct {
	keys []string
	n    map[string]int
}

func (t *tally) add(k string) {
	if t.n == nil {
		t.n = make(map[string]int)
	}
	if t.n[k] == 0 {
		t.keys = append(t.keys, k)
	}
	t.n[k]++
}

func (t *tally) only(k string) bool { return len(t.keys) == 1 && t.keys[0] == k }

func (t *tally) String() string {
	if len(t.keys) == 1 {
		return t.keys[0]
	}
	parts := make([]string, len(t.keys))
	for i, k := range t.keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, t.n[k])
	}
	return strings.Join(parts, ", ")
}

// judgement is a row's comparison of the kernel with the model.
type judgement struct {
	Observed, Expected layers
	Peers              []string // distinct socket peers, "class addr"
	Problems           []string
}

// judge compares every attempt of a row, layer by layer, with want.
// Connections a PROXY listener refused never reach the backend's handler;
// they are matched with the listener's rejections, whose peers are the
// socket peers.
func judge(atts []attempt, rejections []proxyproto.Rejection, caller netip.Addr, want layers, n trafficpolicy.Network) judgement {
	var out, peer, proxy, surv, cip tally
	peerAddrs := map[string]bool{}
	var j judgement
	if len(atts) == 0 {
		j.Problems = append(j.Problems, "no connection was attempted")
	}
	for _, a := range atts {
		got := observed(a, n)
		if a.Fail == failClosed && len(rejections) > 0 {
			got = layers{outRefusedPP, dash, dash, dash, dash}
		}
		out.add(got.Outcome)
		proxy.add(got.Proxy)
		surv.add(got.Survives)
		cip.add(got.ClientIP)
		if a.Obs != nil {
			peer.add(got.Peer)
			peerAddrs[got.Peer+" "+a.Obs.Peer.Addr().Unmap().String()] = true
		}
	}
	for _, r := range rejections {
		c := peerClass(r.Peer.Addr(), caller, n)
		peer.add(c)
		peerAddrs[c+" "+r.Peer.Addr().Unmap().String()] = true
		if r.Reason != proxyproto.ReasonNoHeader {
			j.Problems = append(j.Problems, fmt.Sprintf("PROXY listener refused %s: %v", r.Peer, r.Err))
		}
	}
	if peer.keys == nil {
		peer.add(dash)
	}
	j.Observed = layers{out.String(), peer.String(), proxy.String(), surv.String(), cip.String()}
	j.Expected = want
	for _, c := range []struct {
		name string
		t    *tally
		want string
	}{
		{"outcome", &out, want.Outcome},
		{"socket peer", &peer, want.Peer},
		{"PROXY header", &proxy, want.Proxy},
		{"client address survives in", &surv, want.Survives},
		{"clientip", &cip, want.ClientIP},
	} {
		if !c.t.only(c.want) {
			j.Problems = append(j.Problems, fmt.Sprintf("%s: kernel %q, model %q", c.name, c.t.String(), c.want))
		}
	}
	if want.Outcome == outRefusedPP && len(rejections) != len(atts) {
		j.Problems = append(j.Problems, fmt.Sprintf("%d connections closed, %d refusals recorded", len(atts), len(rejections)))
	}
	for k := range peerAddrs {
		j.Peers = append(j.Peers, k)
	}
	slices.Sort(j.Peers)
	return j
}
