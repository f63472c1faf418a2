package explain

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// Limits of an Advisor.
const (
	defaultMaxPeers   = 64
	maxMaxPeers       = 1024
	defaultMinClients = 3
	maxDepth          = 8 // depth histogram buckets: 0..7 entries, then "8 or more"
	maxUpstreams      = 4 // distinct rightmost entries kept per peer
)

// AdvisorConfig configures an [Advisor].
type AdvisorConfig struct {
	// Trust is the configuration in force, which the findings judge and
	// the proposal is compared with. Required.
	Trust clientip.Trust

	// SampleEvery observes one request or connection in SampleEvery, by a
	// counter; 0 or 1 observes every one.
	SampleEvery int

	// MaxPeers bounds the socket peers the Advisor keeps statistics for.
	// When the table is full, a new peer replaces the one seen least
	// (space-saving: the newcomer inherits its count for that ordering, so
	// that a busy proxy seen late still gets a place). Zero means 64; at
	// most 1024.
	MaxPeers int

	// MinClients is how many distinct clients must sit behind a peer that
	// sends forwarding headers for it to be taken for a proxy. Zero means 3.
	MinClients int

	// Nodes are the cluster's node addresses (trafficpolicy.Network.Nodes),
	// so that a node that delivers traffic without a PROXY or forwarding
	// header is recognised as masquerading (externalTrafficPolicy: Cluster)
	// and proposed for Masquerade. The zero value knows no nodes.
	Nodes clientip.PrefixSet

	// Window, when above zero, ends the watch that long after the first
	// observation: later ones are counted in Seen but not sampled. Zero
	// watches until Reset.
	Window time.Duration
}

// Advisor watches resolved traffic for a while and proposes a
// [clientip.Config] with the findings behind it (see [Advisor.Advice]). It
// never applies anything.
//
// The proposal is inferred from the traffic, and the traffic is partly the
// clients': whoever sends most of the sampled requests during the watch
// shapes it. A client that writes a different forwarding header on every
// request looks, to counts alone, like a proxy with many clients behind it;
// a public address outside every platform's published ranges is therefore
// never proposed on the strength of the forwarding headers it sends, and
// the findings say which addresses were left out and why. Review the
// proposal against what you know of your proxies before applying it.
//
// Memory is bounded and fixed by the configuration. For each of at most
// MaxPeers socket peers it keeps the peer's address, counts (requests, each
// forwarding header's presence, PROXY headers, header depths, outcomes
// under the configuration in force, classes of the rightmost header entry),
// three 64-byte HyperLogLog sketches (distinct clients behind the peer,
// distinct rightmost and second-rightmost entries), and up to four distinct
// addresses of the rightmost header entry, dropped as soon as a fifth
// appears (a proxy appends one of a few addresses; clients are many). No
// other client address is kept: a sketch holds only the maximum of keyed
// hash ranks.
//
// Observe costs one atomic add for a request that is not sampled, and a
// resolution, a lock and a few counter updates for one that is. An Advisor
// is safe for concurrent use.
type Advisor struct {
	cfg      AdvisorConfig
	seed     uint64 // the sketches' hash key
	presets  []presetSet
	internal clientip.PrefixSet
	xff      *clientip.Resolver // list readers; see listEntries
	fwd      *clientip.Resolver
	counter  atomic.Uint64

	mu      sync.Mutex
	peers   map[netip.Addr]*peerStats
	seen    uint64 // observations offered, sampled or not, while watching
	sampled uint64
	evicted uint64
	since   time.Time
	until   time.Time // last sampled observation
	reasons [16]uint64
	unix    uint64 // sampled observations from a peer without an IP address
	// deepTrust counts ErrAllTrusted after the walk stepped over a header
	// entry: a client address inside the trusted set.
	deepTrust uint64
}

// peerStats is what an Advisor keeps of one socket peer.
type peerStats struct {
	addr     netip.Addr
	weight   uint64 // space-saving count: n plus what the evicted peer had
	n        uint64 // sampled observations since the peer got its place
	proxy    uint64 // with a PROXY source
	none     uint64 // with no forwarding header and no PROXY source
	headers  [len(forwardingHeaders)]uint64
	other    uint64 // with the configured header when it is not a known one
	depth    [maxDepth + 1]uint64
	class    [2][classCount]uint64 // classes of the rightmost and second entry
	leftmost uint64                // answered by the leftmost entry, deeper than the usual depth
	reasons  [16]uint64            // outcomes under the configuration in force
	behind   sketch                // distinct candidate clients
	pos      [2]sketch             // distinct rightmost and second entries
	ups      []netip.Addr          // up to maxUpstreams distinct rightmost entries; nil after overflow
	upsFull  bool
}

// NewAdvisor returns an Advisor for cfg, or an error wrapping
// [ErrInvalidConfig] when Trust is nil or a bound is out of range.
func NewAdvisor(cfg AdvisorConfig) (*Advisor, error) {
	switch {
	case cfg.Trust == nil:
		return nil, fmt.Errorf("%w: Trust is required", ErrInvalidConfig)
	case cfg.SampleEvery < 0:
		return nil, fmt.Errorf("%w: SampleEvery %d is negative", ErrInvalidConfig, cfg.SampleEvery)
	case cfg.MaxPeers < 0 || cfg.MaxPeers > maxMaxPeers:
		return nil, fmt.Errorf("%w: MaxPeers %d is outside 0..%d", ErrInvalidConfig, cfg.MaxPeers, maxMaxPeers)
	case cfg.MinClients < 0:
		return nil, fmt.Errorf("%w: MinClients %d is negative", ErrInvalidConfig, cfg.MinClients)
	case cfg.Window < 0:
		return nil, fmt.Errorf("%w: Window %v is negative", ErrInvalidConfig, cfg.Window)
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = 1
	}
	if cfg.MaxPeers == 0 {
		cfg.MaxPeers = defaultMaxPeers
	}
	if cfg.MinClients == 0 {
		cfg.MinClients = defaultMinClients
	}
	return &Advisor{
		cfg: cfg, seed: rand.Uint64(), presets: loadPresets(), internal: internalSpace(),
		xff: listReader("X-Forwarded-For"), fwd: listReader("Forwarded"),
		peers: make(map[netip.Addr]*peerStats, cfg.MaxPeers),
	}, nil
}

// Observe records one request (h its headers) or connection (h nil) of
// transport t, if it is sampled.
func (a *Advisor) Observe(t clientip.Transport, h http.Header) { a.ObserveAt(time.Now(), t, h) }

// ObserveAt is Observe at time now.
func (a *Advisor) ObserveAt(now time.Time, t clientip.Transport, h http.Header) {
	if !a.sample() {
		a.count(now)
		return
	}
	res, err := a.cfg.Trust.Resolver().Resolve(t, h)
	a.record(now, res, err, h)
}

// ObserveRequest records one HTTP request, if it is sampled, with the
// transport [clientip.Resolver.ResolveRequest] reads.
func (a *Advisor) ObserveRequest(r *http.Request) { a.ObserveRequestAt(time.Now(), r) }

// ObserveRequestAt is ObserveRequest at time now.
func (a *Advisor) ObserveRequestAt(now time.Time, r *http.Request) {
	if !a.sample() {
		a.count(now)
		return
	}
	res, err := a.cfg.Trust.Resolver().ResolveRequest(r)
	a.record(now, res, err, r.Header)
}

// ObserveConn records one connection accepted through
// [middleware.NewListener], if it is sampled, with the resolution recorded
// at accept. A connection that did not come from NewListener is ignored.
func (a *Advisor) ObserveConn(c net.Conn) { a.ObserveConnAt(time.Now(), c) }

// ObserveConnAt is ObserveConn at time now.
func (a *Advisor) ObserveConnAt(now time.Time, c net.Conn) {
	res, err := middleware.ResultFromConn(c)
	if err != nil && clientip.ReasonOf(err) == clientip.ReasonNone {
		return
	}
	if !a.sample() {
		a.count(now)
		return
	}
	a.record(now, res, err, nil)
}

// Handler returns a handler that observes each request, if it is sampled,
// then serves it with next. It never changes the request.
func (a *Advisor) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.ObserveRequest(r)
		next.ServeHTTP(w, r)
	})
}

// Reset forgets everything observed and starts a new watch.
func (a *Advisor) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.peers)
	a.seen, a.sampled, a.evicted, a.unix, a.deepTrust = 0, 0, 0, 0, 0
	a.since, a.until = time.Time{}, time.Time{}
	a.reasons = [16]uint64{}
}

func (a *Advisor) sample() bool {
	return a.counter.Add(1)%uint64(a.cfg.SampleEvery) == 0
}

// count counts an observation that is not sampled.
func (a *Advisor) count(now time.Time) {
	a.mu.Lock()
	if a.watching(now) {
		a.seen++
	}
	a.mu.Unlock()
}

// watching reports whether an observation at now falls in the watch.
// a.mu is held.
func (a *Advisor) watching(now time.Time) bool {
	return a.cfg.Window <= 0 || a.since.IsZero() || now.Sub(a.since) <= a.cfg.Window
}

// record adds one sampled observation: the resolution res, err under the
// configuration in force, and the request's headers h. What the headers
// show is read before the lock is taken: reading the list header costs time
// in proportion to its size, which a client chooses, and the requests that
// share the Advisor should not wait for it.
func (a *Advisor) record(now time.Time, res clientip.Result, err error, h http.Header) {
	var o observation
	if res.Peer.Addr().IsValid() {
		o = a.observe(res, h)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.watching(now) {
		return
	}
	if a.since.IsZero() {
		a.since = now
	}
	a.until = now
	a.seen++
	a.sampled++
	reason := clientip.ReasonOf(err)
	a.reasons[reason&15]++
	if reason == clientip.ReasonAllTrusted && res.Header != "" {
		a.deepTrust++
	}
	peer := res.Peer.Addr()
	if !peer.IsValid() {
		a.unix++
		return
	}
	p := a.peer(peer.Unmap().WithZone(""))
	p.weight++
	p.n++
	p.reasons[reason&15]++
	if res.Proxy.IsValid() {
		p.proxy++
	}
	for i, sent := range o.headers {
		if sent {
			p.headers[i]++
		}
	}
	if o.other {
		p.other++
	}
	if o.none {
		p.none++
	}
	p.depth[min(o.depth, maxDepth)]++
	for k := range o.n {
		p.class[k][o.class[k]]++
		if o.entries[k].IsValid() {
			p.pos[k].add(a.seed, o.entries[k])
		}
	}
	if o.n > 0 {
		p.upstream(o.entries[0])
	}
	if o.candidate.IsValid() {
		p.behind.add(a.seed, o.candidate)
	}
	if err == nil && res.Source.FromHeader() && o.configured && o.depth >= 2 && res.Hop-hopBase(res) == o.depth && o.depth > p.usualDepth() {
		p.leftmost++
	}
}

// observation is what one request or connection shows a peer's statistics,
// read without the Advisor's lock.
type observation struct {
	headers    [len(forwardingHeaders)]bool // which forwarding headers it carries
	other      bool                         // it carries the configured header, not a known one
	none       bool                         // it carries no forwarding header and no PROXY source
	entries    [2]netip.Addr                // the list header's rightmost two entries
	class      [2]int                       // and their classes
	n          int                          // how many of entries there are
	depth      int                          // the list header's entries
	configured bool                         // the list header is the one the configuration reads
	candidate  netip.Addr                   // the client the peer reports
}

// observe reads what the resolution res and headers h show.
func (a *Advisor) observe(res clientip.Result, h http.Header) observation {
	var o observation
	if res.Proxy.IsValid() {
		o.candidate = res.Proxy.Addr().Unmap()
	}
	anyHeader := false
	for i, name := range forwardingHeaders {
		if len(h[name]) > 0 {
			o.headers[i], anyHeader = true, true
		}
	}
	cfgHeader := a.cfg.Trust.Resolver().Config().Header
	if cfgHeader != "" && headerIndex(cfgHeader) < 0 && len(h[cfgHeader]) > 0 {
		o.other, anyHeader = true, true
	}
	o.none = !anyHeader && !res.Proxy.IsValid()

	// The list header: the one the configuration reads when it is a list
	// header, else X-Forwarded-For, else Forwarded.
	entries, depth, name := a.listEntries(h, canonicalHeader(cfgHeader))
	o.depth, o.n, o.configured = depth, len(entries), name != "" && name == canonicalHeader(cfgHeader)
	for k, e := range entries {
		o.entries[k], o.class[k] = e, a.classify(e)
	}
	if o.n > 0 && !o.candidate.IsValid() {
		o.candidate = entries[0]
	}
	if !o.candidate.IsValid() {
		o.candidate = singleValue(h)
	}
	return o
}

// hopBase returns the position of the outermost transport layer of res.
func hopBase(res clientip.Result) int {
	if res.Proxy.IsValid() {
		return 1
	}
	return 0
}

// peer returns the statistics of addr, making room for it if it is new.
func (a *Advisor) peer(addr netip.Addr) *peerStats {
	if p, ok := a.peers[addr]; ok {
		return p
	}
	var inherit uint64
	if len(a.peers) >= a.cfg.MaxPeers {
		var victim *peerStats
		for _, q := range a.peers {
			if victim == nil || q.weight < victim.weight {
				victim = q
			}
		}
		delete(a.peers, victim.addr)
		inherit = victim.weight
		a.evicted++
	}
	p := &peerStats{addr: addr, weight: inherit}
	a.peers[addr] = p
	return p
}

// upstream keeps e among the peer's distinct rightmost entries while there
// are at most maxUpstreams of them.
func (p *peerStats) upstream(e netip.Addr) {
	if p.upsFull || !e.IsValid() {
		return
	}
	for _, u := range p.ups {
		if u == e {
			return
		}
	}
	if len(p.ups) == maxUpstreams {
		p.ups, p.upsFull = nil, true
		return
	}
	p.ups = append(p.ups, e)
}

// usualDepth returns the list-header depth the peer sends most often.
func (p *peerStats) usualDepth() int {
	best := 0
	for d, c := range p.depth {
		if c > p.depth[best] {
			best = d
		}
	}
	return best
}

// listEntries returns the addresses of the rightmost two entries of a list
// header (invalid for an entry that holds none), the number of entries, as a
// resolver that reads that header counts them, and the header's name. The
// header is configured (canonical) when it is X-Forwarded-For or Forwarded
// and h carries it, so that the depths compared with the resolution's hop
// are those of the header it read; else X-Forwarded-For, else Forwarded.
func (a *Advisor) listEntries(h http.Header, configured string) ([]netip.Addr, int, string) {
	var r *clientip.Resolver
	name := ""
	for _, n := range [...]string{configured, "X-Forwarded-For", "Forwarded"} {
		if (n == "X-Forwarded-For" || n == "Forwarded") && len(h[n]) > 0 {
			name = n
			break
		}
	}
	switch name {
	case "":
		return nil, 0, ""
	case "X-Forwarded-For":
		r = a.xff
	default:
		r = a.fwd
	}
	// r trusts listPeer and nothing else, so its explanation lists every
	// entry, read with clientip's own parser.
	x := r.Explain(clientip.Transport{Peer: listPeer}, h)
	var out []netip.Addr
	depth := 0
	for _, s := range x.Steps {
		if s.Layer.FromHeader() {
			if len(out) < 2 {
				out = append(out, s.Addr)
			}
			depth++
		}
	}
	return out, depth + x.Omitted, name
}

// listPeer is the socket peer of the Advisor's list readers.
var listPeer = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 1}), 1)

// listReader returns a resolver that trusts listPeer alone and reads header.
func listReader(header string) *clientip.Resolver {
	trusted, _ := clientip.NewPrefixSet(netip.PrefixFrom(listPeer.Addr(), 32))
	return clientip.MustNew(clientip.Config{TrustedProxies: trusted, Header: header, MaxHeaderBytes: 1 << 20})
}

// singleValue returns the address in the first single-address forwarding
// header h carries, or the invalid Addr.
func singleValue(h http.Header) netip.Addr {
	for _, name := range forwardingHeaders[2:] {
		if v := h[name]; len(v) == 1 {
			if a, err := netip.ParseAddr(strings.TrimSpace(v[0])); err == nil {
				return a.Unmap().WithZone("")
			}
		}
	}
	return netip.Addr{}
}
