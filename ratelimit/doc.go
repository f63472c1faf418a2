// Package ratelimit limits events per client with token buckets keyed by
// the client that [github.com/sourceip/sourceip/clientip] resolved: one
// bucket per IPv4 address or IPv6 /64 (a [clientip.Keyer]; a 6to4, Teredo
// or NAT64 client by the IPv4 address it carries), optionally
// narrowed by a verified identity.
//
// A [Limiter] holds the buckets of one process in bounded memory; its
// Allow, Reserve and Wait follow golang.org/x/time/rate, each with an …At
// form that takes the time. [HTTP] is net/http middleware that resolves
// each request's client itself, takes a token, and answers a refusal with
// 429 Too Many Requests, Retry-After and the RateLimit and
// RateLimit-Policy fields of draft-ietf-httpapi-ratelimit-headers-12.
// A [Store] is where buckets live: a *Limiter is the local one; a service
// that runs as several replicas behind a load balancer needs a shared one,
// such as the Redis/Valkey store of
// github.com/sourceip/sourceip/ratelimit/redisstore (a module of its own,
// so Redis stays out of this module's dependencies).
//
// HTTPConfig.Observer takes a middleware.Observer, as the resolve
// middleware does: with otelsourceip's Instrumentation, a server whose only
// sourceip middleware is the limiter counts its resolutions and has
// client.address on otelhttp's span set to the client it keyed on, instead
// of the leftmost X-Forwarded-For entry otelhttp put there.
//
// # Threat model
//
// A rate limit is only as good as its key. The key here is the client the
// trusted chain walk names — never the socket peer when that is a proxy,
// never an X-Forwarded-For entry a client wrote — so a client cannot pick
// its bucket by forging headers. IPv6 clients are grouped by prefix (a
// /64 by default), since one host controls a whole /64 and could otherwise
// rotate through addresses. A request whose chain cannot be read takes no
// token and is refused (400 by default): it is never limited on the
// proxy's address, which would let one client exhaust everyone's bucket.
//
// A client masqueraded by a Kubernetes node (externalTrafficPolicy:
// Cluster; [clientip.ErrMasqueraded]) has lost its address: the node's
// stands in for every client it forwards. The middleware limits such
// requests on the node's key by default — no client escapes its limit,
// but the clients behind one node share a bucket — or refuses them
// (HTTPConfig.RefuseMasqueraded). An identity that narrows a bucket must
// be one the client cannot choose (a verified credential): an identity a
// client may pick lets it mint buckets.
//
// Memory is bounded: a Limiter holds at most Config.MaxKeys buckets. When a
// new key needs room it drops a full bucket first (which holds nothing a
// new bucket would not), and only when none is full the least recently
// used, so a client cannot shed its own limited bucket by minting keys
// while any bucket is full, and a limited client that keeps trying is
// never the least recently used. Stats.EvictedBusy counts the buckets
// dropped while busy.
//
// # Replicas
//
// Each replica's Limiter counts only the requests that reach it: behind a
// load balancer spreading a client over N replicas, the client gets N times
// its limit. Use a shared Store there. A shared store must decide what
// happens when its shared state is unreachable — fail open, fail closed, or
// fall back to local buckets — and say what a client can get meanwhile;
// the redisstore package documents its allowance.
//
// # Which configuration fits
//
//   - One process, or a limit that is per replica by design: a Limiter.
//   - Replicas behind a load balancer, one limit per client: a shared store
//     (redisstore), with a local fallback of Limit.Split(replicas).
//   - MQTT and raw TCP: resolve per connection (middleware.NewListener) and
//     call Reserve per message, sleeping for Decision.Delay to slow a
//     publisher down without losing anything, as the reference gateway does.
package ratelimit
