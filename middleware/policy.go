package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// Rule is one rule of a [Policy]: which clients it admits to the targets it
// covers. Within a rule, Deny is checked before Allow.
type Rule struct {
	// Name names the rule in every [Decision], [Denial], log line and
	// metric attribute: 1 to 64 ASCII letters, digits, '.', '_' or '-'.
	// Required for Rules, unique within a policy. For the Default, "" means
	// "default".
	Name string

	// Target is what the rule applies to, read as PolicyConfig.Targets
	// says: a ServeMux pattern, a name or prefix, or an MQTT topic filter.
	// Required for Rules; the Default has none.
	Target string

	// Deny is the set of clients the rule refuses, even those inside
	// Allow: carve exceptions out of a wide Allow with it. The zero value
	// refuses no one in particular.
	Deny clientip.PrefixSet

	// Allow is the set of clients the rule admits. The zero value admits no
	// one: a rule that refuses every client of its targets.
	Allow clientip.PrefixSet

	// AdmitMasqueraded judges a client flagged as masqueraded (see
	// clientip.Config.Masquerade) by its node's address, against Deny and
	// Allow, instead of refusing it. The node stands in for every client it
	// forwards, so put only node ranges in Allow for such a rule, and only
	// for targets everyone behind a node may reach. False (the default)
	// refuses masqueraded clients with [ErrMasqueraded].
	AdmitMasqueraded bool

	// AdmitInternal judges a request on which every hop is a trusted proxy
	// ([clientip.ErrAllTrusted], or [clientip.ErrTooFewHops] in hop-count
	// mode) by the outermost hop the walk stepped over (Result.Via), against
	// Deny and Allow: internal callers such as health checks from a node or
	// a sidecar, which have no client to name. A Unix-domain hop has no
	// address and is refused. Every other failure to resolve (a malformed
	// chain, a forged hop) is refused whatever this says. False (the
	// default) refuses them all with [ErrUnresolved].
	AdmitInternal bool
}

// PolicyConfig configures a [Policy].
type PolicyConfig struct {
	// Targets says what the Rules' targets are. It must be set when there
	// are Rules; TargetNone (the zero value) is for a policy that only has
	// a Default.
	Targets TargetKind

	// Rules are the policy's rules per target. For TargetNames and
	// TargetTopics the first rule that matches a target decides (an MQTT
	// subscription is judged by every rule that decides a topic it
	// receives; see TargetTopics), and a rule that an earlier one always
	// overshadows is an error; for
	// TargetPatterns the most specific pattern decides, as in ServeMux, and
	// two rules with the same pattern are an error. Nil: the Default
	// decides everything.
	Rules []Rule

	// Default decides targets that no rule matches. Its Target must be
	// empty. The zero value refuses every client: a policy fails closed
	// unless told otherwise.
	Default Rule

	// Route, when not nil, returns the target of an HTTP request for
	// [Policy.Handler] and [Policy.CheckRequest]: with TargetNames, the
	// route the router matched (chi:
	// chi.RouteContext(r.Context()).RoutePattern(), from a middleware
	// mounted where routing is done, as chi's r.With or a route group's
	// Use); with TargetPatterns, r.Pattern from a middleware mounted inside
	// the application's ServeMux, where a pattern that names a rule picks
	// it without routing again, and any other pattern (one of the
	// application's that no rule names, or "" outside the ServeMux) is
	// routed with the rules' patterns as without Route. A rule more
	// specific than the pattern the application routed to does not apply:
	// give the application that pattern too. It must not block or panic.
	// Nil: with TargetPatterns the policy routes the request itself, with a
	// ServeMux of its rules' patterns; with other kinds the target is "",
	// which only a "*" name matches and no topic does.
	Route func(*http.Request) string

	// Trust, when not nil, is the trust each request is resolved under by
	// Handler and CheckRequest, from its connection's layers when
	// ConnContext stored them and from r.RemoteAddr otherwise. Nil (the
	// usual choice) resolves with [clientip.FromRequest]: the Result the
	// resolve middleware [New] stored, or the request resolved under the
	// trust its connection carries (see [ConnContext]); a request with
	// neither is refused with [clientip.ErrNoTrust], and so is every request
	// while a Trust of its own returns a nil resolver.
	Trust clientip.Trust

	// OnDeny writes the response to a refused request, with the Result the
	// policy judged and the *Denial. Nil means 400 Bad Request for a client
	// that could not be resolved from what the request carries, 500
	// Internal Server Error for a server whose connections carry no trust
	// (clientip.ErrNoTrust), and 403 Forbidden otherwise, each with a short
	// plain-text reason that never holds anything the client wrote (for a
	// client in a Deny, that it is in a denied source range).
	OnDeny func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

	// Observer, when not nil, is told of each refused request through
	// ObserveDeny, and of every decision when it also implements
	// [DecisionObserver]. Nil observes nothing.
	Observer Observer
}

// Policy admits or refuses clients by their resolved address, per target: an
// HTTP route, an MQTT topic, a gRPC method. It is the application's own
// loadBalancerSourceRanges, with allow and deny lists and rules per target,
// and it judges the client the trust chain resolved, so it also works behind
// proxies and PROXY-protocol load balancers that hide the client from the
// network.
//
// Each decision names the rule that made it ([Decision], [Denial]): the first
// rule whose target matches (or, for ServeMux patterns, the most specific),
// and the Default when none does; where a target reaches more than one rule
// (an MQTT subscription, an escaped or unclean path), the first of them that
// refuses. Within a rule Deny is checked before
// Allow. It fails closed: a target no rule matches gets the Default, whose
// zero value refuses everyone; a client that could not be resolved, and a
// result flagged as masqueraded, whose address is a node standing in for a
// client who is lost (externalTrafficPolicy: Cluster), are refused unless
// the deciding rule says otherwise (Rule.AdmitInternal,
// Rule.AdmitMasqueraded).
//
// Use [Policy.Handler] for HTTP, and [Policy.Check] or [Policy.Decide] with
// [ResultFromConn] for MQTT and other connection protocols, or with the
// interceptor's resolution for gRPC (Check has the shape grpcsourceip's
// Policy interface asks for). A Policy is immutable and safe for concurrent
// use. The zero Policy refuses every client and answers 403.
type Policy struct {
	kind      TargetKind
	rules     []rule
	def       rule
	mux       *http.ServeMux // TargetPatterns: the rules' patterns
	byPattern map[string]int // TargetPatterns: a rule's index by its pattern
	route     func(*http.Request) string
	trust     clientip.Trust
	onDeny    func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)
	observer  Observer
	decisions DecisionObserver
}

// rule is a Rule as a Policy applies it, with its refusals built once.
type rule struct {
	name                  string
	target                string // TargetNames: without the trailing '*' of a prefix
	prefix                bool   // TargetNames: target is a prefix
	deny, allow           clientip.PrefixSet
	masq, internal        bool
	notAllowed, masqError *Denial
	denied                *Denial
	unresolved            *Denial // without a cause
}

// defaultRuleName is the name of a Default given none.
const defaultRuleName = "default"

// ruleHandler is what a policy's ServeMux routes to: the index of a rule.
type ruleHandler int

func (ruleHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// NewPolicy returns a Policy for cfg, or an error wrapping [ErrInvalidConfig]
// that names the rule at fault: a missing or repeated name, a target that is
// not valid for cfg.Targets (an invalid or conflicting ServeMux pattern, an
// invalid topic filter), a rule that an earlier one always overshadows,
// Rules without Targets, a Default with a target, or a Trust without a
// resolver.
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	if int(cfg.Targets) >= len(targetKindNames) {
		return nil, fmt.Errorf("%w: PolicyConfig.Targets %v is unknown", ErrInvalidConfig, cfg.Targets)
	}
	if len(cfg.Rules) > 0 && cfg.Targets == TargetNone {
		return nil, fmt.Errorf("%w: PolicyConfig.Rules need PolicyConfig.Targets to say what their targets are", ErrInvalidConfig)
	}
	if cfg.Trust != nil && cfg.Trust.Resolver() == nil {
		return nil, fmt.Errorf("%w: PolicyConfig.Trust has no resolver", ErrInvalidConfig)
	}
	if cfg.Default.Target != "" {
		return nil, fmt.Errorf("%w: the Default rule has Target %q; it decides what no rule matches", ErrInvalidConfig, cfg.Default.Target)
	}
	if cfg.Default.Name == "" {
		cfg.Default.Name = defaultRuleName
	}
	if err := validRuleName(cfg.Default.Name); err != nil {
		return nil, fmt.Errorf("%w: the Default rule: %w", ErrInvalidConfig, err)
	}
	p := &Policy{
		kind:     cfg.Targets,
		def:      compileRule(cfg.Default),
		rules:    make([]rule, 0, len(cfg.Rules)),
		route:    cfg.Route,
		trust:    cfg.Trust,
		onDeny:   cfg.OnDeny,
		observer: cfg.Observer,
	}
	if p.onDeny == nil {
		p.onDeny = denied
	}
	p.decisions, _ = cfg.Observer.(DecisionObserver)
	names := map[string]bool{p.def.name: true}
	if cfg.Targets == TargetPatterns {
		p.mux, p.byPattern = http.NewServeMux(), make(map[string]int, len(cfg.Rules))
	}
	for i, r := range cfg.Rules {
		if err := validRuleName(r.Name); err != nil {
			return nil, fmt.Errorf("%w: rule %d: %w", ErrInvalidConfig, i, err)
		}
		if names[r.Name] {
			return nil, fmt.Errorf("%w: rule name %q is used twice", ErrInvalidConfig, r.Name)
		}
		names[r.Name] = true
		c := compileRule(r)
		if err := p.addTarget(&c, r.Target, i); err != nil {
			return nil, fmt.Errorf("%w: rule %q: %w", ErrInvalidConfig, r.Name, err)
		}
		p.rules = append(p.rules, c)
	}
	return p, nil
}

// validRuleName returns an error unless name is a rule name.
func validRuleName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("rule name %q must have 1 to 64 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("rule name %q has %q: use letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

func compileRule(r Rule) rule {
	c := rule{name: r.Name, deny: r.Deny, allow: r.Allow, masq: r.AdmitMasqueraded, internal: r.AdmitInternal}
	c.notAllowed = &Denial{Rule: r.Name, Verdict: ErrNotAllowed}
	c.denied = &Denial{Rule: r.Name, Verdict: ErrDenied}
	c.masqError = &Denial{Rule: r.Name, Verdict: ErrMasqueraded}
	c.unresolved = &Denial{Rule: r.Name, Verdict: ErrUnresolved}
	return c
}

// addTarget validates the target of rule i and records it in c and p.
func (p *Policy) addTarget(c *rule, target string, i int) (err error) {
	if target == "" {
		return errors.New("Target is empty")
	}
	switch p.kind {
	case TargetPatterns:
		if _, dup := p.byPattern[target]; dup {
			return fmt.Errorf("pattern %q is used by an earlier rule", target)
		}
		// ServeMux panics on a pattern it refuses, with its reason.
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("pattern %q: %v", target, v)
			}
		}()
		p.mux.Handle(target, ruleHandler(i))
		p.byPattern[target] = i
	case TargetNames:
		c.target, c.prefix = strings.CutSuffix(target, "*")
		for _, e := range p.rules {
			if e.prefix && c.prefix && strings.HasPrefix(c.target, e.target) || !c.prefix && e.matchesName(c.target) {
				return fmt.Errorf("it never applies: every target it matches is matched by rule %q, earlier", e.name)
			}
		}
	case TargetTopics:
		if !validTopicFilter(target) {
			return fmt.Errorf("%q is not an MQTT topic filter", target)
		}
		c.target = target
		for _, e := range p.rules {
			if topicCovers(e.target, target) {
				return fmt.Errorf("it never applies: rule %q, earlier, matches every topic it does", e.name)
			}
		}
	}
	return nil
}

// Targets returns the kind of the policy's targets.
func (p *Policy) Targets() TargetKind { return p.kind }

// Check judges a resolution — the Result and the error of
// [clientip.Resolver.Resolve], [clientip.FromRequest] or [ResultFromConn],
// which may be a failure — for target: a ServeMux pattern, a name (a chi
// route, a gRPC full method) or an MQTT topic, as the policy's TargetKind
// says, and "" for a policy without rules. It returns nil to admit, or a
// *[Denial] naming the rule that refused and wrapping:
//   - [ErrMasqueraded] when res is flagged as masqueraded (whatever err is)
//     and the rule does not admit masqueraded clients;
//   - [ErrUnresolved] and err when the client was not resolved (or
//     [ErrUnresolved] alone when res names no client), unless the rule
//     admits internal callers and this is one;
//   - [ErrDenied], which wraps [ErrNotAllowed], when the client is in the
//     rule's Deny;
//   - [ErrNotAllowed] when the client is outside the rule's Allow, and,
//     with [ErrInvalidTarget], when target is not a valid MQTT topic for a
//     TargetTopics policy.
//
// It is pure: it looks at nothing but its arguments and the configuration.
// It does not allocate, except to wrap err when the client was not
// resolved; a ServeMux-pattern or name target costs a map lookup or a scan of
// the rules, a topic a scan of the rules with a match per level.
func (p *Policy) Check(target string, res clientip.Result, err error) error {
	return p.Decide(target, res, err).Err
}

// Decide is [Policy.Check] returning the [Decision]: the rule that decided,
// also when it admits.
func (p *Policy) Decide(target string, res clientip.Result, err error) Decision {
	return p.decide(target, &res, err)
}

// decide finds the rule for target and judges res and err under it, or,
// for an MQTT subscription, under every rule that decides a topic it
// receives (decideSubscription).
func (p *Policy) decide(target string, res *clientip.Result, err error) Decision {
	if p.kind == TargetTopics && strings.ContainsAny(target, "+#") && validTopicFilter(target) {
		return p.decideSubscription(target, res, err)
	}
	r := p.match(target)
	if r == nil {
		return Decision{Err: errInvalidTarget}
	}
	return r.judge(res, err)
}

// decideSubscription judges a topic filter with wildcards, which receives
// every topic it matches: under each rule, in order, whose filter shares a
// topic with it, until one covers it, and then under the Default when none
// does. The first refusal decides; an admission names the rule that covers
// the filter, or the Default. A rule whose shared topics all belong to
// earlier rules judges too, so this errs towards refusing.
func (p *Policy) decideSubscription(target string, res *clientip.Result, err error) Decision {
	for i := range p.rules {
		r := &p.rules[i]
		if !topicOverlaps(r.target, target) {
			continue
		}
		if d := r.judge(res, err); d.Err != nil || topicCovers(r.target, target) {
			return d
		}
	}
	return p.def.judge(res, err)
}

// errInvalidTarget is the refusal of a target no rule can judge.
var errInvalidTarget = &Denial{Verdict: ErrNotAllowed, Cause: ErrInvalidTarget}

// match returns the rule that decides for target, or nil for an invalid
// target.
func (p *Policy) match(target string) *rule {
	switch p.kind {
	case TargetPatterns:
		if i, ok := p.byPattern[target]; ok {
			return &p.rules[i]
		}
	case TargetNames:
		for i := range p.rules {
			if r := &p.rules[i]; r.matchesName(target) {
				return r
			}
		}
	case TargetTopics:
		if !validTopicFilter(target) {
			return nil
		}
		for i := range p.rules {
			if topicCovers(p.rules[i].target, target) {
				return &p.rules[i]
			}
		}
	}
	return &p.def
}

// matchesName reports whether the rule of a TargetNames policy matches
// name: exactly, or by prefix, where a prefix ending in '/' also matches the
// name without that slash ("/admin/*" matches "/admin"), which is how chi
// reports the "/" route of a group mounted at "/admin" and a route
// registered as "/admin/".
func (r *rule) matchesName(name string) bool {
	if !r.prefix {
		return name == r.target
	}
	if strings.HasPrefix(name, r.target) {
		return true
	}
	n := len(name)
	return n > 0 && n == len(r.target)-1 && r.target[n] == '/' && r.target[:n] == name
}

// judge decides about one resolution under r.
func (r *rule) judge(res *clientip.Result, err error) Decision {
	a := res.Client
	if err != nil || res.Masqueraded || !a.IsValid() {
		var d Decision
		if a, d = r.standIn(res, err); d.Err != nil {
			return d
		}
	}
	if r.deny.Len() > 0 && r.deny.Contains(a) {
		return r.refuse(r.denied, ErrDenied)
	}
	if !r.allow.Contains(a) {
		return r.refuse(r.notAllowed, ErrNotAllowed)
	}
	return Decision{Rule: r.name}
}

// standIn returns the address that stands in for a client that is
// masqueraded or was not resolved, when r admits such clients to be judged
// by the lists; otherwise the refusal.
func (r *rule) standIn(res *clientip.Result, err error) (netip.Addr, Decision) {
	if res.Masqueraded || errors.Is(err, clientip.ErrMasqueraded) {
		switch {
		case r.masq:
			return res.Client, Decision{}
		case err == nil || err == clientip.ErrMasqueraded:
			return netip.Addr{}, r.refuse(r.masqError, ErrMasqueraded)
		}
		return netip.Addr{}, Decision{Rule: r.ruleName(), Err: &Denial{Rule: r.ruleName(), Verdict: ErrMasqueraded, Cause: err}}
	}
	internal := errors.Is(err, clientip.ErrAllTrusted) || errors.Is(err, clientip.ErrTooFewHops)
	switch {
	case r.internal && internal:
		return res.Via, Decision{}
	case err == nil:
		return netip.Addr{}, r.refuse(r.unresolved, ErrUnresolved)
	}
	return netip.Addr{}, Decision{Rule: r.ruleName(), Err: &Denial{Rule: r.ruleName(), Verdict: ErrUnresolved, Cause: err}}
}

// ruleName is r's name: "default" for the Default of a zero Policy.
func (r *rule) ruleName() string {
	if r.name == "" {
		return defaultRuleName
	}
	return r.name
}

// refuse returns the refusal built for r, or, in a zero Policy, builds it.
func (r *rule) refuse(d *Denial, verdict error) Decision {
	if d == nil {
		d = &Denial{Rule: r.ruleName(), Verdict: verdict}
	}
	return Decision{Rule: d.Rule, Err: d}
}

// CheckRequest resolves r's client as [Policy.Handler] does and judges it for
// r's target, without writing or observing anything.
func (p *Policy) CheckRequest(r *http.Request) error {
	res, err := p.resolve(r)
	return p.decideRequest(r, &res, err).Err
}

// resolve resolves r's client under the configured Trust, or as
// clientip.FromRequest does.
func (p *Policy) resolve(r *http.Request) (clientip.Result, error) {
	if p.trust != nil {
		rv := p.trust.Resolver()
		if rv == nil {
			return clientip.Result{}, errRequestNilResolver
		}
		return rv.ResolveRequest(r)
	}
	return clientip.FromRequest(r)
}

// decideRequest finds the rule for r and judges res and err under it.
func (p *Policy) decideRequest(r *http.Request, res *clientip.Result, err error) Decision {
	switch {
	case len(p.rules) == 0 && p.kind != TargetTopics:
		return p.def.judge(res, err)
	case p.kind == TargetPatterns:
		rl := p.patternRule(r)
		if alt := p.decodedRule(r); alt != nil && alt != rl {
			// A handler that reads r.URL.Path serves what alt guards.
			if d := alt.judge(res, err); d.Err != nil {
				return d
			}
		}
		return rl.judge(res, err)
	case p.route != nil:
		return p.decide(p.route(r), res, err)
	}
	return p.decide("", res, err)
}

// patternRule returns the rule of a TargetPatterns policy for r: the one
// whose pattern Route reports, or else the one the rules' ServeMux routes r
// to. A pattern no rule names (one of the application's, or "" outside its
// ServeMux) is routed with the rules' patterns.
func (p *Policy) patternRule(r *http.Request) *rule {
	if p.route != nil {
		if i, ok := p.byPattern[p.route(r)]; ok {
			return &p.rules[i]
		}
	}
	return p.routed(r)
}

// routed returns the rule whose pattern the policy's ServeMux routes r to,
// or the Default when it routes r to none (a redirect, a 405, a 404).
func (p *Policy) routed(r *http.Request) *rule {
	if h, _ := p.mux.Handler(r); h != nil {
		if i, ok := h.(ruleHandler); ok {
			return &p.rules[i]
		}
	}
	return &p.def
}

// decodedRule returns the rule the rules' ServeMux routes r to by its
// decoded path, cleaned as ServeMux cleans one, when that differs from the
// escaped path ServeMux routes by: an escaped '/' or '.' ("%2F", "%2e%2e"),
// or an unclean path. A handler that reads r.URL.Path (http.FileServer
// cleans and serves it) serves what that rule guards. It returns nil for
// the usual request, whose path is clean and has no such escapes, without
// allocating.
func (p *Policy) decodedRule(r *http.Request) *rule {
	if r.URL == nil || r.URL.Path == "" || r.URL.RawPath == "" && isCleanPath(r.URL.Path) {
		return nil
	}
	u := *r.URL
	u.Path, u.RawPath = cleanPath(r.URL.Path), ""
	if u.Path == r.URL.EscapedPath() {
		return nil
	}
	decoded := *r
	decoded.URL = &u
	return p.routed(&decoded)
}

// isCleanPath reports whether p is a path ServeMux leaves as it is: rooted,
// without empty, "." or ".." segments.
func isCleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		// The segment after this '/' must not be empty (before another
		// '/'), "." or "..".
		j := i + 1
		if j < len(p) && p[j] == '/' {
			return false
		}
		k := j
		for k < len(p) && k-j < 3 && p[k] == '.' {
			k++
		}
		if k > j && k-j <= 2 && (k == len(p) || p[k] == '/') {
			return false
		}
	}
	return true
}

// cleanPath returns p rooted and cleaned, keeping a trailing slash, as
// ServeMux cleans a request's path.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// Handler returns a handler that resolves each request's client on demand
// (see PolicyConfig.Trust), judges it for the request's target, and serves
// the requests it admits with h, unchanged: no copy of the request, no
// context value. Handlers behind it read the client with
// [clientip.FromRequest], which, while h runs, returns the resolution the
// policy judged without walking the chain again ([clientip.HoldRequest]). A
// refused request is answered by the configured OnDeny after the Observer
// is told. Handler has the shape of a chi middleware:
// router.Use(policy.Handler).
//
// An admitted request costs no allocation, except in a TargetPatterns
// policy without a Route function (or whose Route names no rule's pattern),
// whose ServeMux allocates while it routes, as the application's own does (a
// few small allocations for most paths), and for a path that is unclean or
// escapes '/' or '.', which such a policy routes a second time.
func (p *Policy) Handler(h http.Handler) http.Handler {
	return &policyHandler{p: p, next: h}
}

type policyHandler struct {
	p    *Policy
	next http.Handler
}

func (ph *policyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	held := clientip.HoldRequest(r, ph.p.trust)
	defer held.Release()
	if ph.p.admit(w, r, &held.Result, held.Err) {
		ph.next.ServeHTTP(w, r)
	}
}

// ClientHandler is a handler that is given the resolution a [Policy]
// admitted: res and err are what [clientip.FromRequest] returns for the
// request; err is nil unless the deciding rule admits clients that were not
// resolved or are masqueraded (AdmitInternal, AdmitMasqueraded).
type ClientHandler func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

// Serve returns a handler that resolves and judges each request as
// [Policy.Handler] does and gives an admitted request's resolution to h as
// arguments, with the request unchanged. It is the cheapest way for a
// handler to act on the client: one resolution and nothing held on the
// connection, so h's own [clientip.FromRequest] would walk the chain again.
// Use Handler where the handlers behind the policy are plain http.Handlers
// (a router, other middleware), Serve where the policy guards the handler
// that uses the client:
//
//	mux.Handle("GET /quota", policy.Serve(func(w http.ResponseWriter, r *http.Request, res clientip.Result, _ error) {
//		fmt.Fprintln(w, quotas.Of(res.Client))
//	}))
//
// It allocates as Handler does.
func (p *Policy) Serve(h ClientHandler) http.Handler {
	return &policyServer{p: p, next: h}
}

type policyServer struct {
	p    *Policy
	next ClientHandler
}

func (ps *policyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := ps.p.resolve(r)
	if ps.p.admit(w, r, &res, err) {
		ps.next(w, r, res, err)
	}
}

// admit judges the resolution of r for its target, tells the observers, and
// answers a refused request with OnDeny. It reports whether r is admitted.
func (p *Policy) admit(w http.ResponseWriter, r *http.Request, res *clientip.Result, err error) bool {
	d := p.decideRequest(r, res, err)
	if p.decisions != nil {
		p.decisions.ObserveDecision(r.Context(), *res, d)
	}
	if d.Err == nil {
		return true
	}
	if p.observer != nil {
		p.observer.ObserveDeny(r.Context(), *res, d.Err)
	}
	deny := p.onDeny
	if deny == nil { // a zero Policy
		deny = denied
	}
	deny(w, r, *res, d.Err)
	return false
}

// denied is the default PolicyConfig.OnDeny.
func denied(w http.ResponseWriter, _ *http.Request, res clientip.Result, err error) {
	o := OutcomeOf(err)
	switch {
	case errors.Is(err, clientip.ErrNoTrust):
		noTrust(w)
	case errors.Is(err, ErrDenied):
		http.Error(w, "forbidden: the client address is in a denied source range", http.StatusForbidden)
	case o == OutcomeUnresolved && clientip.ReasonOf(err) != clientip.ReasonNone:
		http.Error(w, "cannot determine the client address: "+outcomeOfReason(clientip.ReasonOf(err)).explain(res.Header), http.StatusBadRequest)
	default:
		http.Error(w, "forbidden: "+o.explain(""), http.StatusForbidden)
	}
}
