package clientip

import "net/netip"

// Trust is the one source of trust configuration that every layer of a
// deployment reads: the resolver's walk, the PROXY protocol listener (which
// upstreams may send a header), the HTTP middleware and the connection
// listener wrapper. Configure it once and hand the same value to each layer,
// so that "one chain, one trust set" holds in the code and not only in the
// documentation.
//
// Resolver returns the [Resolver] in force now. Callers load it once per
// connection or request and finish that connection or request on it, so a
// change of configuration never splits one walk between two trust sets.
// Implementations must be safe for concurrent use, must not block or
// allocate, and must never return nil.
//
// A *Resolver is a static Trust: its Resolver method returns itself.
type Trust interface {
	Resolver() *Resolver
}

// Resolver returns r itself, so that a *Resolver is a static [Trust]. It
// does not allocate.
func (r *Resolver) Resolver() *Resolver { return r }

// TrustsPeer reports whether r's walk steps over a socket peer at address a
// (hop 0) to read the layers it delivered, with the walk's own test: a is in
// TrustedProxies (in canonical form: unmapped, zone ignored); in hop-count
// mode with no TrustedProxies, any IP address is; the invalid address stands
// for a Unix-domain peer, trusted when TrustUnixSocket is set; 0.0.0.0 and ::
// never are. The proxyproto package decides with it which peers may send a
// PROXY header, except that it never takes hop-count mode's "any address"
// as naming an upstream. It does not allocate.
func (r *Resolver) TrustsPeer(a netip.Addr) bool {
	if !a.IsValid() {
		return r.trustUnix
	}
	a = a.Unmap().WithZone("")
	switch {
	case a.IsUnspecified():
		return false
	case r.hops > 0 && r.trusted.Len() == 0:
		return true
	}
	return r.trusted.containsCanon(a)
}
