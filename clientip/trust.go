package clientip

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
