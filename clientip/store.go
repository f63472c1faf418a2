package clientip

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// StoreOptions configures a [Store] beyond its [Config]. The zero value
// starts with no named ranges, logs nothing and calls nothing.
type StoreOptions struct {
	// Ranges are named sets of proxies the store trusts from the start, on
	// top of Config.TrustedProxies, as [Store.SetRanges] would set them: the
	// starting sets of the range refreshers that will keep them current
	// (such as a provider's embedded snapshot). Empty sets are left out.
	// Nil starts with none.
	Ranges map[string]PrefixSet

	// Logger, when not nil, receives one record per change of the
	// configuration in force: "trust changed" at Info, with the [Change] as
	// the attribute "change", or "trust change refused" at Warn, with the
	// Change and the error. A change that leaves the configuration as it was
	// is logged at Debug. Nil logs nothing.
	Logger *slog.Logger

	// OnChange, when not nil, is called with every change the store installs
	// and every change it refuses (Change.Err set), in order, after the
	// Logger. It runs on the goroutine that asked for the change, with the
	// store's lock held, so it must not call Swap, Update or SetRanges; it
	// should return promptly. Use it for metrics ([Store.Stats] has
	// counters too).
	OnChange func(Change)
}

// StoreStats are a [Store]'s counters since it was created.
type StoreStats struct {
	// Changes counts the configurations installed by Swap, Update and
	// SetRanges.
	Changes uint64
	// Unchanged counts the calls that left the configuration as it was.
	Unchanged uint64
	// Refused counts the configurations [New] refused; the configuration in
	// force stayed.
	Refused uint64
}

// Store is a [Trust] whose configuration can be replaced while connections
// and requests are served: hand the same Store to every layer of a chain
// (the proxyproto listener, the middleware, the connection listener, the
// code that calls Resolve) and change the trust of all of them at once.
//
// [Store.Resolver] returns the resolver in force. Each layer loads it once
// per connection or request and finishes that connection or request on it,
// so a swap never splits one walk between two configurations: connections
// and requests already started keep the configuration they started with, the
// next ones see the new one.
//
// The effective configuration is the static part (the Config given to
// [NewStore], [Store.Swap] or [Store.Update]) with TrustedProxies widened by
// every named range set ([Store.SetRanges]), such as a CDN's published
// ranges kept current by a refresher, so that a refresher and an ingress
// CIDR configured by hand live side by side. Every change is validated by
// [New] before it is installed; a configuration New refuses is returned as
// an error, and the one in force stays. Changes are serialised and logged as
// a diff ([Change]).
//
// The zero Store trusts nothing (as the zero Config) until a Swap or Update
// installs a configuration. A Store is safe for concurrent use.
type Store struct {
	cur atomic.Pointer[Resolver]
	// parts is static and ranges as last set, for Config and Ranges, which
	// take no lock so that Update's fn and OnChange may call them; nil
	// before the first configuration.
	parts atomic.Pointer[storeParts]

	mu       sync.Mutex // serialises changes; guards the fields below
	static   Config
	ranges   map[string]PrefixSet // non-empty sets only; never modified once set
	log      *slog.Logger
	onChange func(Change)

	changes, unchanged, refused atomic.Uint64
}

// storeParts is a Store's static configuration and named range sets. It is
// immutable.
type storeParts struct {
	static Config
	ranges map[string]PrefixSet
}

// untrusting is the Resolver of a zero Store: the zero Config, which trusts
// nothing. It is immutable.
var untrusting = MustNew(Config{})

// NewStore returns a Store whose configuration in force is cfg with
// opts.Ranges added to its TrustedProxies, or the error of [New] for it.
// Nothing is logged for the starting configuration.
func NewStore(cfg Config, opts StoreOptions) (*Store, error) {
	s := &Store{static: cfg, log: opts.Logger, onChange: opts.OnChange}
	for name, set := range opts.Ranges {
		if err := checkRangesName(name); err != nil {
			return nil, err
		}
		if set.Len() > 0 {
			if s.ranges == nil {
				s.ranges = make(map[string]PrefixSet, len(opts.Ranges))
			}
			s.ranges[name] = set
		}
	}
	r, err := New(s.effective(cfg, s.ranges))
	if err != nil {
		return nil, err
	}
	s.cur.Store(r)
	s.parts.Store(&storeParts{static: s.static, ranges: s.ranges})
	return s, nil
}

// Resolver returns the resolver in force. It is one atomic load: it takes no
// lock and does not allocate. It never returns nil, except on a nil *Store
// (a variable never set), so that every constructor taking a [Trust]
// refuses that as a configuration error instead of panicking.
func (s *Store) Resolver() *Resolver {
	if s == nil {
		return nil
	}
	if r := s.cur.Load(); r != nil {
		return r
	}
	return untrusting
}

// Config returns the static part of the configuration: the Config last given
// to NewStore, Swap or Update, without the named range sets. The
// configuration in force, ranges included and as New validated it, is
// s.Resolver().Config(). It takes no lock, so Update's fn and OnChange may
// call it.
func (s *Store) Config() Config {
	if p := s.parts.Load(); p != nil {
		return p.static
	}
	return Config{}
}

// Ranges returns the named range sets the store adds to the static
// TrustedProxies, as a new map. It takes no lock, so Update's fn and
// OnChange may call it.
func (s *Store) Ranges() map[string]PrefixSet {
	if p := s.parts.Load(); p != nil {
		return maps.Clone(p.ranges)
	}
	return nil
}

// Stats returns the store's counters. It takes no lock.
func (s *Store) Stats() StoreStats {
	return StoreStats{Changes: s.changes.Load(), Unchanged: s.unchanged.Load(), Refused: s.refused.Load()}
}

// Swap replaces the static part of the configuration with cfg, keeping the
// named range sets, and returns what changed in the configuration in force.
// If [New] refuses the result, Swap returns its error (also in the Change's
// Err) and the configuration in force stays. A Swap that changes nothing
// keeps the resolver in force, so connections cannot tell it happened.
func (s *Store) Swap(cfg Config) (Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.install(cfg, s.ranges, "")
}

// Update calls fn with a copy of the static part of the configuration and
// installs what fn leaves in it, as [Store.Swap] would. Updates are
// serialised with every other change, so two concurrent Updates never lose
// each other's edits. fn runs with the store's lock held: it must not call
// the Store's other methods that change it.
//
//	store.Update(func(c *clientip.Config) { c.TrustedProxies = c.TrustedProxies.Union(newIngress) })
func (s *Store) Update(fn func(*Config)) (Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.static
	fn(&cfg)
	return s.install(cfg, s.ranges, "")
}

// SetRanges replaces the named range set name with set, an empty set
// removing it, and returns what changed in the configuration in force, whose
// TrustedProxies are the static ones and every named set together. The
// Change names the set in its Ranges field, so each refresher's diffs say
// whose they are. If [New] refuses the result, the set is not replaced. A
// name must be a short label such as "cloudflare": not empty, printable
// ASCII without spaces, at most 64 bytes.
func (s *Store) SetRanges(name string, set PrefixSet) (Change, error) {
	if err := checkRangesName(name); err != nil {
		return Change{Ranges: name, Err: err}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.ranges)
	if set.Len() == 0 {
		delete(next, name)
	} else {
		if next == nil {
			next = make(map[string]PrefixSet, 1)
		}
		next[name] = set
	}
	return s.install(s.static, next, name)
}

// SetRangesFunc returns a function that calls [Store.SetRanges] with name
// and returns its error. Its signature is that of the OnUpdate hook of a
// clientip/ranges Refresher, so one line wires a refresher to the store:
//
//	ranges.RefresherConfig{Source: ranges.Cloudflare(), OnUpdate: store.SetRangesFunc("cloudflare")}
//
// A set the store refuses is then refused by the refresher too, which keeps
// its current set and reports the refusal.
func (s *Store) SetRangesFunc(name string) func(PrefixSet) error {
	return func(set PrefixSet) error {
		_, err := s.SetRanges(name, set)
		return err
	}
}

func checkRangesName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: range set name %q is empty or longer than 64 bytes", ErrInvalidConfig, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: range set name %q has a space or a byte that is not printable ASCII", ErrInvalidConfig, name)
		}
	}
	return nil
}

// effective returns static with the named sets added to its TrustedProxies.
func (s *Store) effective(static Config, ranges map[string]PrefixSet) Config {
	for _, name := range slices.Sorted(maps.Keys(ranges)) {
		static.TrustedProxies = static.TrustedProxies.Union(ranges[name])
	}
	return static
}

// install validates static with ranges and installs it, logging and
// reporting the change. Called with s.mu held.
func (s *Store) install(static Config, ranges map[string]PrefixSet, name string) (Change, error) {
	old := s.Resolver().Config()
	eff := s.effective(static, ranges)
	r, err := New(eff)
	if err != nil {
		ch := diff(old, withDefaults(eff), name)
		ch.Err = err
		s.refused.Add(1)
		if s.log != nil {
			s.log.LogAttrs(context.Background(), slog.LevelWarn, "trust change refused", slog.Any("change", ch), slog.String("error", err.Error()))
		}
		if s.onChange != nil {
			s.onChange(ch)
		}
		return ch, err
	}
	ch := diff(old, r.Config(), name)
	s.static, s.ranges = static, ranges
	s.parts.Store(&storeParts{static: static, ranges: ranges})
	if ch.Empty() {
		s.unchanged.Add(1)
		if s.log != nil {
			s.log.LogAttrs(context.Background(), slog.LevelDebug, "trust unchanged", slog.Any("change", ch))
		}
		return ch, nil
	}
	s.cur.Store(r)
	s.changes.Add(1)
	if s.log != nil {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "trust changed", slog.Any("change", ch))
	}
	if s.onChange != nil {
		s.onChange(ch)
	}
	return ch, nil
}
