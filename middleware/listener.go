package middleware

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// NewListener returns a listener whose connections carry their client's
// resolution, for MQTT brokers, raw TCP servers and other protocols without
// per-request headers. Each connection inner accepts is resolved once, in
// Accept, under trust and with no headers; read the result back with
// [ResultFromConn]. Give it the Trust the proxyproto listener and the rest
// of the chain have (a *clientip.Resolver, or a *clientip.Store to change it
// while serving).
//
// A connection from a proxyproto.Listener configured with the same Trust is
// resolved with the resolver that listener judged it with
// (proxyproto.ResolverFromConn): a connection finishes on the configuration
// it started with, so the walk never reads a PROXY layer under a trust other
// than the one that believed it, even if a Store changed in between. Any
// other connection is resolved with the resolver trust has in force when
// Accept returns it.
//
// The layers come from proxyproto.FactsFromConn when inner is a
// *proxyproto.Listener (or hands out connections that wrap a *proxyproto.Conn):
// the socket peer is the load balancer and the PROXY source is the
// candidate client. Otherwise the socket peer is the connection's
// RemoteAddr; a Unix-domain peer has no IP address, and any other address
// that is not an IP address and port fails with [clientip.ErrNoAddress].
//
// Resolution failures do not refuse connections: the connection is returned
// with its error, to be judged by the server (for example with
// [Policy.Check]) where it can answer in its own protocol. Put TLS
// outside this listener, tls.NewListener(middleware.NewListener(pp, trust), cfg),
// so that servers that look for a *tls.Conn still find one; ResultFromConn
// sees through it.
//
// A nil trust resolves nothing: every connection carries an error wrapping
// [ErrInvalidConfig], so servers that refuse on error refuse them all.
//
// Accept makes one allocation per connection beyond inner's (the wrapper),
// and more only when resolution fails. The returned connections keep inner's
// fast paths for io.Copy (ReadFrom, WriteTo) and CloseWrite.
func NewListener(inner net.Listener, trust clientip.Trust) net.Listener {
	return &listener{Listener: inner, trust: trust}
}

type listener struct {
	net.Listener
	trust clientip.Trust
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	t, err := transportOf(c)
	r := proxyproto.ResolverFromConn(c, l.trust)
	var res clientip.Result
	switch {
	case r == nil:
		res, err = clientip.Result{Peer: t.Peer, Proxy: t.Proxy}, errNilResolver
	case err == nil:
		res, err = r.Resolve(t, nil)
	}
	return &conn{Conn: c, res: res, err: err}, nil
}

// transportOf returns what c tells about its layers.
func transportOf(c net.Conn) (clientip.Transport, error) {
	if f, ok := proxyproto.FactsFromConn(c); ok {
		return f.Transport(), nil
	}
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		if !ap.Addr().IsValid() {
			// No IP address (a nil or zero TCPAddr from a wrapper that
			// does not know its peer): not a Unix socket, so never one
			// TrustUnixSocket trusts.
			return clientip.Transport{}, &clientip.ChainError{Err: clientip.ErrNoAddress, Value: a.String()}
		}
		return clientip.Transport{Peer: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	case *net.UnixAddr:
		return clientip.Transport{}, nil
	case nil:
		return clientip.Transport{}, &clientip.ChainError{Err: clientip.ErrNoAddress}
	default:
		// Only an IP network's address names an IP peer: another kind may be
		// text its client chose (a Unix socket's is a path, which can read
		// "127.0.0.1:9").
		var ap netip.AddrPort
		err := errors.ErrUnsupported
		if n := a.Network(); strings.HasPrefix(n, "tcp") || strings.HasPrefix(n, "udp") {
			ap, err = netip.ParseAddrPort(a.String())
		}
		if err != nil || ap.Addr().Zone() != "" {
			return clientip.Transport{}, &clientip.ChainError{Err: clientip.ErrNoAddress, Value: a.String()}
		}
		return clientip.Transport{Peer: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	}
}

// WithResult returns c carrying a resolution made elsewhere, res and err, so
// that [ResultFromConn] finds it as for a connection [NewListener]
// accepted: for a connection whose client was resolved from something the
// listener never sees, such as the HTTP request a WebSocket was upgraded
// from (resolve it with [clientip.Resolver.ResolveRequest] under the chain's
// Trust, then wrap the upgraded connection). The returned connection reads,
// writes and closes c, and keeps its fast paths (io.ReaderFrom,
// io.WriterTo, CloseWrite) and its NetConn chain, so that
// proxyproto.FactsFromConn sees through it. It makes one allocation.
//
// The resolution is what c's server judges the connection by: pass the
// Result and error of a resolution under the chain's trust, never one built
// from what the client says.
func WithResult(c net.Conn, res clientip.Result, err error) net.Conn {
	return &conn{Conn: c, res: res, err: err}
}

// conn is a connection accepted by a NewListener listener.
type conn struct {
	net.Conn
	res clientip.Result
	err error
}

// NetConn returns the wrapped connection, as tls.Conn.NetConn does, so that
// proxyproto.FactsFromConn and other unwrapping helpers see through conn.
func (c *conn) NetConn() net.Conn { return c.Conn }

// ReadFrom uses the wrapped connection's io.ReaderFrom (sendfile, splice)
// when it has one.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// WriteTo uses the wrapped connection's io.WriterTo when it has one.
func (c *conn) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := c.Conn.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{c.Conn})
}

// CloseWrite shuts down the writing side when the wrapped connection can.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoCloseWrite
}

var errNilResolver = fmt.Errorf("%w: NewListener without a Trust", ErrInvalidConfig)

var errNoCloseWrite = errors.New("middleware: connection does not support CloseWrite")

// ResultFromConn returns the resolution of a connection accepted through
// [NewListener]: the Result and the error [clientip.Resolver.Resolve]
// returned for it, or the ones given to [WithResult]. It looks through
// *tls.Conn and any wrapper with a NetConn() net.Conn method. For a
// connection that came from neither it returns an error wrapping
// [ErrNoResult], so that callers that refuse on any error fail closed. It
// does not allocate.
//
// As with the resolve middleware, [clientip.ErrMasqueraded] comes with a
// Result naming the node; [Policy.Check] takes both return values
// directly.
func ResultFromConn(c net.Conn) (clientip.Result, error) {
	for range 8 {
		switch v := c.(type) {
		case *conn:
			return v.res, v.err
		case *tls.Conn:
			c = v.NetConn()
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return clientip.Result{}, ErrNoResult
		}
	}
	return clientip.Result{}, ErrNoResult
}
