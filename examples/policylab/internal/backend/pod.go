// Package backend is the lab's pods and callers: the echo backend built on
// the library (a proxyproto listener under a trust policy, then clientip,
// one JSON Observation per connection) and the clients that connect to it
// and record what each connection showed or how it failed.
package backend

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
	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Observation is what the echo backend reports for one connection, every
// layer apart: the socket peer the kernel shows, the PROXY header (if a
// trusted upstream sent one), and what clientip resolved from them.
type Observation struct {
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

// Setup is how the backend is configured for one scenario: the clientip
// configuration, the one trust source of the pod's chain, and whether its
// PROXY listener reads headers under it (false: no header is believed, and
// one from anybody closes the connection).
type Setup struct {
	Resolver    clientip.Config
	ProxyHeader bool
}

// SetupFor configures the backend as the model recommends for e: the
// resolver from Expectation.Config, which the PROXY listener also trusts
// when the path carries a PROXY header.
func SetupFor(e trafficpolicy.Expectation, n trafficpolicy.Network) (Setup, error) {
	cfg, err := e.Config(n)
	if err != nil {
		return Setup{}, err
	}
	return Setup{Resolver: cfg, ProxyHeader: e.ProxyHeader}, nil
}

// PodState is the condition of a pod's endpoint.
type PodState uint8

const (
	PodReady PodState = iota
	PodTerminating
	PodGone
)

// Pod is one pod of the lab: a network namespace behind a veth to its node,
// with an echo backend whose listening socket lives in that namespace. The
// backend is served by the lab's process; it is the "small echo backend built
// on the library" of the issue: a proxyproto listener under a trust policy,
// then clientip, replying with one JSON Observation per connection.
type Pod struct {
	Name      string
	NS        netns.NS
	Node      string // the node's name
	NodeIndex int    // the node's number, from 1
	Addr      topo.Dual

	mu      sync.Mutex
	State   PodState // set by the lab
	ln      *proxyproto.Listener
	serving chan struct{}

	rmu        sync.Mutex
	rejections []proxyproto.Rejection // since the last TakeRejections, at most maxRejections
}

const maxRejections = 1024

// Serve (re)starts the backend with setup, replacing the previous listener.
func (p *Pod) Serve(setup Setup) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	res, err := clientip.New(setup.Resolver)
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.Name, err)
	}
	inner, err := p.listen()
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.Name, err)
	}
	// One trust source for the chain: the listener reads PROXY headers
	// under the resolver that resolves the connection, or none at all.
	var trust clientip.Trust
	if setup.ProxyHeader {
		trust = res
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:             trust,
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
		return fmt.Errorf("pod %s: %w", p.Name, err)
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
func (p *Pod) listen() (net.Listener, error) {
	for i := 0; ; i++ {
		var ln net.Listener
		err := p.NS.Do(func() error {
			var err error
			ln, err = net.Listen("tcp", fmt.Sprintf(":%d", topo.TargetPort))
			return err
		})
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || i == 200 {
			return ln, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close stops accepting; connections being served finish.
func (p *Pod) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}

func (p *Pod) closeLocked() {
	if p.ln == nil {
		return
	}
	p.ln.Close()
	<-p.serving
	p.ln = nil
}

func (p *Pod) handle(c net.Conn, res *clientip.Resolver) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	tag, err := bufio.NewReader(io.LimitReader(c, 128)).ReadString('\n')
	if err != nil {
		return
	}
	f, _ := proxyproto.FactsFromConn(c)
	r, rerr := proxyproto.ResolverFromConn(c, res).Resolve(f.Transport(), nil)
	o := Observation{
		Tag:          strings.TrimSpace(tag),
		Pod:          p.Name,
		Node:         p.Node,
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
	// TIME_WAIT entry on the Load balancer and the node, which reopens it
	// with its old DNAT binding (RFC 1122 reopen), and a connection would
	// follow the previous one's path instead of the current rules.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, io.LimitReader(c, 4096))
}

// TakeRejections returns the connections the PROXY listener refused since
// the last call.
func (p *Pod) TakeRejections() []proxyproto.Rejection {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	out := p.rejections
	p.rejections = nil
	return out
}
