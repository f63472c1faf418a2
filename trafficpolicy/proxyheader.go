package trafficpolicy

import (
	"net"
	"time"

	"github.com/sourceip/sourceip/proxyproto"
)

// OptionalProxyHeader returns l as a [proxyproto.Listener] in its
// optional-header mode with no trusted upstream, for health endpoints: a
// connection may start with a PROXY protocol header, version 1 or 2
// (including the v2 LOCAL command that HAProxy and AWS NLB send on health
// checks), which is read, validated and thrown away; a connection without one
// is served as it is. An AWS NLB with proxy protocol v2 enabled puts a header
// in front of its health-check connections too, which a plain HTTP server
// answers with 400, taking every node out of service; checkers that send no
// header, as kube-proxy's healthCheckNodePort expects, are answered all the
// same.
//
// It is proxyproto.NewListener(l, proxyproto.Config{Untrusted:
// proxyproto.UntrustedIgnore, ReadHeaderTimeout: timeout}). The header's
// addresses are never believed, since no upstream is trusted: a health answer
// does not depend on who asks. Do not use this listener where the client's
// address matters; configure a proxyproto.Listener with the chain's
// clientip.Trust (whose trusted proxies are the load balancers) there. For
// a health endpoint that must require the header, serve the [HealthServer]
// on such a listener instead: a HealthServer is an [http.Handler] and runs
// on any [net.Listener].
//
// The header is read before Accept returns the connection, bounded by
// timeout (zero or negative means [proxyproto.DefaultReadHeaderTimeout]), 107
// bytes for v1 and 16+4096 bytes for v2; bytes after it are delivered to the
// server unchanged. A connection whose header is invalid or incomplete, or
// that sends nothing before the timeout, is closed without an answer and
// counted in the listener's Stats; untrusted peers' pending connections are
// bounded as the proxyproto package describes. The returned listener owns l.
// The error wraps [proxyproto.ErrInvalidConfig] when l is nil.
func OptionalProxyHeader(l net.Listener, timeout time.Duration) (*proxyproto.Listener, error) {
	return proxyproto.NewListener(l, proxyproto.Config{
		Untrusted:         proxyproto.UntrustedIgnore,
		ReadHeaderTimeout: max(timeout, 0),
	})
}
