package trafficpolicy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"
)

// DefaultProxyHeaderTimeout is how long [OptionalProxyHeader] waits for the
// first bytes of a connection when its timeout argument is zero: long enough
// for a TCP retransmit, as the PROXY protocol specification asks.
const DefaultProxyHeaderTimeout = 5 * time.Second

// Limits of the PROXY protocol specification (haproxy doc/proxy-protocol.txt).
const (
	proxyV1MaxLen = 107  // "PROXY UNKNOWN ffff:…:ffff ffff:…:ffff 65535 65535\r\n"
	proxyV2MaxLen = 4096 // bytes after the 16-byte v2 header; the same bound as go-proxyproto
)

var (
	proxyV1Sig = []byte("PROXY ")
	proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// OptionalProxyHeader returns a listener whose connections may start with a
// PROXY protocol header, version 1 or 2 (including the v2 LOCAL command
// that HAProxy and AWS NLB send on health checks), which is read and thrown
// away; connections without one are served as they are. It exists for
// health endpoints: an AWS NLB with proxy protocol v2 enabled puts a header
// in front of its health-check connections too, which a plain HTTP server
// answers with 400, taking every node out of service.
//
// The header's addresses are discarded, never believed: a health answer does
// not depend on who asks, and guessing whether a header is present is exactly
// what the PROXY specification forbids a trust-bearing receiver to do. Do not
// use this listener where the client's address matters; use the proxyproto
// package, with a trust policy, there. For a health endpoint that must
// require the header, serve the [HealthServer] on such a listener instead:
// a HealthServer is an [http.Handler] and runs on any [net.Listener].
//
// The header is read on the connection's first Read, not in Accept, so a
// slow client never stalls the accept loop. That read waits at most timeout
// (zero means [DefaultProxyHeaderTimeout]) or until an earlier read deadline
// the caller set; a v1 line must end in CRLF within 107 bytes and a v2
// header may carry at most 4096 bytes after its 16-byte preamble. A header
// that breaks these rules, or a v2 signature followed by an unknown
// version, command or family, fails the first Read with an error wrapping
// [ErrBadProxyHeader]; close the connection (net/http does). Bytes that turn
// out not to be a header are delivered to the reader unchanged.
func OptionalProxyHeader(l net.Listener, timeout time.Duration) net.Listener {
	if timeout <= 0 {
		timeout = DefaultProxyHeaderTimeout
	}
	return &proxyListener{Listener: l, timeout: timeout}
}

type proxyListener struct {
	net.Listener
	timeout time.Duration
}

func (l *proxyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &proxyConn{Conn: c, timeout: l.timeout}, nil
}

type proxyConn struct {
	net.Conn
	timeout time.Duration

	mu       sync.Mutex
	deadline time.Time // the caller's read deadline

	once sync.Once
	rest []byte // bytes read past the header, delivered first
	err  error  // sticky error from reading the header
}

func (c *proxyConn) Read(p []byte) (int, error) {
	c.once.Do(c.readHeader)
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

func (c *proxyConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *proxyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// readHeader reads until it can tell whether the connection starts with a
// PROXY header, consumes the header, and keeps any bytes after it.
func (c *proxyConn) readHeader() {
	c.mu.Lock()
	user := c.deadline
	c.mu.Unlock()
	dl := time.Now().Add(c.timeout)
	if !user.IsZero() && user.Before(dl) {
		dl = user
	}
	if err := c.Conn.SetReadDeadline(dl); err != nil {
		c.err = err
		return
	}
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if err := c.Conn.SetReadDeadline(c.deadline); err != nil && c.err == nil {
			c.err = err
		}
	}()

	buf := make([]byte, 0, 256)
	for {
		n, done, err := proxyHeaderLen(buf)
		if err != nil {
			c.err = err
			return
		}
		if done {
			c.rest = buf[n:]
			return
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, rerr := c.Conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if rerr != nil {
			if _, done, herr := proxyHeaderLen(buf); done || herr != nil {
				continue // the last read decided: a header, no header, or a malformed one
			}
			if inHeader(buf) {
				c.err = fmt.Errorf("%w: incomplete header: %w", ErrBadProxyHeader, rerr)
			} else {
				c.rest, c.err = buf, rerr // not a header: the bytes are data
			}
			return
		}
	}
}

// inHeader reports whether b starts with a complete PROXY signature.
func inHeader(b []byte) bool {
	return bytes.HasPrefix(b, proxyV1Sig) || bytes.HasPrefix(b, proxyV2Sig)
}

// proxyHeaderLen inspects the first bytes of a connection. It returns the
// length of the PROXY header they start with and done, or 0 and done when
// they cannot start one, or !done when more bytes are needed.
func proxyHeaderLen(b []byte) (n int, done bool, err error) {
	switch {
	case len(b) == 0:
		return 0, false, nil
	case bytes.HasPrefix(b, proxyV2Sig):
		return proxyV2Len(b)
	case bytes.HasPrefix(b, proxyV1Sig):
		return proxyV1Len(b)
	case bytes.HasPrefix(proxyV2Sig, b), bytes.HasPrefix(proxyV1Sig, b):
		return 0, false, nil // a prefix of a signature: wait for more
	}
	return 0, true, nil
}

func proxyV1Len(b []byte) (int, bool, error) {
	line := b[:min(len(b), proxyV1MaxLen)]
	i := bytes.IndexByte(line, '\n')
	if i < 0 {
		if len(line) == proxyV1MaxLen {
			return 0, false, fmt.Errorf("%w: v1 line longer than %d bytes", ErrBadProxyHeader, proxyV1MaxLen)
		}
		return 0, false, nil
	}
	if i == 0 || line[i-1] != '\r' {
		return 0, false, fmt.Errorf("%w: v1 line must end with CRLF", ErrBadProxyHeader)
	}
	proto := line[len(proxyV1Sig) : i-1]
	if !bytes.HasPrefix(proto, []byte("TCP4 ")) && !bytes.HasPrefix(proto, []byte("TCP6 ")) && !bytes.HasPrefix(proto, []byte("UNKNOWN")) {
		return 0, false, fmt.Errorf("%w: v1 protocol must be TCP4, TCP6 or UNKNOWN", ErrBadProxyHeader)
	}
	return i + 1, true, nil
}

func proxyV2Len(b []byte) (int, bool, error) {
	if len(b) < 16 {
		return 0, false, nil
	}
	if vc := b[12]; vc != 0x20 && vc != 0x21 { // version 2, command LOCAL or PROXY
		return 0, false, fmt.Errorf("%w: v2 version/command byte %#02x", ErrBadProxyHeader, vc)
	}
	switch fam := b[13]; fam {
	case 0x00, 0x11, 0x12, 0x21, 0x22, 0x31, 0x32: // UNSPEC, TCP/UDP over IPv4, IPv6, UNIX
	default:
		return 0, false, fmt.Errorf("%w: v2 family/transport byte %#02x", ErrBadProxyHeader, fam)
	}
	length := int(binary.BigEndian.Uint16(b[14:16]))
	if length > proxyV2MaxLen {
		return 0, false, fmt.Errorf("%w: v2 header announces %d bytes, more than %d", ErrBadProxyHeader, length, proxyV2MaxLen)
	}
	if len(b) < 16+length {
		return 0, false, nil
	}
	return 16 + length, true, nil
}
