// Package chain is the telemetry gateway's MQTT listener: it takes
// connections from a PROXY-protocol listener, performs the TLS handshake
// itself under a deadline, gives the client a deadline to send CONNECT, and
// hands the connection to the MQTT server (package ingest).
// Without a TLS configuration it hands plain connections on: those of a load
// balancer that terminated the client's TLS and reported it in the PROXY
// header's SSL TLV (LBTLSConfig), or of another listener that did the
// transport's work (MQTT over WebSocket).
//
// The listener bounds each stage and reports every connection that fails
// before CONNECT, with what was known by then: the socket peer, the PROXY
// header's addresses, and the TLS server name if the ClientHello got that far.
//
// Each connection handed on is a *tls.Conn over a *Conn that carries the
// connection's Info (the *Conn itself without TLS); InfoFromConn finds it
// again from the server's client (ingest.Client.Conn), and
// proxyproto.FactsFromConn sees through both.
package chain

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/proxyproto"
)

// Defaults for zero Config durations.
const (
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
)

// Stage names where a connection failed before the broker accepted it.
type Stage string

const (
	StageTLS     Stage = "tls"
	StageConnect Stage = "connect"
)

// Config configures a Listener.
type Config struct {
	// ID is the listener's id (ingest.Client.Listener).
	ID string
	// Inner is where connections come from: a *proxyproto.Listener in the
	// gateway, any net.Listener in tests. The Listener owns it.
	Inner net.Listener
	// TLS is the server configuration. Its GetConfigForClient, if any, still
	// runs; the listener records the server name before it. Nil means the
	// listener does no TLS: it hands Inner's connections on as they are.
	TLS *tls.Config
	// LBTLS, with TLS nil, makes the listener read what a trusted load
	// balancer reported about the client's TLS from each connection's PROXY
	// header (Info.LBTLS). Inner must be a proxyproto listener for it.
	LBTLS *LBTLSConfig
	// Protocol is what the listener reports (Protocol); "" means
	// "tcp+proxy+tls", or "tcp+proxy" without TLS.
	Protocol string
	// IDs numbers the connections (Info.ID); listeners of one broker share
	// it so that a number names one connection. Nil: the listener's own.
	IDs *atomic.Uint64
	// HandshakeTimeout bounds the TLS handshake, from the moment Inner
	// returned the connection. Zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// ConnectTimeout bounds the time from the end of the handshake to the
	// server's reading of CONNECT; the server clears the deadline once it
	// has answered CONNECT (it enforces the client's keep alive itself).
	// Zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// OnFailure, when set, is called for each connection that failed before
	// the broker accepted its CONNECT (after MarkConnected was not called),
	// from the connection's goroutine.
	OnFailure func(Failure)
}

// Info is what the listener learnt about one connection before the broker saw
// it. Its fields are set before the connection is handed to the broker and
// not changed after, except by MarkConnected.
type Info struct {
	// ID numbers the listener's connections from 1.
	ID uint64
	// Accepted is when Inner returned the connection.
	Accepted time.Time
	// Facts are the socket and PROXY layers (the zero value when Inner is not
	// a proxyproto listener).
	Facts proxyproto.Facts
	// ServerName is the SNI the client sent, "" when none or the ClientHello
	// never arrived.
	ServerName string
	// Handshake is how long the TLS handshake took.
	Handshake time.Duration
	// State is the TLS connection state after the handshake; the zero
	// value without TLS.
	State tls.ConnectionState
	// LBTLS is what the load balancer that terminated the client's TLS
	// reported, with Config.LBTLS; nil otherwise.
	LBTLS *LBTLS

	connected atomic.Bool
}

// MarkConnected records that the broker accepted or refused the connection's
// CONNECT: from then on, its end is the broker's business, not a failure the
// listener reports.
func (i *Info) MarkConnected() { i.connected.Store(true) }

// Subject returns the client certificate's subject (for TLS terminated at
// the load balancer, the identity it established: see LBTLS.Subject), or "".
func (i *Info) Subject() string {
	if i.LBTLS != nil {
		return i.LBTLS.Subject()
	}
	if len(i.State.PeerCertificates) == 0 {
		return ""
	}
	return i.State.PeerCertificates[0].Subject.String()
}

// ClientCN returns the common name of the verified client certificate the
// client presented, and whether there is one: from the handshake, or as the
// load balancer that terminated TLS reported it (LBTLS.CN).
func (i *Info) ClientCN() (string, bool) {
	if i.LBTLS != nil {
		return i.LBTLS.CN, i.LBTLS.Err == nil
	}
	if len(i.State.PeerCertificates) == 0 {
		return "", false
	}
	return i.State.PeerCertificates[0].Subject.CommonName, true
}

// Failure is a connection that ended before the broker accepted its CONNECT.
type Failure struct {
	Info *Info
	// Conn is the connection as Inner returned it (closed by now), for
	// wrappers' accessors such as middleware.ResultFromConn.
	Conn     net.Conn
	Stage    Stage
	Err      error
	Duration time.Duration // since Accepted
	// Timeout reports whether the stage ran out of time.
	Timeout bool
}

// LogValue implements slog.LogValuer with everything known about the
// connection.
func (f Failure) LogValue() slog.Value {
	as := []slog.Attr{
		slog.Uint64("conn", f.Info.ID),
		slog.String("stage", string(f.Stage)),
		slog.Bool("timeout", f.Timeout),
		slog.Duration("after", f.Duration),
		slog.Any("layers", f.Info.Facts),
	}
	if f.Info.ServerName != "" {
		as = append(as, slog.String("tls_sni", f.Info.ServerName))
	}
	if s := f.Info.Subject(); s != "" {
		as = append(as, slog.String("tls_subject", s))
	}
	as = append(as, slog.String("error", f.Err.Error()))
	return slog.GroupValue(as...)
}

// Conn is a connection with its Info. The broker gets a *tls.Conn over it,
// or the *Conn itself without TLS.
type Conn struct {
	net.Conn
	info *Info
}

// NetConn returns the connection underneath, so that proxyproto.FactsFromConn
// and tls.Conn.NetConn chains reach the PROXY layer.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Info returns the connection's Info.
func (c *Conn) Info() *Info { return c.info }

// InfoFromConn returns the Info of a connection the listener handed out: c is
// what the server holds in ingest.Client.Conn, the *tls.Conn over a *Conn or
// the *Conn.
func InfoFromConn(c net.Conn) (*Info, bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*Conn); ok {
		return cc.info, true
	}
	return nil, false
}

// EstablishFn serves a connection the listener hands on: listener is the
// listener's ID. nil means the server took the connection over (it closes
// it); an error, that the listener closes it.
type EstablishFn func(listener string, c net.Conn) error

// CloseFn disconnects the clients of a listener that is closing.
type CloseFn func(listener string)

// Listener is the MQTT server's listener. Create it with New.
type Listener struct {
	cfg    Config
	tls    *tls.Config
	nextID *atomic.Uint64

	mu     sync.Mutex
	closed bool
	conns  map[*Conn]struct{}
	wg     sync.WaitGroup
}

// New returns a Listener for cfg.
func New(cfg Config) (*Listener, error) {
	if cfg.Inner == nil {
		return nil, errors.New("chain: Inner is required")
	}
	if cfg.LBTLS != nil && cfg.TLS != nil {
		return nil, errors.New("chain: LBTLS is for TLS terminated at the load balancer: TLS must be nil")
	}
	if cfg.ID == "" {
		cfg.ID = "mqtts"
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	l := &Listener{cfg: cfg, conns: make(map[*Conn]struct{}), nextID: cfg.IDs}
	if l.nextID == nil {
		l.nextID = new(atomic.Uint64)
	}
	if cfg.TLS == nil {
		return l, nil
	}
	l.tls = cfg.TLS.Clone()
	next := cfg.TLS.GetConfigForClient
	l.tls.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		if c, ok := h.Conn.(*Conn); ok {
			c.info.ServerName = h.ServerName
		}
		if next != nil {
			return next(h)
		}
		return nil, nil
	}
	return l, nil
}

// ID returns the listener's ID.
func (l *Listener) ID() string { return l.cfg.ID }

// Address returns the address the listener accepts on.
func (l *Listener) Address() string { return l.cfg.Inner.Addr().String() }

// Protocol names what the listener speaks.
func (l *Listener) Protocol() string {
	switch {
	case l.cfg.Protocol != "":
		return l.cfg.Protocol
	case l.tls == nil:
		return "tcp+proxy"
	}
	return "tcp+proxy+tls"
}

// Serve accepts until Close, handing each connection to establish once its
// TLS handshake is done.
func (l *Listener) Serve(establish EstablishFn) {
	var tempDelay time.Duration
	for {
		c, err := l.cfg.Inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, net.ErrClosed) {
				// Temporary (out of descriptors, say): back off as net/http does.
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				time.Sleep(tempDelay)
				continue
			}
			return
		}
		tempDelay = 0
		cc := &Conn{Conn: c, info: &Info{ID: l.nextID.Add(1), Accepted: time.Now()}}
		cc.info.Facts, _ = proxyproto.FactsFromConn(c)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[cc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serveConn(cc, establish)
	}
}

func (l *Listener) serveConn(c *Conn, establish EstablishFn) {
	defer l.wg.Done()
	var err error
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		if err != nil {
			c.Close()
		}
	}()
	info := c.info
	var conn net.Conn = c
	switch {
	case l.tls != nil:
		_ = c.SetDeadline(info.Accepted.Add(l.cfg.HandshakeTimeout))
		tc := tls.Server(c, l.tls)
		start := time.Now()
		if err = tc.Handshake(); err != nil {
			l.fail(c.Conn, info, StageTLS, err)
			return
		}
		info.Handshake = time.Since(start)
		info.State = tc.ConnectionState()
		conn = tc
	case l.cfg.LBTLS != nil:
		info.LBTLS = lbTLS(l.cfg.LBTLS, info.Facts)
	}
	// The server's first read is CONNECT; it clears this deadline once it
	// has answered CONNECT.
	_ = c.SetDeadline(time.Now().Add(l.cfg.ConnectTimeout))
	err = establish(l.cfg.ID, conn)
	if !info.connected.Load() {
		if err == nil {
			err = errors.New("connection closed before CONNECT")
		}
		l.fail(c.Conn, info, StageConnect, err)
	}
}

func (l *Listener) fail(conn net.Conn, info *Info, stage Stage, err error) {
	if l.cfg.OnFailure == nil {
		return
	}
	f := Failure{Info: info, Conn: conn, Stage: stage, Err: err, Duration: time.Since(info.Accepted)}
	f.Timeout = errors.Is(err, os.ErrDeadlineExceeded)
	if f.Timeout {
		limit := l.cfg.HandshakeTimeout
		if stage == StageConnect {
			limit = l.cfg.ConnectTimeout
		}
		f.Err = fmt.Errorf("no %s within %v: %w", map[Stage]string{StageTLS: "TLS handshake", StageConnect: "CONNECT"}[stage], limit, err)
	}
	l.cfg.OnFailure(f)
}

// Close stops accepting, lets the server disconnect its clients
// (closeClients), closes every connection still in the listener's hands — in
// the handshake or waiting for CONNECT — and waits for their goroutines.
// When Close returns, no connection of this listener can reach the server
// any more, which keeps the server's Close from waiting on (or racing with)
// a half-open connection.
func (l *Listener) Close(closeClients CloseFn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	_ = l.cfg.Inner.Close()
	closeClients(l.cfg.ID)
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
