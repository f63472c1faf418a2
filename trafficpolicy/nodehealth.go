package trafficpolicy

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"
)

// IPFamily is an IP family as Kubernetes names it. The zero value is
// [IPv4].
type IPFamily uint8

const (
	IPv4 IPFamily = iota // "IPv4"
	IPv6                 // "IPv6"
)

var ipFamilyNames = []string{"IPv4", "IPv6"}

// String returns "IPv4" or "IPv6".
func (f IPFamily) String() string { return enumString(ipFamilyNames, f, "IPFamily") }

// MarshalText implements [encoding.TextMarshaler].
func (f IPFamily) MarshalText() ([]byte, error) { return enumMarshal(ipFamilyNames, f, "IPFamily") }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (f *IPFamily) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[IPFamily](ipFamilyNames, text, "IPFamily")
	if err == nil {
		*f = v
	}
	return err
}

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to delete; a node that carries it is not eligible for new
// load-balancer traffic.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// NodeState is what the node's own object says about it. The zero value is a
// node not yet seen, which is not eligible: a health server fails closed
// until the caller has looked at its node.
type NodeState struct {
	// Known reports whether the Node object has been seen.
	Known bool
	// Deleting reports that the Node has a deletionTimestamp.
	Deleting bool
	// Taints holds the keys of the Node's taints.
	Taints []string
}

// Eligible reports whether a load balancer may send the node new
// connections, as kube-proxy decides it (KEP-3836): the node is known, not
// being deleted and not tainted with [ToBeDeletedTaint].
func (n NodeState) Eligible() bool {
	return n.Known && !n.Deleting && !slices.Contains(n.Taints, ToBeDeletedTaint)
}

// DataPathCheck is a check of the node's data path that a proxy's own
// health cannot make: that the network plugin is up, that a route or a
// device exists, that the application's own listener accepts. kube-proxy
// answers 200 on :10256/healthz as long as it has written its rules, even
// when the node cannot carry a packet (kubernetes#134648); a check closes
// that gap.
type DataPathCheck struct {
	// Name identifies the check in the answer's failedChecks. Required, in
	// printable UTF-8 (the body quotes it as a JSON string).
	Name string
	// Check returns nil when the data path works. It is called on every
	// /healthz request with a context bounded by
	// NodeHealthConfig.CheckTimeout, must be safe for concurrent use, and
	// should return promptly (cache what is expensive to learn).
	Check func(ctx context.Context) error
}

// NodeHealthConfig configures a [NodeHealthServer].
type NodeHealthConfig struct {
	// HealthTimeout is how long an update may stay queued (see
	// [NodeHealthServer.QueuedUpdate]) before the family counts as
	// unhealthy. kube-proxy uses twice its sync period, 60 s by default.
	// Required.
	HealthTimeout time.Duration

	// Checks are data-path checks that /healthz (not /livez) also requires.
	Checks []DataPathCheck

	// CheckTimeout bounds each check. Zero means one second.
	CheckTimeout time.Duration

	// Now returns the current time; nil means [time.Now].
	Now func() time.Time
}

// NodeHealthServer answers node health checks exactly as kube-proxy answers
// them on :10256 (pkg/proxy/healthcheck/proxy_health.go, KEP-3836):
//
//   - /healthz answers 200 when every IP family's proxier is healthy and the
//     node is eligible ([NodeState.Eligible]), else 503. Load balancers of
//     Services with externalTrafficPolicy Cluster probe it (GCP, and AWS and
//     Azure in their shared-probe modes; see [NodeProbe]), so a node the
//     autoscaler is about to delete drains before it goes.
//   - /livez answers by proxier health alone, so that a draining node's
//     proxy is not restarted.
//   - Any other path is 404; the paths are matched by an [http.ServeMux],
//     like kube-proxy's.
//
// Both answer with the headers Content-Type: application/json and
// X-Content-Type-Options: nosniff and kube-proxy's JSON body, field for
// field:
//
//	{"lastUpdated":"…","currentTime":"…","nodeEligible":true,"healthy":true,
//	 "status":{"IPv4":{"lastUpdated":"…","healthy":true},"IPv6":{…}}}
//
// with RFC 3339 times, "nodeEligible" only on /healthz, "lastUpdated" the
// current time on a 200 answer and the latest family update otherwise, and
// "status" only once a family has been updated. An updated family is
// unhealthy while an update queued with [NodeHealthServer.QueuedUpdate] has
// waited HealthTimeout or longer for [NodeHealthServer.Updated]. A family
// never updated is starting up and counts as healthy however long its
// queued update waits, as in kube-proxy, which judges only the families it
// has seen update: call Updated once the first sync is done, and have the
// caller's own readiness cover a first sync that never ends.
//
// The node's state comes from the caller ([NodeHealthServer.SetNode]), who
// watches its Node object or knows better. [DataPathCheck]s add what
// kube-proxy cannot see: when one fails, /healthz answers 503 and names
// the failed checks in "failedChecks", a field kube-proxy does not have; the
// body is otherwise kube-proxy's, byte for byte. As in kube-proxy, the
// body's "healthy" is the proxiers' health alone: an ineligible node answers
// 503 with "nodeEligible":false and "healthy":true.
//
// Load balancers that put a PROXY header in front of their health checks
// need a listener that accepts one, as for the [HealthServer]: serve it on
// [OptionalProxyHeader]. A NodeHealthServer is safe for concurrent use. The
// zero NodeHealthServer fails closed: it answers every request with 503, and
// an updated family is unhealthy as soon as an update is queued (its
// HealthTimeout is zero); create one with [NewNodeHealthServer].
type NodeHealthServer struct {
	timeout, checkTimeout time.Duration
	checks                []DataPathCheck
	now                   func() time.Time
	mux                   *http.ServeMux

	mu      sync.RWMutex
	node    NodeState
	updated map[IPFamily]time.Time // last Updated per family
	queued  map[IPFamily]time.Time // oldest pending QueuedUpdate per family
}

// NewNodeHealthServer returns a NodeHealthServer for cfg, with the node not
// yet known, or an error wrapping [ErrInvalidConfig].
func NewNodeHealthServer(cfg NodeHealthConfig) (*NodeHealthServer, error) {
	if cfg.HealthTimeout <= 0 {
		return nil, fmt.Errorf("%w: NodeHealthConfig.HealthTimeout %v must be positive", ErrInvalidConfig, cfg.HealthTimeout)
	}
	if cfg.CheckTimeout < 0 {
		return nil, fmt.Errorf("%w: NodeHealthConfig.CheckTimeout %v is negative", ErrInvalidConfig, cfg.CheckTimeout)
	}
	for i, c := range cfg.Checks {
		if c.Name == "" || c.Check == nil {
			return nil, fmt.Errorf("%w: NodeHealthConfig.Checks[%d] needs a Name and a Check", ErrInvalidConfig, i)
		}
		if !jsonQuotable(c.Name) {
			return nil, fmt.Errorf("%w: NodeHealthConfig.Checks[%d].Name %q must be printable UTF-8", ErrInvalidConfig, i, c.Name)
		}
	}
	s := &NodeHealthServer{
		timeout:      cfg.HealthTimeout,
		checkTimeout: cfg.CheckTimeout,
		checks:       slices.Clone(cfg.Checks),
		now:          cfg.Now,
		updated:      make(map[IPFamily]time.Time),
		queued:       make(map[IPFamily]time.Time),
	}
	if s.checkTimeout == 0 {
		s.checkTimeout = time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { s.answer(w, r, true) })
	s.mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) { s.answer(w, r, false) })
	return s, nil
}

// SetNode records the node's state.
func (s *NodeHealthServer) SetNode(n NodeState) {
	n.Taints = slices.Clone(n.Taints)
	s.mu.Lock()
	s.node = n
	s.mu.Unlock()
}

// QueuedUpdate records that family f's proxier has a change to apply; from
// now on it has HealthTimeout to call [NodeHealthServer.Updated], once f has
// been updated before (a family never updated is starting up and stays
// healthy). Only the oldest pending change counts.
func (s *NodeHealthServer) QueuedUpdate(f IPFamily) {
	now := s.clock()
	s.mu.Lock()
	if s.queued == nil {
		s.queued = make(map[IPFamily]time.Time)
	}
	if _, ok := s.queued[f]; !ok {
		s.queued[f] = now
	}
	s.mu.Unlock()
}

// Updated records that family f's proxier has applied every change: the
// family is healthy and reported in the body's status from now on.
func (s *NodeHealthServer) Updated(f IPFamily) {
	now := s.clock()
	s.mu.Lock()
	if s.updated == nil {
		s.updated = make(map[IPFamily]time.Time)
	}
	delete(s.queued, f)
	s.updated[f] = now
	s.mu.Unlock()
}

// FamilyHealth is one IP family's proxier health.
type FamilyHealth struct {
	Family      IPFamily
	LastUpdated time.Time
	Healthy     bool
}

// NodeHealth is one answer's facts.
type NodeHealth struct {
	Now          time.Time
	LastUpdated  time.Time      // the latest family update
	Families     []FamilyHealth // updated families, IPv4 first
	ProxyHealthy bool           // every family healthy: /livez
	NodeEligible bool
	FailedChecks []string // names of the data-path checks that failed
}

// Healthy reports whether /healthz answers 200: healthy proxiers, an
// eligible node, and every data-path check passing.
func (h NodeHealth) Healthy() bool {
	return h.ProxyHealthy && h.NodeEligible && len(h.FailedChecks) == 0
}

// ProxyHealthy reports whether every family's proxier is healthy: what
// /livez answers, and what kube-proxy's service health servers report as
// serviceProxyHealthy. Use it as [HealthConfig].ProxyHealthy for
// kube-proxy's behaviour, or [NodeHealthServer.DataPathHealthy] to let
// failing data-path checks fail the Service's health check node port too.
func (s *NodeHealthServer) ProxyHealthy() bool { return s.proxyStatus(s.clock()).ProxyHealthy }

// DataPathHealthy reports whether the proxiers are healthy and every
// data-path check passes.
func (s *NodeHealthServer) DataPathHealthy() bool {
	return s.ProxyHealthy() && len(s.failedChecks(context.Background())) == 0
}

// Status returns the facts of a /healthz answer now, running the data-path
// checks with ctx.
func (s *NodeHealthServer) Status(ctx context.Context) NodeHealth {
	h := s.proxyStatus(s.clock())
	h.FailedChecks = s.failedChecks(ctx)
	return h
}

// clock returns the current time.
func (s *NodeHealthServer) clock() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

func (s *NodeHealthServer) proxyStatus(now time.Time) NodeHealth {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := NodeHealth{Now: now, ProxyHealthy: true, NodeEligible: s.node.Eligible()}
	for _, f := range []IPFamily{IPv4, IPv6} {
		last, ok := s.updated[f]
		if !ok {
			continue
		}
		h.LastUpdated = maxTime(h.LastUpdated, last)
		fh := FamilyHealth{Family: f, LastUpdated: last, Healthy: true}
		if q, pending := s.queued[f]; pending && now.Sub(q) >= s.timeout {
			fh.Healthy, h.ProxyHealthy = false, false
		}
		h.Families = append(h.Families, fh)
	}
	return h
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *NodeHealthServer) failedChecks(ctx context.Context) []string {
	var failed []string
	for _, c := range s.checks {
		cctx, cancel := context.WithTimeout(ctx, s.checkTimeout)
		err := c.Check(cctx)
		cancel()
		if err != nil {
			failed = append(failed, c.Name)
		}
	}
	return failed
}

// AppendJSON appends kube-proxy's body for h to b: the /healthz body when
// healthz is true (with nodeEligible and, when a check failed,
// failedChecks), the /livez body otherwise. As in kube-proxy, "healthy" is
// the proxiers' health only, whatever the status code says, and
// "lastUpdated" is h.Now when the answer is 200.
func (h NodeHealth) AppendJSON(b []byte, healthz bool) []byte {
	ok := h.ProxyHealthy
	if healthz {
		ok = h.Healthy()
	}
	last := h.LastUpdated
	if ok {
		last = h.Now
	}
	b = append(b, `{"lastUpdated":`...)
	b = appendJSONTime(b, last)
	b = append(b, `,"currentTime":`...)
	b = appendJSONTime(b, h.Now)
	if healthz {
		b = append(b, `,"nodeEligible":`...)
		b = strconv.AppendBool(b, h.NodeEligible)
	}
	b = append(b, `,"healthy":`...)
	b = strconv.AppendBool(b, h.ProxyHealthy)
	if len(h.Families) > 0 {
		b = append(b, `,"status":{`...)
		for i, f := range h.Families {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, f.Family.String()...)
			b = append(b, `":{"lastUpdated":`...)
			b = appendJSONTime(b, f.LastUpdated)
			b = append(b, `,"healthy":`...)
			b = strconv.AppendBool(b, f.Healthy)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if healthz && len(h.FailedChecks) > 0 {
		b = append(b, `,"failedChecks":[`...)
		for i, n := range h.FailedChecks {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, n)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendJSONTime appends t as encoding/json writes a time.Time: RFC 3339
// with nanoseconds, in quotes.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// ServeHTTP answers /healthz and /livez as described on
// [NodeHealthServer], and any other path with 404.
func (s *NodeHealthServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.mux == nil {
		http.Error(w, "trafficpolicy: NodeHealthServer not created by NewNodeHealthServer", http.StatusServiceUnavailable)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *NodeHealthServer) answer(w http.ResponseWriter, r *http.Request, healthz bool) {
	h := s.proxyStatus(s.clock())
	ok := h.ProxyHealthy
	if healthz {
		h.FailedChecks = s.failedChecks(r.Context())
		ok = h.Healthy()
	}
	hdr := w.Header()
	hdr["Content-Type"] = []string{"application/json"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	var buf [512]byte
	w.Write(h.AppendJSON(buf[:0], healthz))
}

// NodeProbe is where and how a load balancer health-checks nodes for a
// Service with externalTrafficPolicy Cluster: every node may serve, so the
// load balancer asks the node itself, by default kube-proxy's :10256/healthz
// (a [NodeHealthServer] answers the same).
type NodeProbe struct {
	Port   uint16
	Path   string
	Timing Timing
}

// Target returns the prober target for the node at addr (an IP address,
// IPv6 with or without brackets, or a host name), named name.
func (p NodeProbe) Target(name, addr string) Target {
	host := addr + ":" + strconv.Itoa(int(p.Port))
	if a, err := netip.ParseAddr(addr); err == nil {
		host = netip.AddrPortFrom(a, p.Port).String() // brackets an IPv6 address
	}
	return Target{Name: name, URL: "http://" + host + p.Path}
}

// KubeProxyHealthzPort is kube-proxy's default --healthz-bind-address port.
const KubeProxyHealthzPort = 10256

// GCPNodeProbe returns the node health check GCP's L4 load balancers share
// among Cluster-policy Services: HTTP /healthz on kube-proxy's port, every
// 8 s, timeout 1 s, healthy after 1 success, unhealthy after 3 failures.
func GCPNodeProbe() NodeProbe {
	return NodeProbe{Port: KubeProxyHealthzPort, Path: "/healthz", Timing: GCPTiming()}
}

// AWSNodeProbe returns cloud-provider-aws's health check for NLB targets of
// a Cluster-policy Service in its Shared probe mode: HTTP /healthz on
// kube-proxy's port, every 30 s, timeout 10 s, thresholds 3.
func AWSNodeProbe() NodeProbe {
	return NodeProbe{Port: KubeProxyHealthzPort, Path: "/healthz",
		Timing: Timing{Interval: 30 * time.Second, Timeout: 10 * time.Second, Rise: 3, Fall: 3}}
}

// AzureNodeProbe returns cloud-provider-azure's shared health probe for
// Cluster-policy Services: HTTP /healthz on kube-proxy's port with the
// probe defaults of [AzureTiming].
func AzureNodeProbe() NodeProbe {
	return NodeProbe{Port: KubeProxyHealthzPort, Path: "/healthz", Timing: AzureTiming()}
}
