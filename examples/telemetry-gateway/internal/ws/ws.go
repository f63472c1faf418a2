// Package ws is the telemetry gateway's MQTT-over-WebSocket listener (MQTT
// 3.1.1 §6, MQTT 5 §6): an HTTP server behind an ingress that terminates TLS
// and appends X-Forwarded-For (or Forwarded), optionally behind a load
// balancer that sends a PROXY header. Each upgrade request's client is
// resolved once, with the chain's trust, from the request — its forwarding
// header, the PROXY layer and the socket peer — and the upgraded connection
// carries that resolution (middleware.WithResult), so that whatever serves
// MQTT on it judges, limits, logs and records the client exactly as for a
// TCP connection (middleware.ResultFromConn).
//
// A cross-site WebSocket is the browser's way around the same-origin policy:
// a page on any site may open one to the gateway with the user's network
// position. An upgrade that carries an Origin (browsers always send one) is
// accepted only from the request's own origin, as the trusted ingress
// reported it (clientip.OriginReader), or from a configured list; the
// request's host must be one the gateway answers to when that list is set.
// Devices, which send no Origin, are not affected.
package ws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
)

// Subprotocol is the WebSocket subprotocol of MQTT ([MQTT-6.0.0-3],
// [MQTT-6.0.0-4]).
const Subprotocol = "mqtt"

// Defaults for zero Config fields.
const (
	DefaultPath              = "/mqtt"
	DefaultReadHeaderTimeout = 10 * time.Second
)

// Why an upgrade request is refused.
var (
	ErrNotUpgrade     = errors.New("ws: not a WebSocket upgrade request")
	ErrNoSubprotocol  = errors.New("ws: the client does not offer the mqtt subprotocol")
	ErrCrossOrigin    = errors.New("ws: cross-origin WebSocket from an origin that is not allowed")
	ErrHostNotAllowed = errors.New("ws: the request's host is not one the gateway answers to")
	ErrBadHandshake   = errors.New("ws: bad WebSocket handshake")
)

// Config configures a Listener.
type Config struct {
	// Inner is where connections come from: a TCP listener, or a
	// proxyproto.Listener with the same Trust behind a load balancer that
	// sends PROXY headers. The Listener owns it.
	Inner net.Listener
	// Trust is the chain's trust: the ingress proxies (and load balancers)
	// whose forwarding header and PROXY header are believed. Required.
	Trust clientip.Trust
	// Origin reads the request's own origin (its scheme and host as the
	// trusted ingress reported them) and holds the hosts the gateway answers
	// to (AllowedHosts); nil reads the request's own scheme and Host and
	// allows any host.
	Origin *clientip.OriginReader
	// AllowedOrigins are the origins, besides the request's own, browsers
	// may open a WebSocket from ("https://dashboard.example.com").
	AllowedOrigins []clientip.Origin
	// Path is the endpoint; "" means DefaultPath.
	Path string
	// ReadHeaderTimeout bounds reading the upgrade request, and any other
	// request with its body, and the wait for the next request on a kept-alive
	// connection; zero means DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// OnRefuse, when set, is called for each upgrade request the listener
	// refuses, from the request's goroutine.
	OnRefuse func(Refusal)
}

// Refusal is an upgrade request the listener refused, with what it knew.
type Refusal struct {
	// Result and ResolveErr are the client's resolution from the request.
	Result     clientip.Result
	ResolveErr error
	// Facts are the socket and PROXY layers.
	Facts proxyproto.Facts
	// Path, Host and Origin are the request's; Status is the HTTP answer.
	Path, Host, Origin string
	Status             int
	// Err wraps one of the Err* of this package.
	Err error
}

// Reason names why the request was refused, for metrics: "not_upgrade",
// "no_subprotocol", "cross_origin", "host_not_allowed" or "bad_handshake".
func (r Refusal) Reason() string {
	for _, k := range []struct {
		err  error
		name string
	}{{ErrNotUpgrade, "not_upgrade"}, {ErrNoSubprotocol, "no_subprotocol"}, {ErrCrossOrigin, "cross_origin"}, {ErrHostNotAllowed, "host_not_allowed"}, {ErrBadHandshake, "bad_handshake"}} {
		if errors.Is(r.Err, k.err) {
			return k.name
		}
	}
	return "error"
}

// Listener is a net.Listener of MQTT-over-WebSocket connections, for
// chain.Listener. Create it with New.
type Listener struct {
	cfg      Config
	allowed  []clientip.Origin
	srv      *http.Server
	upgrader websocket.Upgrader
	conns    chan net.Conn
	done     chan struct{}
	close    sync.Once
	served   chan struct{}
}

// New starts serving cfg.Inner and returns the Listener, whose Accept
// returns the upgraded connections.
func New(cfg Config) (*Listener, error) {
	if cfg.Inner == nil || cfg.Trust == nil || cfg.Trust.Resolver() == nil {
		return nil, errors.New("ws: Inner and Trust are required")
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.Origin == nil {
		cfg.Origin = clientip.MustNewOriginReader(clientip.OriginConfig{})
	}
	for _, o := range cfg.AllowedOrigins {
		if !o.IsValid() || o.Prefix != "" {
			return nil, fmt.Errorf("ws: allowed origin %q: want scheme://host[:port]", o)
		}
	}
	l := &Listener{
		cfg: cfg, allowed: slices.Clone(cfg.AllowedOrigins),
		conns: make(chan net.Conn), done: make(chan struct{}), served: make(chan struct{}),
		upgrader: websocket.Upgrader{
			Subprotocols:     []string{Subprotocol},
			HandshakeTimeout: cfg.ReadHeaderTimeout,
			// The request's origin is checked before the upgrade, with
			// the chain's view of the request's own origin (checkOrigin).
			CheckOrigin:     func(*http.Request) bool { return true },
			ReadBufferSize:  1024,
			WriteBufferSize: 1024,
		},
	}
	l.srv = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		// An upgrade request has no body: ReadTimeout bounds the body of
		// a request that is refused (the server reads it before the next
		// request), and, as IdleTimeout is zero, the wait for that next
		// request. Upgraded connections are the chain's: gorilla clears
		// the deadlines when it hijacks them.
		ReadTimeout:    cfg.ReadHeaderTimeout,
		MaxHeaderBytes: 16 << 10,
		ConnContext:    connContext,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(l.served)
		_ = l.srv.Serve(cfg.Inner)
	}()
	return l, nil
}

type connKey struct{}

// connContext hands the connection and its PROXY facts to the request.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(proxyproto.ConnContext(ctx, c), connKey{}, c)
}

// Accept implements net.Listener: the next upgraded connection, which
// carries its client's resolution (middleware.ResultFromConn).
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it stops accepting and closes the
// connections the HTTP server still holds; connections already upgraded
// are their owner's.
func (l *Listener) Close() error {
	var err error
	l.close.Do(func() {
		close(l.done)
		err = l.srv.Close()
		<-l.served
	})
	return err
}

// Addr implements net.Listener.
func (l *Listener) Addr() net.Addr { return l.cfg.Inner.Addr() }

// ServeHTTP resolves the upgrade request's client, checks it, upgrades it
// and hands the connection to Accept.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := r.Context().Value(connKey{}).(net.Conn)
	// A load balancer's connection without a header names no client when
	// the PROXY listener under Inner lists its load balancers (proxyproto's
	// Config.Upstreams, Facts.NoHeaderFromUpstream): its forwarding header
	// is its client's own claim.
	res, rerr := proxyproto.ResolverFromConn(raw, l.cfg.Trust).ResolveRequest(r)
	facts, _ := proxyproto.FactsFromContext(r.Context())
	ref := Refusal{Result: res, ResolveErr: rerr, Path: r.URL.Path, Host: r.Host, Origin: r.Header.Get("Origin"), Facts: facts}
	refuse := func(status int, err error) {
		ref.Status, ref.Err = status, err
		if l.cfg.OnRefuse != nil {
			l.cfg.OnRefuse(ref)
		}
		http.Error(w, err.Error(), status)
	}
	switch {
	case r.URL.Path != l.cfg.Path:
		refuse(http.StatusNotFound, fmt.Errorf("%w: path %q", ErrNotUpgrade, r.URL.Path))
		return
	case !websocket.IsWebSocketUpgrade(r):
		refuse(http.StatusBadRequest, ErrNotUpgrade)
		return
	case !slices.Contains(websocket.Subprotocols(r), Subprotocol):
		refuse(http.StatusBadRequest, ErrNoSubprotocol)
		return
	}
	if status, err := l.checkOrigin(r, res, rerr); err != nil {
		refuse(status, err)
		return
	}
	u := l.upgrader
	u.Error = func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
		// RFC 6455 §4.4: the versions the server speaks, with the refusal.
		w.Header().Set("Sec-WebSocket-Version", "13")
		refuse(status, fmt.Errorf("%w: %w", ErrBadHandshake, reason))
	}
	ws, err := u.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := middleware.WithResult(NewConn(ws), res, rerr)
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// checkOrigin refuses a request for a host the gateway does not answer to,
// and a browser's request from another origin than the request's own or an
// allowed one.
func (l *Listener) checkOrigin(r *http.Request, res clientip.Result, rerr error) (int, error) {
	if rerr != nil && !errors.Is(rerr, clientip.ErrMasqueraded) {
		// No client to read the origin for (CONNECT will be refused): the
		// request's own scheme and Host, so that the host is checked.
		res = clientip.Result{Client: res.Peer.Addr(), Source: clientip.SourceSocket, Peer: res.Peer}
	}
	own, ownErr := l.cfg.Origin.ReadRequest(r, res)
	if errors.Is(ownErr, clientip.ErrHostNotAllowed) {
		return http.StatusForbidden, fmt.Errorf("%w: %w", ErrHostNotAllowed, ownErr)
	}
	lines := r.Header.Values("Origin")
	if len(lines) == 0 {
		return 0, nil // not a browser
	}
	o, err := clientip.ParseOrigin(lines[0])
	switch {
	case len(lines) > 1 || err != nil:
		return http.StatusForbidden, fmt.Errorf("%w: %q", ErrCrossOrigin, lines)
	case ownErr == nil && o.SameOrigin(own):
		return 0, nil
	case slices.ContainsFunc(l.allowed, o.SameOrigin):
		return 0, nil
	}
	return http.StatusForbidden, fmt.Errorf("%w: %s", ErrCrossOrigin, o)
}
