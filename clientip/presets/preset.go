package presets

import (
	"fmt"
	"net/http"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// Config configures a [Preset]. Platform and Topology are required; the
// other fields are required or refused per platform as their docs say.
// The zero Config is refused.
type Config struct {
	// Platform is the edge in front of the service. Required.
	Platform Platform

	// Topology is Direct() or BehindIngress(ingress). Required.
	Topology Topology

	// Ranges are the addresses the edge connects from. The zero value
	// means the platform's embedded, dated snapshot ([Platform.Ranges]):
	// the floor a refresher starts from. A set given here replaces that
	// floor in [Preset.Config] and [Preset.NewStore] (your own copy, or test
	// addresses: the published ranges are public, so a test on loopback
	// passes loopback ranges here), not in a refresher: a refresher's Run
	// first installs its own starting set — its disk copy, else its
	// source's snapshot — over the set given here. Required
	// for the platforms that publish no list: Akamai (your Origin IP ACL or
	// Site Shield map), Fly.io (the fly-proxy addresses your machines see)
	// and Envoy (the edge Envoys' addresses, and those of any load balancer
	// in front of them that appends to X-Forwarded-For). Refused for Cloud
	// Run, which has no peer to check. A set holding 0.0.0.0/0 or ::/0, a
	// prefix wider than /8 (IPv4) or /16 (IPv6), an IPv6 prefix that stands
	// for every IPv4 host (NAT64, 6to4, Teredo), or reserved space is
	// refused ([ranges.CheckSet]); private space is allowed.
	Ranges clientip.PrefixSet

	// Source is where [Preset.NewRefresher] keeps the ranges current. The
	// zero value means the provider's published list for Cloudflare,
	// CloudFront and Fastly ([ranges.Cloudflare], [ranges.CloudFront],
	// [ranges.Fastly]) and none for the others. Azure publishes its
	// service tags under a URL that changes weekly, so give
	// [ranges.AzureFrontDoor](location) for a file or URL you keep current.
	// Any platform but Cloud Run may take a CIDR list of your own
	// ([ranges.NewSource] with [ranges.ProviderCIDRList]), such as an
	// Akamai ACL kept in a file. A provider's document under another
	// filter (all of AWS's ip-ranges.json, Google's cloud.json, another
	// Azure tag) is refused: it lists machines anyone can rent.
	Source *ranges.Source

	// ForwardingRules are the external IP addresses of your Google Cloud
	// load balancer's forwarding rules, which the load balancer appends to
	// X-Forwarded-For after the client. Required for GoogleLoadBalancer,
	// refused for the others.
	ForwardingRules clientip.PrefixSet

	// FrontDoorIDs are the IDs of your Azure Front Door profiles (GUIDs, as
	// the portal shows them), one of which every request must carry in
	// X-Azure-FDID. Required for AzureFrontDoor, refused for the others:
	// every Front Door profile, an attacker's included, connects from the
	// same AzureFrontDoor.Backend ranges. At most 8.
	FrontDoorIDs []string

	// SharedSecret, when set, is an edge-identity header every request
	// must carry; see [SharedSecret]. The zero value checks none.
	SharedSecret SharedSecret

	// MaxHops bounds the walk as [clientip.Config].MaxHops does. The zero
	// value means the platform's depth in Direct (1, or 2 behind Google's
	// load balancer, which appends its own address after the client), and
	// that depth plus 7 behind an ingress (ingress layers and edge tiers
	// such as Fastly's shield POPs). For Cloud Run it is the number of hops
	// the client sits at (1, or 2 behind an ingress) unless given.
	MaxHops int
}

// Preset is a validated platform preset: what a deployment behind one edge
// configures once. [Preset.Config] is the [clientip.Config] (header, the
// edge's ranges, MaxHops for the topology); [Preset.NewStore] and
// [Preset.NewRefresher] make it live; [Preset.Check] and [Preset.Handler]
// check the edge's identity. A Preset is immutable and safe for
// concurrent use.
type Preset struct {
	platform Platform
	topology Topology
	static   clientip.Config    // header, ingress and forwarding rules, MaxHops
	edge     clientip.PrefixSet // the edge's ranges: the floor
	source   *ranges.Source
	id       identity
}

// New validates cfg and returns its Preset, or an error wrapping
// [ErrInvalidConfig] that names the field.
func New(cfg Config) (*Preset, error) {
	bad := func(format string, a ...any) (*Preset, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	p := cfg.Platform
	d := p.def()
	if d.header == "" {
		return bad("a Platform is required")
	}
	t := cfg.Topology
	switch t.kind {
	case topologyUnset:
		return bad("a Topology is required: presets.Direct() or presets.BehindIngress(ingress)")
	case topologyIngress:
		if err := ranges.CheckSet(t.ingress, true); err != nil {
			return bad("BehindIngress needs the ingress's addresses: %w", err)
		}
	}

	edge := cfg.Ranges
	switch {
	case p == CloudRun && edge.Len() > 0:
		return bad("Cloud Run takes no Ranges: Google documents no address its front end connects to a container from")
	case p == CloudRun && cfg.Source != nil:
		return bad("Cloud Run takes no Source: there are no ranges to refresh")
	case d.needsRanges && edge.Len() == 0:
		return bad("%s publishes no list of the addresses it connects from: Ranges is required", p)
	case edge.Len() == 0:
		edge = p.Ranges()
	}
	if p != CloudRun {
		if err := ranges.CheckSet(edge, true); err != nil {
			return bad("Ranges: %w", err)
		}
	}

	rules := cfg.ForwardingRules
	switch {
	case p == GoogleLoadBalancer && rules.Len() == 0:
		return bad("Google's load balancer appends its forwarding rule's address after the client: ForwardingRules is required")
	case p != GoogleLoadBalancer && rules.Len() > 0:
		return bad("ForwardingRules apply only to GoogleLoadBalancer, not %s", p)
	case rules.Len() > 0:
		if err := ranges.CheckSet(rules, true); err != nil {
			return bad("ForwardingRules: %w", err)
		}
	}

	id, err := newIdentity(p, cfg.FrontDoorIDs, cfg.SharedSecret)
	if err != nil {
		return nil, err
	}

	src := cfg.Source
	switch {
	case src == nil && d.source != nil:
		src = d.source()
	case src != nil && src.Provider() != ranges.ProviderCIDRList:
		// A provider's document is only this edge's list under the
		// platform's filter: all of ip-ranges.json or cloud.json is
		// anyone's rented machine.
		if snap, ok := src.Snapshot(); !ok || snap.Name != d.snapshot || d.snapshot == "" {
			return bad("Source %s is not %s's origin-facing list (give the platform's source, or a CIDR list of your own)", src, p)
		}
	}

	static := clientip.Config{TrustedProxies: t.ingress.Union(rules), MaxHops: cfg.MaxHops}
	switch {
	case p == CloudRun:
		// No peer can be checked: hop-count mode, the client at the
		// position Google's front end appended it.
		static.Header, static.TrustedHops = xff, 1
		if !t.IsDirect() {
			static.TrustedHops = 2
		}
		if static.MaxHops == 0 {
			static.MaxHops = static.TrustedHops
		}
	case t.IsDirect():
		static.Header = d.header
		if static.MaxHops == 0 {
			static.MaxHops = d.hops
		}
	default:
		static.Header = xff
		if static.MaxHops == 0 {
			static.MaxHops = d.hops + 7
		}
	}
	pr := &Preset{platform: p, topology: t, static: static, edge: edge, source: src, id: id}
	if _, err := clientip.New(pr.Config()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return pr, nil
}

// MustNew is like [New] but panics on error. Use it only for static
// configuration written in the program.
func MustNew(cfg Config) *Preset {
	p, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return p
}

// Platform returns the preset's platform.
func (p *Preset) Platform() Platform { return p.platform }

// Topology returns the preset's topology.
func (p *Preset) Topology() Topology { return p.topology }

// Ranges returns the edge's ranges the preset starts from: Config.Ranges,
// or the platform's snapshot. It is empty for Cloud Run.
func (p *Preset) Ranges() clientip.PrefixSet { return p.edge }

// Source returns the range source [Preset.NewRefresher] refreshes, or nil
// when there is none.
func (p *Preset) Source() *ranges.Source { return p.source }

// Config returns the [clientip.Config] the preset stands for: its header,
// the edge's ranges (with the ingress and forwarding rules) as
// TrustedProxies, and MaxHops (with TrustedHops for Cloud Run). Build a
// static resolver from it with [clientip.New], or a live one with
// [Preset.NewStore]. It does not allocate beyond the union of the sets.
func (p *Preset) Config() clientip.Config {
	c := p.static
	c.TrustedProxies = c.TrustedProxies.Union(p.edge)
	return c
}

// String describes the preset, such as "cloudflare direct".
func (p *Preset) String() string { return p.platform.String() + " " + p.topology.String() }

// NewStore returns a [clientip.Store] for the preset: the static part of
// its configuration (header, ingress, forwarding rules, MaxHops) with the
// edge's ranges as the named range set p.Platform().String() — the set
// [Preset.NewRefresher] keeps current — added to opts.Ranges. Hand the
// store to every layer (middleware.Config.Trust, proxyproto, the
// connection listener). opts.Ranges must not already name that set.
func (p *Preset) NewStore(opts clientip.StoreOptions) (*clientip.Store, error) {
	name := p.platform.String()
	if _, ok := opts.Ranges[name]; ok {
		return nil, fmt.Errorf("%w: StoreOptions.Ranges already has a set named %q, the preset's", ErrInvalidConfig, name)
	}
	sets := make(map[string]clientip.PrefixSet, len(opts.Ranges)+1)
	for k, v := range opts.Ranges {
		sets[k] = v
	}
	sets[name] = p.edge
	opts.Ranges = sets
	s, err := clientip.NewStore(p.static, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return s, nil
}

// NewRefresher returns a [ranges.Refresher] that keeps the edge's ranges in
// store current: cfg with Source set to [Preset.Source] and OnUpdate to
// store.SetRangesFunc(p.Platform().String()), so each accepted set joins
// the store's trust and each change is logged under the platform's name.
// Start it with go r.Run(ctx). cfg's other fields (CacheFile, Interval,
// Logger, MaxShrink, …) are the refresher's; cfg.Source and cfg.OnUpdate
// must be nil. store should be one [Preset.NewStore] returned.
//
// Run first hands the store the refresher's starting set, its disk copy or
// else its source's embedded snapshot, which replaces Config.Ranges in the
// store before any fetch; a source with neither (a CIDR list of your own
// without a CacheFile) leaves Config.Ranges in force until its first
// accepted fetch.
//
// A preset without a source returns an error wrapping [ErrNoSource]: its
// ranges are the ones Config gave, and stay so.
func (p *Preset) NewRefresher(store *clientip.Store, cfg ranges.RefresherConfig) (*ranges.Refresher, error) {
	switch {
	case p.source == nil:
		return nil, fmt.Errorf("%w for %s (set Config.Source to refresh a list of your own)", ErrNoSource, p.platform)
	case store == nil:
		return nil, fmt.Errorf("%w: a store is required", ErrInvalidConfig)
	case cfg.Source != nil || cfg.OnUpdate != nil:
		return nil, fmt.Errorf("%w: RefresherConfig.Source and OnUpdate are the preset's to set", ErrInvalidConfig)
	}
	cfg.Source = p.source
	cfg.OnUpdate = store.SetRangesFunc(p.platform.String())
	r, err := ranges.NewRefresher(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return r, nil
}

// Check reports whether r carries the edge's identity: the Front Door ID
// (X-Azure-FDID, compared without regard to case) for Azure Front Door,
// and the shared-secret header when one is configured, each exactly once.
// It returns nil when the preset checks no identity, an error wrapping
// [ErrEdgeIdentityMissing] when a header is absent, and one wrapping
// [ErrEdgeIdentityMismatch] when a value is wrong or repeated; the error
// names the header, never a value. The secret is compared in constant
// time. Check does not modify r and does not allocate unless it fails.
//
// Call it before the client is used — [Preset.Handler] does, in front of
// the resolving middleware — and fail closed: a request that does not
// carry the identity did not come through your edge, whatever its
// headers say. Check knows nothing of the socket: the ranges are checked
// by the resolver, and a request must pass both.
func (p *Preset) Check(r *http.Request) error {
	if !p.id.configured() {
		return nil
	}
	if r == nil {
		return fmt.Errorf("%w: no request", ErrEdgeIdentityMissing)
	}
	return p.id.check(r.Header)
}

// Handler returns next behind the edge-identity check: a request that
// fails [Preset.Check] is answered 403 Forbidden, with a body that names
// neither the header nor its value, and goes no further. A request that
// passes goes on as a shallow copy without the shared-secret header (one
// header clone per request), so the secret reaches neither handlers that
// log headers nor an upstream the service proxies to; the caller's request
// is not modified. X-Azure-FDID, which is not a secret, stays.
//
// Mount it in front of the resolving middleware and everything that uses
// the client, and mount what must answer without the edge (health checks
// from the load balancer or the kubelet) beside it, not behind it:
//
//	mux.Handle("/", p.Handler(resolve(app)))
//	mux.Handle("/healthz", healthz)
//
// With no identity configured it returns next itself.
func (p *Preset) Handler(next http.Handler) http.Handler {
	if !p.id.configured() {
		return next
	}
	return &guard{id: &p.id, next: next}
}

type guard struct {
	id   *identity
	next http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.id.check(r.Header); err != nil {
		http.Error(w, "forbidden: the request did not come through the configured edge", http.StatusForbidden)
		return
	}
	if g.id.secretHeader != "" {
		r2 := *r
		r2.Header = r.Header.Clone()
		delete(r2.Header, g.id.secretHeader)
		r = &r2
	}
	g.next.ServeHTTP(w, r)
}
