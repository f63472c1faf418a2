// Package kubeproxy runs kube-proxy's own proxiers (k8s.io/kubernetes
// pkg/proxy/iptables and pkg/proxy/nftables, with its healthcheck servers)
// inside a node's network namespace, and drives them from the lab.
//
// Each node gets an agent: the lab's own executable, started again inside
// the namespace (ip netns exec) with [AgentEnv] set, so that every socket,
// netlink request and iptables or nft child of the proxier belongs to that
// node. The agent builds the proxier the way cmd/kube-proxy does for one
// node — a dual-stack proxier in the chosen mode, a local-traffic detector
// by cluster CIDR, a NodeManager reading the Node from a fake clientset, and
// a ProxyHealthServer on :10256 — and then reads Services, EndpointSlices
// and Node updates from its standard input, one JSON [Request] a line,
// feeds them through the proxier's On… handlers, and answers each with a
// [Reply] once every family's sync that includes it has finished. Nothing in
// the lab writes a kube-proxy rule itself.
package kubeproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

// AgentEnv is the environment variable that makes the lab's executable an
// agent: it holds the agent's [Config] as JSON.
const AgentEnv = "POLICYLAB_KUBEPROXY_AGENT"

// Mode is kube-proxy's --proxy-mode.
type Mode string

const (
	ModeIPTables Mode = "iptables"
	ModeNFTables Mode = "nftables"
)

// Config is what an agent needs to know at start.
type Config struct {
	Mode Mode
	Node *v1.Node // its InternalIP addresses are the node IPs
	// ClusterCIDRs are --cluster-cidr, one per family the proxier serves
	// (IPv4 first): the local-traffic detector's pod ranges.
	ClusterCIDRs []string
	// HealthzAddr is --healthz-bind-address (":10256").
	HealthzAddr string
	// MinSyncPeriod is --iptables-min-sync-period / --nftables-min-sync-period.
	MinSyncPeriod time.Duration
}

// Request is one update for the proxier. Exactly one field is set, except
// for the first request, which carries the Service and its EndpointSlices.
type Request struct {
	Service *v1.Service                `json:"service,omitempty"`
	Slices  []*discovery.EndpointSlice `json:"slices,omitempty"` // the Service's slices: all of them, replacing the previous set
	Node    *v1.Node                   `json:"node,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	// Synced holds, per family ("IPv4", "IPv6"), when the last sync that
	// includes the request finished (Unix nanoseconds); empty for a Node
	// update, which needs no sync.
	Synced map[string]int64 `json:"synced,omitempty"`
	Err    string           `json:"err,omitempty"`
}

// syncWatch follows the proxiers' own log lines ("Syncing … rules" at the
// start of syncProxyRules, the deferred "SyncProxyRules complete" at its
// end) to learn when each family's sync started and finished; kube-proxy
// has no other hook. Errors are kept for the lab's diagnostics.
type syncWatch struct {
	mu       sync.Mutex
	started  map[string]int
	finished map[string]int
	lastDone map[string]time.Time
	failed   []string
	changed  chan struct{}
	errs     io.Writer
}

func newSyncWatch(errs io.Writer) *syncWatch {
	return &syncWatch{started: map[string]int{}, finished: map[string]int{}, lastDone: map[string]time.Time{}, changed: make(chan struct{}), errs: errs}
}

func (w *syncWatch) note(family, msg string, kv []any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case strings.HasPrefix(msg, "Syncing ") && strings.HasSuffix(msg, " rules"):
		w.started[family]++
	case msg == "SyncProxyRules complete":
		w.finished[family]++
		w.lastDone[family] = time.Now()
	case msg == "Sync failed":
		w.failed = append(w.failed, family)
	default:
		return
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

type counts struct {
	started, finished map[string]int
	lastDone          map[string]time.Time
	failed            int
	changed           <-chan struct{}
}

func (w *syncWatch) snapshot() counts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := counts{started: map[string]int{}, finished: map[string]int{}, lastDone: map[string]time.Time{}, failed: len(w.failed), changed: w.changed}
	for k, v := range w.started {
		c.started[k] = v
	}
	for k, v := range w.finished {
		c.finished[k] = v
	}
	for k, v := range w.lastDone {
		c.lastDone[k] = v
	}
	return c
}

func (c counts) idle() bool {
	for f, n := range c.started {
		if c.finished[f] != n {
			return false
		}
	}
	return true
}

// sink is a logr.LogSink that feeds a syncWatch and writes errors out.
type sink struct {
	w      *syncWatch
	family string
	name   string
}

func (s sink) Init(logr.RuntimeInfo)  {}
func (s sink) Enabled(level int) bool { return level <= 2 }
func (s sink) Info(_ int, msg string, kv ...any) {
	s.w.note(s.family, msg, kv)
}
func (s sink) Error(err error, msg string, kv ...any) {
	fmt.Fprintf(s.w.errs, "kube-proxy %s%s: %s: %v %v\n", s.family, s.name, msg, err, kv)
}
func (s sink) WithValues(kv ...any) logr.LogSink {
	for i := 0; i+1 < len(kv); i += 2 {
		if k, _ := kv[i].(string); k == "ipFamily" {
			s.family = fmt.Sprint(kv[i+1])
		}
	}
	return s
}
func (s sink) WithName(name string) logr.LogSink { s.name += "/" + name; return s }

// AgentMain runs the agent and exits when the process was started as one
// ([AgentEnv] set), and returns otherwise. Every program and test binary
// the lab can run from calls it first (TestMain for tests): a test binary
// without it, started as an agent, would run its tests instead, and a test
// that builds a lab would start labs without end.
func AgentMain() {
	if os.Getenv(AgentEnv) == "" {
		return
	}
	if err := RunAgent(context.Background(), os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunAgent is the agent's main: it reads its Config from [AgentEnv], runs
// the proxier, and serves requests from in until in ends or ctx is done.
func RunAgent(ctx context.Context, in io.Reader, out, errs io.Writer) error {
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(AgentEnv)), &cfg); err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	watch := newSyncWatch(errs)
	logger := logr.New(sink{w: watch})
	klog.SetLogger(logger)
	ctx = klog.NewContext(ctx, logger)

	node := cfg.Node
	client := fake.NewClientset(node)
	nm, err := proxy.NewNodeManager(ctx, client, time.Hour, node.Name, false)
	if err != nil {
		return fmt.Errorf("node manager: %w", err)
	}
	// kube-proxy's health timeout is twice its sync period, 60 s by default.
	hs := healthcheck.NewProxyHealthServer(cfg.HealthzAddr, 60*time.Second, nm)
	hsErr := make(chan error, 1)
	go func() { hsErr <- hs.Run(ctx) }()

	p, families, err := newProvider(ctx, cfg, hs)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(in))
	enc := json.NewEncoder(out)
	a := &agent{p: p, nm: nm, families: families, watch: watch, slices: map[string]*discovery.EndpointSlice{}}
	first := true
	for {
		var req Request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading a request: %w", err)
		}
		select {
		case err := <-hsErr:
			return fmt.Errorf("healthz server: %w", err)
		default:
		}
		rep := a.handle(ctx, req, first)
		first = false
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
}

func newProvider(ctx context.Context, cfg Config, hs *healthcheck.ProxyHealthServer) (proxy.Provider, []string, error) {
	const syncPeriod = time.Hour // no periodic resync: every sync is the lab's doing
	nodeIPs := map[v1.IPFamily]net.IP{}
	for _, a := range cfg.Node.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip := net.ParseIP(a.Address)
		f := v1.IPv4Protocol
		if ip.To4() == nil {
			f = v1.IPv6Protocol
		}
		nodeIPs[f] = ip
	}
	detectors := map[v1.IPFamily]proxyutil.LocalTrafficDetector{}
	var families []v1.IPFamily
	for _, c := range cfg.ClusterCIDRs {
		f := v1.IPv4Protocol
		if strings.Contains(c, ":") {
			f = v1.IPv6Protocol
		}
		detectors[f] = proxyutil.NewDetectLocalByCIDR(c)
		families = append(families, f)
	}
	names := make([]string, len(families))
	for i, f := range families {
		names[i] = string(f)
	}
	const masqueradeBit = 14
	switch {
	case cfg.Mode == ModeIPTables && len(families) == 2:
		ipts := map[v1.IPFamily]utiliptables.Interface{
			v1.IPv4Protocol: utiliptables.New(utiliptables.ProtocolIPv4),
			v1.IPv6Protocol: utiliptables.New(utiliptables.ProtocolIPv6),
		}
		p, err := iptables.NewDualStackProxier(ctx, ipts, utilsysctl.New(), syncPeriod, cfg.MinSyncPeriod, false, false, masqueradeBit,
			detectors, cfg.Node.Name, nodeIPs, nil, hs, nil, false)
		return p, names, err
	case cfg.Mode == ModeIPTables && len(families) == 1:
		proto := utiliptables.ProtocolIPv4
		if families[0] == v1.IPv6Protocol {
			proto = utiliptables.ProtocolIPv6
		}
		p, err := iptables.NewProxier(ctx, families[0], utiliptables.New(proto), utilsysctl.New(), syncPeriod, cfg.MinSyncPeriod, false, false, masqueradeBit,
			detectors[families[0]], cfg.Node.Name, nodeIPs[families[0]], nil, hs, nil, false)
		return p, names, err
	case cfg.Mode == ModeNFTables && len(families) == 2:
		p, err := nftables.NewDualStackProxier(ctx, syncPeriod, cfg.MinSyncPeriod, false, masqueradeBit,
			detectors, cfg.Node.Name, nodeIPs, nil, hs, nil, false)
		return p, names, err
	case cfg.Mode == ModeNFTables && len(families) == 1:
		p, err := nftables.NewProxier(ctx, families[0], syncPeriod, cfg.MinSyncPeriod, false, masqueradeBit,
			detectors[families[0]], cfg.Node.Name, nodeIPs[families[0]], nil, hs, nil, false)
		return p, names, err
	}
	return nil, nil, fmt.Errorf("mode %q with %d cluster CIDRs", cfg.Mode, len(families))
}

type agent struct {
	p        proxy.Provider
	nm       *proxy.NodeManager
	families []string
	watch    *syncWatch
	service  *v1.Service
	slices   map[string]*discovery.EndpointSlice
}

// handle applies one request and waits for the syncs that include it.
func (a *agent) handle(ctx context.Context, req Request, first bool) Reply {
	if req.Node != nil {
		a.nm.OnNodeChange(req.Node)
		return Reply{}
	}
	// Nothing syncs between requests (no periodic resync), so every sync that
	// starts from here on reads the change trackers after this request's
	// updates: once they have all finished, the rules include the request.
	if err := a.waitIdle(ctx); err != nil {
		return Reply{Err: err.Error()}
	}
	before := a.watch.snapshot()
	if req.Service != nil {
		if a.service == nil {
			a.p.OnServiceAdd(req.Service)
		} else {
			a.p.OnServiceUpdate(a.service, req.Service)
		}
		a.service = req.Service
	}
	if req.Slices != nil {
		seen := map[string]bool{}
		for _, s := range req.Slices {
			seen[s.Name] = true
			if old := a.slices[s.Name]; old != nil {
				a.p.OnEndpointSliceUpdate(old, s)
			} else {
				a.p.OnEndpointSliceAdd(s)
			}
			a.slices[s.Name] = s
		}
		for name, old := range a.slices {
			if !seen[name] {
				a.p.OnEndpointSliceDelete(old)
				delete(a.slices, name)
			}
		}
	}
	if first {
		a.p.OnServiceSynced()
		a.p.OnEndpointSlicesSynced()
		go a.p.SyncLoop()
	}
	a.p.Sync() // at least one sync per family, whether or not the handlers started one
	after, err := a.waitSynced(ctx, before)
	if err != nil {
		return Reply{Err: err.Error()}
	}
	rep := Reply{Synced: map[string]int64{}}
	for _, f := range a.families {
		rep.Synced[f] = after.lastDone[f].UnixNano()
	}
	if after.failed > before.failed {
		rep.Err = "kube-proxy: sync failed (see the agent's log)"
	}
	return rep
}

// waitSynced waits until every family has finished a sync since before and
// no sync is running or about to start.
func (a *agent) waitSynced(ctx context.Context, before counts) (counts, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c := a.watch.snapshot()
		done := c.idle()
		for _, f := range a.families {
			done = done && c.finished[f] > before.finished[f]
		}
		if done {
			// A sync requested while another ran starts right after it:
			// make sure none follows.
			select {
			case <-c.changed:
				continue
			case <-time.After(50 * time.Millisecond):
				return c, nil
			case <-ctx.Done():
				return c, fmt.Errorf("kube-proxy: waiting for the sync: %w", ctx.Err())
			}
		}
		select {
		case <-c.changed:
		case <-ctx.Done():
			return c, fmt.Errorf("kube-proxy: no sync of %v finished: %w", a.families, ctx.Err())
		}
	}
}

func (a *agent) waitIdle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c := a.watch.snapshot()
		if c.idle() {
			return nil
		}
		select {
		case <-c.changed:
		case <-ctx.Done():
			return fmt.Errorf("kube-proxy: a sync does not end: %w", ctx.Err())
		}
	}
}
