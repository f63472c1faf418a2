package trafficpolicy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// Target is one health endpoint a [Prober] checks, typically a node's
// healthCheckNodePort: http://10.0.0.11:32123/healthz.
type Target struct {
	Name string // names the target in Changes; "" means URL
	URL  string // an absolute http or https URL
}

// ProberConfig configures a [Prober].
type ProberConfig struct {
	// Targets are the health endpoints to check, with distinct names. At
	// least one is required.
	Targets []Target

	// Timing sets the interval, timeout and rise and fall thresholds; see
	// the presets such as [HAProxyTiming]. The zero Timing is invalid.
	Timing Timing

	// Client sends the probes. Nil means a client that probes as a load
	// balancer does: a new connection for every probe, dialled straight to
	// the target (no proxy from HTTP_PROXY and the like), redirects not
	// followed, response headers bounded to 64 KiB. A probe succeeds on a
	// 2xx or 3xx status, as HAProxy's httpchk and the clouds' default
	// success codes have it.
	Client *http.Client

	// StartUp makes every target a member from the start, as HAProxy does.
	// False (the default) starts every target out of service until Rise
	// probes succeed, as cloud load balancers do with new targets.
	StartUp bool
}

// Change is a membership change: a target joined (Up) or left the set of
// nodes the load balancer sends new connections to.
type Change struct {
	Target string
	Up     bool
	At     time.Time // the observation that crossed the threshold
	Since  time.Time // the first observation of the run of results that caused it
}

// String describes the change for a log line: the target, "up" or "down",
// and both times in RFC 3339 with nanoseconds.
func (c Change) String() string {
	dir := "down"
	if c.Up {
		dir = "up"
	}
	return fmt.Sprintf("%s %s at %s (since %s)", c.Target, dir, c.At.Format(time.RFC3339Nano), c.Since.Format(time.RFC3339Nano))
}

// Prober checks health endpoints the way a load balancer does and reports
// membership changes. Its core is a deterministic state machine driven by
// [Prober.ObserveAt], so tests inject results and time; [Prober.Run] feeds
// it real HTTP probes on a ticker. A Prober is safe for concurrent use. The
// zero Prober has no targets: Run refuses to start and ObserveAt knows no
// target; create one with [NewProber].
type Prober struct {
	timing  Timing
	client  *http.Client
	targets []Target

	mu    sync.Mutex
	state map[string]*targetState
}

type targetState struct {
	up     bool
	streak int       // consecutive results against the current state
	since  time.Time // first result of the streak
}

// NewProber returns a Prober for cfg, or an error wrapping [ErrInvalidConfig].
func NewProber(cfg ProberConfig) (*Prober, error) {
	if err := cfg.Timing.validate(); err != nil {
		return nil, err
	}
	if len(cfg.Targets) == 0 {
		return nil, fmt.Errorf("%w: no Targets", ErrInvalidConfig)
	}
	p := &Prober{timing: cfg.Timing, client: cfg.Client, state: make(map[string]*targetState, len(cfg.Targets))}
	if p.client == nil {
		p.client = newProbeClient()
	}
	for _, t := range cfg.Targets {
		if t.Name == "" {
			t.Name = t.URL
		}
		if u, err := url.Parse(t.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: target %q: URL %q is not an absolute http or https URL", ErrInvalidConfig, t.Name, t.URL)
		}
		if _, dup := p.state[t.Name]; dup {
			return nil, fmt.Errorf("%w: target name %q used twice", ErrInvalidConfig, t.Name)
		}
		p.targets = append(p.targets, t)
		p.state[t.Name] = &targetState{up: cfg.StartUp}
	}
	return p, nil
}

// ObserveAt records that a probe of target sent at now succeeded (ok) or
// failed, and returns the membership change it causes, if any: a member
// leaves after Fall consecutive failures, a non-member joins after Rise
// consecutive successes, and a result that agrees with the current state
// resets the count. It returns an error wrapping [ErrUnknownTarget] for a
// target the Prober was not configured with. It does not allocate.
func (p *Prober) ObserveAt(target string, ok bool, now time.Time) (Change, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state[target]
	if s == nil {
		return Change{}, false, fmt.Errorf("%w: %q", ErrUnknownTarget, target)
	}
	if ok == s.up {
		s.streak = 0
		return Change{}, false, nil
	}
	if s.streak == 0 {
		s.since = now
	}
	s.streak++
	need := p.timing.Fall
	if !s.up {
		need = p.timing.Rise
	}
	if s.streak < need {
		return Change{}, false, nil
	}
	s.up, s.streak = ok, 0
	return Change{Target: target, Up: ok, At: now, Since: s.since}, true, nil
}

// Up reports whether target is currently a member.
func (p *Prober) Up(target string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state[target]
	return s != nil && s.up
}

// Members returns the names of the current members in configuration order.
func (p *Prober) Members() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, t := range p.targets {
		if p.state[t.Name].up {
			out = append(out, t.Name)
		}
	}
	return out
}

// Run probes every target at once every Interval, starting immediately,
// until ctx is done, and calls emit (from Run's goroutine, in target order)
// with each membership change; emit must not block for long. Each probe is
// an HTTP GET bounded by Timeout, and its result is observed at the time the
// round started. Run returns ctx's error, or at once an error wrapping
// [ErrInvalidConfig] for a Prober not created by [NewProber].
func (p *Prober) Run(ctx context.Context, emit func(Change)) error {
	if p.client == nil {
		return fmt.Errorf("%w: Prober not created by NewProber", ErrInvalidConfig)
	}
	tk := time.NewTicker(p.timing.Interval)
	defer tk.Stop()
	ticks := make(chan time.Time)
	go func() {
		defer close(ticks)
		t := time.Now()
		for {
			select {
			case ticks <- t:
			case <-ctx.Done():
				return
			}
			select {
			case t = <-tk.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return p.run(ctx, ticks, emit, nil)
}

// run does Run's work for rounds started by ticks, so that tests drive the
// clock; it signals roundDone, if not nil, after each round.
func (p *Prober) run(ctx context.Context, ticks <-chan time.Time, emit func(Change), roundDone chan<- struct{}) error {
	results := make([]bool, len(p.targets))
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return ctx.Err()
		case t, ok := <-ticks:
			if !ok {
				return ctx.Err()
			}
			now = t
		}
		var wg sync.WaitGroup
		for i, t := range p.targets {
			wg.Go(func() { results[i] = p.probe(ctx, t.URL) })
		}
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err() // results of a cancelled round are not observations
		}
		for i, t := range p.targets {
			if c, changed, _ := p.ObserveAt(t.Name, results[i], now); changed && emit != nil {
				emit(c)
			}
		}
		if roundDone != nil {
			roundDone <- struct{}{}
		}
	}
}

// newProbeClient returns the default probe client. A kept-alive connection
// would let a probe pass through a connection the node's health server
// still serves after its listener closed, which no load balancer's fresh
// connection would reach; a proxy from the environment would answer for
// the node.
func newProbeClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:            (&net.Dialer{}).DialContext,
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// probe reports whether one GET of url answers 2xx or 3xx within Timeout.
func (p *Prober) probe(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, p.timing.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// Targets returns the configured targets, names filled in.
func (p *Prober) Targets() []Target { return slices.Clone(p.targets) }
