package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// observation is what the echo backend reports for one connection, every
// layer apart: the socket peer the kernel shows, the PROXY header (if a
// trusted upstream sent one), and what clientip resolved from them.
type observation struct {
	Tag  string `json:"tag"`
	Pod  string `json:"pod"`
	Node string `json:"node"`

	Peer  netip.AddrPort `json:"peer"`  // socket peer
	Local netip.AddrPort `json:"local"` // socket local address (the pod)

	ProxyVersion uint8          `json:"proxyVersion,omitempty"`
	ProxyCommand string         `json:"proxyCommand"` // none, proxy or local
	ProxySource  netip.AddrPort `json:"proxySource"`

	Client      netip.Addr `json:"client"`
	Source      string     `json:"source"` // clientip.Source
	Masqueraded bool       `json:"masqueraded,omitempty"`
	Err         string     `json:"err,omitempty"` // masqueraded, all-trusted or the error text
}

// backendSetup is how the backend is configured for one scenario: the
// clientip configuration, and the load balancers it accepts PROXY headers
// from (none: no header is believed, and one from anybody closes the
// connection).
type backendSetup struct {
	Resolver     clientip.Config
	ProxyTrusted clientip.PrefixSet
}

// setupFor configures the backend as the model recommends for e: the
// resolver from Expectation.Config, and a PROXY listener trusting the same
// hops when the path carries a PROXY header.
func setupFor(e trafficpolicy.Expectation, n trafficpolicy.Network) (backendSetup, error) {
	cfg, err := e.Config(n)
	if err != nil {
		return backendSetup{}, err
	}
	s := backendSetup{Resolver: cfg}
	if e.ProxyHeader {
		s.ProxyTrusted = cfg.TrustedProxies
	}
	return s, nil
}

// podState is the condition of a pod's endpoint.
type podState uint8

const (
	podReady podState = iota
	podTerminating
	podGone
)

// pod is one pod of the lab: a network namespace behind a veth to its node,
// with an echo backend whose listening socket lives in that namespace. The
// backend is served by the lab's process; it is the "small echo backend built
// on the library" of the issue: a proxyproto listener under a trust policy,
// then clientip, replying with one JSON observation per connection.
type pod struct {
	name string
	ns   netns
	node *node
	addr dual

	mu      sync.Mutex
	state   podState
	ln      *proxyproto.Listener
	serving chan struct{}

	rmu        sync.Mutex
	rejections []proxyproto.Rejection // since the last takeRejections, at most maxRejections
}

const maxRejections = 1024

// serve (re)starts the backend with setup, replacing the previous listener.
func (p *pod) serve(setup backendSetup) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	res, err := clientip.New(setup.Resolver)
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.name, err)
	}
	inner, err := p.listen()
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.name, err)
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		TrustedUpstreams:  setup.ProxyTrusted,
		ReadHeaderTimeout: 2 * time.Second,
		OnReject: func(r proxyproto.Rejection) {
			p.rmu.Lock()
			if len(p.rejections) < maxRejections {
				p.rejections = append(p.rejections, r)
			}
			p.rmu.Unlock()
		},
	})
	if err != nil {
		inner.Close()
		return fmt.Errorf("pod %s: %w", p.name, err)
	}
	p.ln = ln
	done := make(chan struct{})
	p.serving = done
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.handle(c, res)
		}
	}()
	return nil
}

// listen opens the backend's port in the pod's namespace. The previous
// listener's socket may still be open for a moment: net.TCPListener.Close
// defers close(2) until a goroutine blocked in Accept (the proxyproto
// listener's acceptor) has left it. So a bind that finds the port in use is
// retried for up to a second.
func (p *pod) listen() (net.Listener, error) {
	for i := 0; ; i++ {
		var ln net.Listener
		err := p.ns.do(func() error {
			var err error
			ln, err = net.Listen("tcp", fmt.Sprintf(":%d", targetPort))
			return err
		})
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || i == 200 {
			return ln, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// close stops accepting; connections being served finish.
func (p *pod) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}

func (p *pod) closeLocked() {
	if p.ln == nil {
		return
	}
	p.ln.Close()
	<-p.serving
	p.ln = nil
}

func (p *pod) handle(c net.Conn, res *clientip.Resolver) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	tag, err := bufio.NewReader(io.LimitReader(c, 128)).ReadString('\n')
	if err != nil {
		return
	}
	f, _ := proxyproto.FactsFromConn(c)
	r, rerr := res.Resolve(f.Transport(), nil)
	o := observation{
		Tag:          strings.TrimSpace(tag),
		Pod:          p.name,
		Node:         p.node.name,
		Peer:         f.Peer,
		Local:        f.Local,
		ProxyVersion: f.Version,
		ProxyCommand: f.Command.String(),
		ProxySource:  f.Source,
		Client:       r.Client,
		Source:       r.Source.String(),
		Masqueraded:  r.Masqueraded,
	}
	switch {
	case rerr == nil:
	case errors.Is(rerr, clientip.ErrMasqueraded):
		o.Err = "masqueraded"
	case errors.Is(rerr, clientip.ErrAllTrusted):
		o.Err = "all-trusted"
	default:
		o.Err = rerr.Error()
	}
	if json.NewEncoder(c).Encode(o) != nil {
		return
	}
	// Let the client close first, so that its side holds TIME_WAIT and it
	// never reuses the port at once. A reused port would match conntrack's
	// TIME_WAIT entry on the load balancer and the node, which reopens it
	// with its old DNAT binding (RFC 1122 reopen), and a connection would
	// follow the previous one's path instead of the current rules.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, io.LimitReader(c, 4096))
}

// takeRejections returns the connections the PROXY listener refused since
// the last call.
func (p *pod) takeRejections() []proxyproto.Rejection {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	out := p.rejections
	p.rejections = nil
	return out
}
