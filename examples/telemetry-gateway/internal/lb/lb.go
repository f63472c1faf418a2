// Package lb is a small in-process TCP load balancer that forwards each
// connection to one backend with a PROXY protocol header in front, as an AWS
// NLB with proxy protocol or HAProxy with send-proxy does. The telemetry
// gateway's demo and tests put it between simulated devices and the gateway;
// it dials the gateway from its own source address, so the gateway sees it as
// the socket peer and the device only in the PROXY header.
package lb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sourceip/sourceip/internal/freeport"
	"github.com/sourceip/sourceip/proxyproto"
)

// Config configures an LB.
type Config struct {
	// Listen is the front address, such as "127.0.0.1:0". Port 0 picks a
	// free port below the kernel's ephemeral range (see freeport.Listen), so
	// that no port-0 listener or outgoing connection on the machine takes it
	// while Restart has it closed.
	Listen string
	// Backend is the address connections are forwarded to.
	Backend string
	// Source is the address the LB dials the backend from (any address of
	// 127.0.0.0/8 works on Linux); the invalid Addr lets the kernel choose.
	Source netip.Addr
	// Version is the PROXY protocol version to send, 1 or 2; 0 sends no header
	// (a full proxy that passes nothing on).
	Version uint8
	// DialTimeout bounds the connection to the backend. Zero means 5s.
	DialTimeout time.Duration
}

// LB is a running load balancer. It is safe for concurrent use.
type LB struct {
	cfg  Config
	addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start listens on cfg.Listen and starts forwarding.
func Start(cfg Config) (*LB, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	l := &LB{cfg: cfg, conns: make(map[net.Conn]struct{})}
	ln, err := firstListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	l.addr = ln.Addr().String()
	l.serveOn(ln)
	return l, nil
}

// firstListen listens on addr, at a port picked by freeport.Listen when
// addr's port is 0.
func firstListen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return net.Listen("tcp", addr)
	}
	return freeport.Listen(host)
}

// Addr returns the front address.
func (l *LB) Addr() string { return l.addr }

func (l *LB) serveOn(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	l.wg.Add(1)
	go l.serve(ln)
}

func (l *LB) serve(ln net.Listener) {
	defer l.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			c.Close()
			return
		}
		l.wg.Add(1)
		go l.forward(ln, c)
	}
}

func (l *LB) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *LB) untrack(cs ...net.Conn) {
	l.mu.Lock()
	for _, c := range cs {
		delete(l.conns, c)
	}
	l.mu.Unlock()
}

func (l *LB) forward(ln net.Listener, client net.Conn) {
	defer l.wg.Done()
	d := &net.Dialer{Timeout: l.cfg.DialTimeout}
	if l.cfg.Source.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: l.cfg.Source.AsSlice()}
	}
	var (
		backend net.Conn
		err     error
	)
	if l.cfg.Version == 0 {
		backend, err = d.Dial("tcp", l.cfg.Backend)
	} else {
		backend, err = proxyproto.DialContext(context.Background(), d, "tcp", l.cfg.Backend, proxyproto.Header{
			Version:     l.cfg.Version,
			Command:     proxyproto.CommandProxy,
			Source:      addrPort(client.RemoteAddr()),
			Destination: addrPort(client.LocalAddr()),
		})
	}
	if err != nil {
		l.untrack(client)
		client.Close()
		return
	}
	if !l.track(backend) {
		l.untrack(client)
		client.Close()
		backend.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	// One direction ended; give the other a moment to deliver its last bytes
	// (an MQTT DISCONNECT, a PUBACK), then close both.
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	client.Close()
	backend.Close()
	l.untrack(client, backend)
}

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// Restart closes the front listener and every forwarded connection, as a load
// balancer that restarts does, and listens again on the same address. It
// fails, leaving the LB closed, when another socket took the address in
// between.
func (l *LB) Restart() error {
	l.stop()
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("lb: listen again on %s: %w", l.addr, err)
	}
	l.serveOn(ln)
	return nil
}

// Close stops the load balancer and closes every connection.
func (l *LB) Close() error {
	l.stop()
	return nil
}

func (l *LB) stop() {
	l.mu.Lock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
	l.mu.Unlock()
	l.wg.Wait()
}

// ErrNoLoopbackAlias is returned by CheckSource when addr cannot be bound.
var ErrNoLoopbackAlias = errors.New("lb: address cannot be bound")

// CheckSource reports whether the machine lets a socket bind a, as Linux does
// for all of 127.0.0.0/8 and macOS only for configured aliases.
func CheckSource(a netip.Addr) error {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
	if err != nil {
		return errors.Join(ErrNoLoopbackAlias, err)
	}
	ln.Close()
	return nil
}
