package trafficpolicy

import (
	"net/netip"
	"sync"
)

// EndpointState is the condition of one local endpoint, as an EndpointSlice
// reports it. The zero value is [EndpointNotReady].
type EndpointState uint8

const (
	// EndpointNotReady: running but not ready (failing its readiness probe,
	// still starting). Not counted.
	EndpointNotReady EndpointState = iota
	// EndpointReady: ready to serve. Counted.
	EndpointReady
	// EndpointTerminating: shutting down. Not counted, even while it still
	// serves: kube-proxy's health check fails once only terminating endpoints
	// are left, so load balancers drain the node while existing and stray
	// connections are still served.
	EndpointTerminating
)

var endpointStateNames = []string{"NotReady", "Ready", "Terminating"}

// String returns "NotReady", "Ready" or "Terminating".
func (s EndpointState) String() string { return enumString(endpointStateNames, s, "EndpointState") }

// MarshalText implements [encoding.TextMarshaler].
func (s EndpointState) MarshalText() ([]byte, error) {
	return enumMarshal(endpointStateNames, s, "EndpointState")
}

// UnmarshalText implements [encoding.TextUnmarshaler].
func (s *EndpointState) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[EndpointState](endpointStateNames, text, "EndpointState")
	if err == nil {
		*s = v
	}
	return err
}

// Registry holds the node-local endpoints of one Service and counts the
// ready ones the way kube-proxy's EndpointsMap.LocalReadyEndpoints does: the
// number of distinct IP addresses with at least one ready endpoint, so a pod
// serving ports 80 and 443 counts once. The caller keeps it up to date from
// whatever it watches (EndpointSlices, its own process table, a test).
//
// kube-proxy counts one IP family: on a dual-stack node each family's
// proxier opens the health check node port, one of them gets it
// (kubernetes#114702), and it counts its own family's endpoints. Hold the
// endpoints of one family (the cluster's primary) to answer as kube-proxy
// does; holding both counts a dual-stack pod twice (the policy lab's live
// comparison with kube-proxy shows the difference).
//
// The zero value is an empty registry, ready to use. A Registry is safe for
// concurrent use; it must not be copied after first use. Reading the count
// does not allocate.
type Registry struct {
	mu    sync.RWMutex
	eps   map[netip.AddrPort]EndpointState
	ready map[netip.Addr]int // ready endpoints per address
}

func canonicalEndpoint(ep netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ep.Addr().Unmap().WithZone(""), ep.Port())
}

// Set records endpoint ep (an address and port; IPv4-mapped addresses are
// unmapped) in state s, adding it if it is new. An ep whose address is
// invalid, such as the zero AddrPort a failed parse returns, is no endpoint:
// Set ignores it, so that it never counts as a ready one.
func (r *Registry) Set(ep netip.AddrPort, s EndpointState) {
	if !ep.Addr().IsValid() {
		return
	}
	ep = canonicalEndpoint(ep)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.eps == nil {
		r.eps = make(map[netip.AddrPort]EndpointState)
		r.ready = make(map[netip.Addr]int)
	}
	old, had := r.eps[ep]
	r.eps[ep] = s
	if had && old == EndpointReady {
		r.unready(ep.Addr())
	}
	if s == EndpointReady {
		r.ready[ep.Addr()]++
	}
}

// Remove forgets endpoint ep. Removing an endpoint that is not there does nothing.
func (r *Registry) Remove(ep netip.AddrPort) {
	ep = canonicalEndpoint(ep)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, had := r.eps[ep]; had {
		delete(r.eps, ep)
		if old == EndpointReady {
			r.unready(ep.Addr())
		}
	}
}

func (r *Registry) unready(a netip.Addr) {
	if r.ready[a]--; r.ready[a] == 0 {
		delete(r.ready, a)
	}
}

// State returns ep's state and whether the registry holds ep.
func (r *Registry) State(ep netip.AddrPort) (EndpointState, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.eps[canonicalEndpoint(ep)]
	return s, ok
}

// Len returns the number of endpoints held, in any state.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.eps)
}

// LocalReady returns the number of distinct addresses with a ready endpoint:
// the localEndpoints of kube-proxy's health answer.
func (r *Registry) LocalReady() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.ready)
}
