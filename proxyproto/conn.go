package proxyproto

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/clientip"
)

// Conn is a connection a [Listener] accepted: its header, if any, has been
// read and validated, and [Conn.Facts] tells its layers. Bytes the client sent
// after the header (a TLS ClientHello, say) are returned by Read before
// anything else, so none are lost.
//
// RemoteAddr and LocalAddr return the header's source and destination for a
// PROXY command (what code written for a directly connected client, and
// mochi-mqtt's cl.Net.Remote, expect) and the socket's addresses otherwise;
// the socket peer, the load balancer, stays in Facts().Peer. Neither blocks.
//
// A Conn is safe for concurrent use like any [net.Conn].
type Conn struct {
	nc     net.Conn
	facts  Facts
	remote net.Addr
	local  net.Addr

	ignored bool // an untrusted header was discarded (UntrustedIgnore)
	proxy   bool // its pending slot was the trusted budget's, until Accept

	trust clientip.Trust     // the listener's Config.Trust
	res   *clientip.Resolver // the resolver it judged the connection with

	drained atomic.Bool // rest is empty; Read goes straight to nc
	mu      sync.Mutex
	rest    []byte
}

func newConn(nc net.Conn, f Facts, rest []byte) *Conn {
	c := &Conn{nc: nc, facts: f, remote: nc.RemoteAddr(), local: nc.LocalAddr()}
	if f.Command == CommandProxy {
		c.remote = net.TCPAddrFromAddrPort(f.Source)
		c.local = net.TCPAddrFromAddrPort(f.Destination)
	}
	if len(rest) > 0 {
		c.rest = rest
	} else {
		c.drained.Store(true)
	}
	return c
}

// Facts returns the connection's layers. It does not allocate.
func (c *Conn) Facts() Facts { return c.facts }

// NetConn returns the underlying connection, as [tls.Conn.NetConn] does.
// Reading from it directly skips bytes that arrived with the header.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Read reads the bytes that followed the header, then from the connection.
func (c *Conn) Read(p []byte) (int, error) {
	if c.drained.Load() {
		return c.nc.Read(p)
	}
	c.mu.Lock()
	if len(c.rest) > 0 && len(p) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		if len(c.rest) == 0 {
			c.rest = nil
			c.drained.Store(true)
		}
		c.mu.Unlock()
		return n, nil
	}
	if len(c.rest) == 0 {
		c.drained.Store(true)
	}
	c.mu.Unlock()
	return c.nc.Read(p)
}

// WriteTo implements [io.WriterTo] so that io.Copy from a Conn writes the
// buffered bytes first and then uses the underlying connection's fast path
// (splice on Linux) when it has one.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var n int64
	if !c.drained.Load() {
		c.mu.Lock()
		rest := c.rest
		c.rest = nil
		c.drained.Store(true)
		c.mu.Unlock()
		if len(rest) > 0 {
			m, err := w.Write(rest)
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
	}
	var m int64
	var err error
	if wt, ok := c.nc.(io.WriterTo); ok {
		m, err = wt.WriteTo(w)
	} else {
		m, err = io.Copy(w, struct{ io.Reader }{c.nc})
	}
	return n + m, err
}

// ReadFrom implements [io.ReaderFrom] with the underlying connection's fast
// path (sendfile or splice) when it has one.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.nc.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.nc}, r)
}

// Write writes to the connection.
func (c *Conn) Write(p []byte) (int, error) { return c.nc.Write(p) }

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// CloseWrite shuts down the writing side of a TCP or Unix connection.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return &net.OpError{Op: "close", Net: c.nc.LocalAddr().Network(), Err: errors.ErrUnsupported}
}

// RemoteAddr returns the PROXY source for a PROXY command, otherwise the
// socket peer.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// LocalAddr returns the PROXY destination for a PROXY command, otherwise the
// socket's local address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// SetDeadline sets the connection's read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// SetReadDeadline sets the connection's read deadline. Bytes that arrived with
// the header are returned without waiting, whatever the deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.nc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }

// FactsFromConn returns the Facts of c when c is a [*Conn] or wraps one: a
// [*tls.Conn] (as tls.NewListener and mochi-mqtt's TLS listener hand out) or
// any connection with a NetConn method. A nil c, or a nil pointer of any
// connection type, has no Facts. It does not allocate.
func FactsFromConn(c net.Conn) (Facts, bool) {
	if pc := unwrap(c); pc != nil {
		return pc.facts, true
	}
	return Facts{}, false
}

// ResolverFromConn returns the resolver to resolve c with under the trust
// configuration t. When c came from a [Listener] whose Config.Trust is t
// (directly, or wrapped as [FactsFromConn] sees through), it is the resolver
// the listener judged c with, loaded once when c arrived: the walk then reads
// the PROXY layer under the trust that decided to believe it, even if t (a
// *clientip.Store) has changed since. Otherwise it is t.Resolver(), loaded
// now. It returns nil when t is nil or has no resolver (a nil
// *clientip.Store, never set). It does not allocate.
//
// Trust values are compared with ==; a Trust of a type that is not
// comparable never matches, and c is resolved with t.Resolver().
func ResolverFromConn(c net.Conn, t clientip.Trust) *clientip.Resolver {
	if t == nil {
		return nil
	}
	if pc := unwrap(c); pc != nil && pc.res != nil && sameTrust(pc.trust, t) {
		return pc.res
	}
	return t.Resolver()
}

// sameTrust reports whether a and b are the same Trust value, without the
// panic of == on a type that is not comparable.
func sameTrust(a, b clientip.Trust) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// unwrap returns the *Conn that c is or wraps, or nil. A nil connection of
// any type (a nil *tls.Conn, a nil pointer to a wrapper) wraps nothing: its
// NetConn method is not called, since it would dereference nil.
func unwrap(c net.Conn) *Conn {
	for range 8 {
		switch v := c.(type) {
		case *Conn:
			return v
		case *tls.Conn:
			if v == nil {
				return nil
			}
			c = v.NetConn()
		case interface{ NetConn() net.Conn }:
			if isNil(v) {
				return nil
			}
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// isNil reports whether v holds a nil pointer, map, slice, channel or
// function. It does not allocate.
func isNil(v any) bool {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func:
		return rv.IsNil()
	}
	return false
}
