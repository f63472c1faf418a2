package presets

import "github.com/sourceip/sourceip/clientip"

// Topology says how requests travel from the edge to the service: [Direct]
// (the edge connects to the service) or [BehindIngress] (the edge connects
// to an ingress — a load balancer, ingress-nginx, an internal proxy — that
// connects to the service). It decides which header a preset reads and
// whom it trusts to deliver it.
//
// The zero Topology is neither, and [New] refuses it: the choice decides
// what a forged header can do, so there is no default.
type Topology struct {
	kind    topologyKind
	ingress clientip.PrefixSet
}

type topologyKind uint8

const (
	topologyUnset topologyKind = iota
	topologyDirect
	topologyIngress
)

// Direct is the topology where the edge connects to the service itself:
// the edge's own client header is read, and believed only from a socket
// peer inside the edge's ranges. Anyone else is the client, whatever it
// sent.
func Direct() Topology { return Topology{kind: topologyDirect} }

// BehindIngress is the topology edge → ingress → service, where ingress
// holds the addresses the ingress connects to the service from (pod or
// subnet ranges of ingress-nginx, an ALB's subnets, a sidecar's loopback
// address). X-Forwarded-For is walked from the right: through the ingress,
// then through the edge's ranges, to the first address outside both.
//
// The edge's own single-address header (CF-Connecting-IP, Fastly-Client-IP,
// True-Client-IP, Fly-Client-IP) is not read: an ingress forwards whatever
// header its client sent, so a value that arrives through it proves nothing
// about the edge — a client that reaches the ingress without the edge can
// write any of them. X-Forwarded-For carries the address the ingress
// received the connection from, so the walk tells the edge's entries from
// a client's. The ingress must append its peer to X-Forwarded-For (nginx's
// $proxy_add_x_forwarded_for, ingress-nginx's compute-full-forwarded-for,
// an ALB's append mode); one that replaces it or passes it on untouched
// defeats the walk.
//
// An empty ingress set is refused by [New].
func BehindIngress(ingress clientip.PrefixSet) Topology {
	return Topology{kind: topologyIngress, ingress: ingress}
}

// IsDirect reports whether t is [Direct].
func (t Topology) IsDirect() bool { return t.kind == topologyDirect }

// Ingress returns the ingress's addresses: the set given to
// [BehindIngress], empty for [Direct].
func (t Topology) Ingress() clientip.PrefixSet { return t.ingress }

// String returns "direct", "behind-ingress <prefixes>", or "unset".
func (t Topology) String() string {
	switch t.kind {
	case topologyDirect:
		return "direct"
	case topologyIngress:
		return "behind-ingress " + t.ingress.String()
	}
	return "unset"
}
