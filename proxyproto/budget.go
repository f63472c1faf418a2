package proxyproto

import (
	"net"
	"net/netip"
	"sync"

	"github.com/sourceip/sourceip/clientip"
)

// Pending budgets: every connection a [Listener] holds while it waits for its
// header or for Accept takes a slot. Trusted proxies (the load balancers that
// send headers, and the trusted proxies that Config.Upstreams leaves out) and
// untrusted peers draw on separate budgets, so that untrusted peers, however
// many, cannot take the slots the proxies' connections need; untrusted peers
// also have a bound per source.

// ShedReason says why a [Listener] closed a connection from an untrusted peer
// on arrival, without reading from it. It is a label for metrics and log
// fields, counted in [Stats].Shed.
type ShedReason uint8

const (
	// ShedUntrustedBudget: Config.MaxPendingUntrusted connections from
	// untrusted peers were already pending.
	ShedUntrustedBudget ShedReason = iota

	// ShedSourceBudget: Config.MaxPendingPerSource connections from the same
	// untrusted source (IPv4 address or IPv6 /64) were already pending.
	ShedSourceBudget

	numShedReasons
)

var shedNames = []string{"untrusted_budget", "source_budget"}

// String returns "untrusted_budget" or "source_budget".
func (r ShedReason) String() string { return enumString(r, shedNames, "ShedReason") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (r ShedReason) MarshalText() ([]byte, error) { return enumMarshal(r, shedNames, "ShedReason") }

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (r *ShedReason) UnmarshalText(text []byte) error {
	return enumUnmarshal(r, text, shedNames, "ShedReason")
}

// untrustedBudget counts the pending connections of untrusted peers, in
// total and per source. It never blocks: a connection over budget is shed.
type untrustedBudget struct {
	max, perSource int

	mu       sync.Mutex
	pending  int
	bySource map[netip.Prefix]int // only sources with pending connections
}

// sourceKey is the unit of the per-source bound, clientip's rate-limit key:
// an IPv4 address, or the /64 an IPv6 address is in, since a single IPv6
// host is usually given a whole /64 and can pick any address in it; an IPv6
// address that carries an IPv4 address (6to4, Teredo, NAT64 64:ff9b::/96)
// counts as that IPv4 address, so that the IPv4 clients behind a NAT64
// translator, which share its /64, are not one source. Unix-domain peers,
// which have no IP address, share the zero key.
func sourceKey(a netip.Addr) netip.Prefix { return clientip.RateLimitKey(a) }

// take reserves a slot for a connection from peer, or reports which bound is
// reached.
func (b *untrustedBudget) take(peer netip.Addr) (ShedReason, bool) {
	k := sourceKey(peer)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.bySource[k] >= b.perSource:
		return ShedSourceBudget, false
	case b.pending >= b.max:
		return ShedUntrustedBudget, false
	}
	b.pending++
	b.bySource[k]++
	return 0, true
}

// release returns the slot take reserved for peer.
func (b *untrustedBudget) release(peer netip.Addr) {
	k := sourceKey(peer)
	b.mu.Lock()
	b.pending--
	if n := b.bySource[k] - 1; n > 0 {
		b.bySource[k] = n
	} else {
		delete(b.bySource, k)
	}
	b.mu.Unlock()
}

// load returns the number of pending untrusted connections.
func (b *untrustedBudget) load() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending
}

// shed closes a connection that is over budget at once, with a reset rather
// than an orderly close where the transport allows it, so that a flood leaves
// no TIME_WAIT state behind on this side.
func shed(nc net.Conn) {
	if tc, ok := nc.(interface{ SetLinger(int) error }); ok {
		tc.SetLinger(0)
	}
	nc.Close()
}
