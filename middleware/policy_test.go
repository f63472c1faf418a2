package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

var (
	everyone = clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")
	nodes    = clientip.MustParsePrefixSet("192.168.0.0/16")
)

func resolvedAt(a string) clientip.Result {
	return clientip.Result{Client: netip.MustParseAddr(a), Source: clientip.SourceXForwardedFor}
}

// patternPolicy has one rule per pattern, each named after what it pins.
func patternPolicy(tb testing.TB) *Policy {
	tb.Helper()
	p, err := NewPolicy(PolicyConfig{
		Targets: TargetPatterns,
		Rules: []Rule{
			{Name: "root", Target: "/", Allow: everyone},
			{Name: "admin", Target: "/admin/", Allow: office},
			{Name: "admin-public", Target: "/admin/public/", Allow: everyone},
			{Name: "api-get", Target: "GET /api/", Allow: everyone},
			{Name: "api-post", Target: "POST /api/", Allow: office},
			{Name: "host", Target: "example.com/", Allow: office},
			{Name: "item", Target: "/items/{id}", Allow: office},
			{Name: "exact", Target: "/exact/{$}", Allow: office},
			{Name: "put-only", Target: "PUT /put/", Allow: office},
		},
		Default: Rule{Name: "fallback", Allow: office},
	})
	require.NoError(tb, err)
	return p
}

// The rule that decides a request is the one the application's ServeMux
// would route it to: the most specific pattern, with ServeMux's treatment of
// methods, hosts, trailing slashes and unclean paths.
func TestPolicyServeMuxPrecedence(t *testing.T) {
	p := patternPolicy(t)
	tests := []struct {
		name   string
		method string
		url    string
		rule   string
	}{
		{"longest path prefix wins", "GET", "http://example.org/admin/users", "admin"},
		{"a more specific prefix wins over its parent", "GET", "http://example.org/admin/public/logo.png", "admin-public"},
		{"/ catches the rest", "GET", "http://example.org/anything", "root"},
		{"method pattern GET", "GET", "http://example.org/api/x", "api-get"},
		{"GET pattern also matches HEAD, as in ServeMux", "HEAD", "http://example.org/api/x", "api-get"},
		{"method pattern POST", "POST", "http://example.org/api/x", "api-post"},
		{"a method the specific patterns do not name falls to a pattern without one", "DELETE", "http://example.org/api/x", "root"},
		{"a path only a method pattern has, other method", "GET", "http://example.org/put/x", "root"},
		{"host pattern beats a path-only pattern", "GET", "http://example.com/anything", "host"},
		{"host pattern needs that Host", "GET", "http://www.example.com/anything", "root"},
		{"host matched without its port", "GET", "http://example.com:8080/anything", "host"},
		{"wildcard segment", "GET", "http://example.org/items/42", "item"},
		{"wildcard matches one segment only", "GET", "http://example.org/items/42/parts", "root"},
		{"{$} matches the exact path", "GET", "http://example.org/exact/", "exact"},
		{"{$} does not match below", "GET", "http://example.org/exact/x", "root"},
		{"/admin is redirected by ServeMux, not routed to /admin/: the default decides", "GET", "http://example.org/admin", "fallback"},
		{"an unclean path is redirected by ServeMux: the default decides", "GET", "http://example.org/public/../admin/x", "fallback"},
		{"an escaped slash is not a separator", "GET", "http://example.org/admin%2Fusers", "root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.url, nil)
			res := resolvedAt("198.51.100.7")
			d := p.decideRequest(r, &res, nil)
			assert.Equal(t, tc.rule, d.Rule)
			require.NoError(t, d.Err)
			// The application's own ServeMux serves the request with the
			// handler of the same pattern, or with none (a redirect, a 405).
			mux := http.NewServeMux()
			for _, rl := range p.rules {
				pattern := patternOf(p, rl.name)
				mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(rl.name)) })
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, r)
			served := rec.Body.String()
			if rec.Code != http.StatusOK {
				served = "fallback"
			}
			assert.Equal(t, tc.rule, served, "the application's ServeMux answered %d", rec.Code)
		})
	}
	// A path only patterns of other methods match: ServeMux answers 405,
	// and the default decides.
	only, err := NewPolicy(PolicyConfig{Targets: TargetPatterns, Rules: []Rule{{Name: "get", Target: "GET /only/", Allow: everyone}}})
	require.NoError(t, err)
	res := resolvedAt("198.51.100.7")
	assert.Equal(t, "get", only.decideRequest(httptest.NewRequest("GET", "/only/x", nil), &res, nil).Rule)
	assert.Equal(t, "default", only.decideRequest(httptest.NewRequest("POST", "/only/x", nil), &res, nil).Rule)

	// Check, given the pattern ServeMux reports, reaches the same rule.
	assert.Equal(t, "api-post", p.Decide("POST /api/", resolvedAt("198.51.100.7"), nil).Rule)
	assert.Equal(t, "fallback", p.Decide("/no-such-pattern/", resolvedAt("198.51.100.7"), nil).Rule)
}

// With a Route function that reports the application's pattern
// (r.Pattern), a request the application routes to a pattern no rule names
// is still judged by the rule whose pattern covers it: "/admin/users" (or a
// policy mounted outside the mux, where r.Pattern is "") under "/admin/", not
// under a permissive Default.
func TestPolicyRoutePatternNoRule(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{
		Targets: TargetPatterns,
		Rules:   []Rule{{Name: "admin", Target: "/admin/", Allow: office}},
		Default: Rule{Name: "public", Allow: everyone},
		Route:   func(r *http.Request) string { return r.Pattern },
	})
	require.NoError(t, err)
	served := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("served")) }
	app := http.NewServeMux()
	app.Handle("/admin/", p.Handler(http.HandlerFunc(served)))
	app.Handle("/admin/users", p.Handler(http.HandlerFunc(served)))
	app.Handle("/", p.Handler(http.HandlerFunc(served)))
	for _, tc := range []struct {
		name    string
		h       http.Handler
		path    string
		client  string
		allowed bool
	}{
		{"the pattern of a rule", app, "/admin/x", "203.0.113.9", false},
		{"an application pattern no rule names, under a rule's subtree", app, "/admin/users", "203.0.113.9", false},
		{"the same from the office", app, "/admin/users", "198.51.100.7", true},
		{"outside every rule", app, "/x", "203.0.113.9", true},
		{"mounted outside the mux: r.Pattern is empty", p.Handler(http.HandlerFunc(served)), "/admin/users", "203.0.113.9", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "http://example.org"+tc.path, nil)
			res := resolvedAt(tc.client)
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req.WithContext(clientip.NewContext(req.Context(), res)))
			if tc.allowed {
				assert.Equal(t, http.StatusOK, rec.Code)
				return
			}
			assert.Equal(t, http.StatusForbidden, rec.Code)
		})
	}
}

// A handler that reads r.URL.Path, as http.FileServer does, serves the
// decoded, cleaned path, while ServeMux routes the escaped one as it came:
// "/admin%2fsecret.txt" and "/x/%2e%2e/admin/secret.txt" route to "/" but
// serve /admin/secret.txt, and an unclean "/x/../admin/secret.txt" reaches a
// FileServer the policy guards without a ServeMux. The rule the decoded path
// routes to judges such a request too, so the admin subtree is not served
// under "/" or the Default.
func TestPolicyDecodedPath(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "admin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "admin", "secret.txt"), []byte("secret"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.txt"), []byte("index"), 0o600))
	files := http.FileServer(http.Dir(dir))
	p, err := NewPolicy(PolicyConfig{
		Targets: TargetPatterns,
		Rules:   []Rule{{Name: "admin", Target: "/admin/", Allow: office}, {Name: "site", Target: "/", Allow: everyone}},
		Default: Rule{Name: "other", Allow: everyone},
	})
	require.NoError(t, err)
	app := http.NewServeMux()
	app.Handle("/", files)
	for _, tc := range []struct {
		name, path string
		h          http.Handler
	}{
		{"escaped slash", "/admin%2fsecret.txt", p.Handler(app)},
		{"escaped dot-dot", "/x/%2e%2e/admin/secret.txt", p.Handler(app)},
		{"escaped dot-dot at the root", "/%2e%2e/admin/secret.txt", p.Handler(app)},
		{"unclean path without a ServeMux", "/x/../admin/secret.txt", p.Handler(files)},
		{"escaped slash without a ServeMux", "/admin%2Fsecret.txt", p.Handler(files)},
	} {
		for _, client := range []string{"203.0.113.9", "198.51.100.7"} {
			t.Run(tc.name+" from "+client, func(t *testing.T) {
				req := httptest.NewRequest("GET", tc.path, nil)
				req = req.WithContext(clientip.NewContext(req.Context(), resolvedAt(client)))
				rec := httptest.NewRecorder()
				tc.h.ServeHTTP(rec, req)
				if office.Contains(netip.MustParseAddr(client)) {
					assert.NotEqual(t, http.StatusForbidden, rec.Code)
					return
				}
				assert.Equal(t, http.StatusForbidden, rec.Code)
				assert.NotContains(t, rec.Body.String(), "secret")
			})
		}
	}
	// The site itself, escaped or not, is still the site's.
	for _, path := range []string{"/index.txt", "/%69ndex.txt"} {
		req := httptest.NewRequest("GET", path, nil)
		res := resolvedAt("203.0.113.9")
		d := p.decideRequest(req, &res, nil)
		assert.Equal(t, "site", d.Rule, path)
		assert.NoError(t, d.Err, path)
	}
}

// isCleanPath and cleanPath agree: a path is clean when cleaning leaves it.
func TestIsCleanPath(t *testing.T) {
	for _, p := range []string{"", "/", "//", "/a", "/a/", "/a//b", "/.", "/..", "/./a", "/../a", "/a/.", "/a/..",
		"/a/./", "/a/../", "/...", "/.a", "/a..", "/a/.../b", "/..a/b", "a", "*", "/a/b/c/"} {
		assert.Equal(t, cleanPath(p) == p, isCleanPath(p), "%q", p)
	}
}

// patternOf returns the pattern of the rule named name.
func patternOf(p *Policy, name string) string {
	for pattern, i := range p.byPattern {
		if p.rules[i].name == name {
			return pattern
		}
	}
	return ""
}

// Names: exact, or a prefix ending in "*"; the first rule that matches decides.
func TestPolicyNames(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{
		Targets: TargetNames,
		Rules: []Rule{
			{Name: "health", Target: "/healthz", Allow: everyone},
			{Name: "users-list", Target: "/admin/users", Allow: everyone},
			{Name: "admin", Target: "/admin/*", Allow: office},
			{Name: "grpc-admin", Target: "/pkg.Admin/*", Allow: office},
			{Name: "grpc-get", Target: "/pkg.Store/Get", Allow: everyone},
		},
	})
	require.NoError(t, err)
	tests := []struct {
		name   string
		target string
		rule   string
	}{
		{"exact", "/healthz", "health"},
		{"exact is not a prefix", "/healthz/x", "default"},
		{"an earlier exact rule wins over a later prefix", "/admin/users", "users-list"},
		{"prefix", "/admin/users/{id}", "admin"},
		{"chi's pattern for a mounted router", "/admin/*", "admin"},
		{"chi's pattern for a group's / route, without its slash", "/admin", "admin"},
		{"a prefix's parent is only its name without the slash", "/adminx", "default"},
		{"gRPC service prefix", "/pkg.Admin/Delete", "grpc-admin"},
		{"gRPC method", "/pkg.Store/Get", "grpc-get"},
		{"gRPC method of another service", "/pkg.Store/Put", "default"},
		{"empty target", "", "default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.rule, p.Decide(tc.target, resolvedAt("198.51.100.7"), nil).Rule)
		})
	}
	// "/*" has no parent name: the empty target (chi before routing) is
	// still the Default's.
	root, err := NewPolicy(PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "root", Target: "/*", Allow: everyone}}})
	require.NoError(t, err)
	assert.Equal(t, "default", root.Decide("", resolvedAt("198.51.100.7"), nil).Rule)
	assert.Equal(t, "root", root.Decide("/", resolvedAt("198.51.100.7"), nil).Rule)
}

// Topics: the first rule whose filter matches a topic name decides; a target
// that is no topic is refused whatever the default says. A subscription
// receives every topic its filter matches (MQTT 5.0 §4.7.1, 3.1.1 §4.7.1), so
// it must not reach a topic whose rule refuses the client by being judged only
// under a wider rule or the Default: "devices/+/+" and "#" receive
// "devices/d1/firmware", which only the office may read. Every rule whose
// filter shares a topic with the subscription judges it, in order, until one
// covers it, and then the Default when none does; the first refusal decides.
func TestPolicyTopics(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{
		Targets: TargetTopics,
		Rules: []Rule{
			{Name: "sys", Target: "$SYS/#", Allow: office},
			{Name: "firmware", Target: "devices/+/firmware", Allow: office},
			{Name: "devices", Target: "devices/#", Allow: everyone},
		},
		Default: Rule{Allow: everyone},
	})
	require.NoError(t, err)
	const elsewhere, fromOffice = "203.0.113.9", "198.51.100.7"
	tests := []struct {
		name   string
		client string
		target string
		rule   string
		err    error
	}{
		{"first match: a specific filter before a wide one", elsewhere, "devices/d1/firmware", "firmware", ErrNotAllowed},
		{"the wide one", elsewhere, "devices/d1/telemetry", "devices", nil},
		{"# covers its parent", elsewhere, "devices", "devices", nil},
		{"$SYS only by a rule that names it", elsewhere, "$SYS/broker/load", "sys", ErrNotAllowed},
		{"a subscription within a rule", elsewhere, "devices/+/telemetry", "devices", nil},
		{"§4.7.1.3 devices/+/+ receives devices/d1/firmware", elsewhere, "devices/+/+", "firmware", ErrNotAllowed},
		{"§4.7.1.2 # receives devices/d1/firmware", elsewhere, "#", "firmware", ErrNotAllowed},
		{"§4.7.1.2 devices/# receives devices/d1/firmware", elsewhere, "devices/#", "firmware", ErrNotAllowed},
		{"§4.7.1.3 +/+/firmware receives devices/d1/firmware", elsewhere, "+/+/firmware", "firmware", ErrNotAllowed},
		{"§4.7.1.3 devices/d1/+ receives devices/d1/firmware", elsewhere, "devices/d1/+", "firmware", ErrNotAllowed},
		{"§4.7.2 + receives no $SYS topic, so the sys rule does not judge it", elsewhere, "+/broker/load", "default", nil},
		{"every rule a subscription reaches admits; the Default decides the rest", fromOffice, "#", "default", nil},
		{"a subscription from the office within the covering rule", fromOffice, "devices/+/+", "devices", nil},
		{"empty topic", elsewhere, "", "", ErrInvalidTarget},
		{"misplaced #", elsewhere, "devices/#/x", "", ErrInvalidTarget},
		{"U+0000", elsewhere, "devices/\x00", "", ErrInvalidTarget},
		{"invalid UTF-8", elsewhere, "devices/\xff", "", ErrInvalidTarget},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.target, resolvedAt(tc.client), nil)
			assert.Equal(t, tc.rule, d.Rule)
			if tc.err == nil {
				assert.NoError(t, d.Err)
				return
			}
			assert.ErrorIs(t, d.Err, tc.err)
			assert.ErrorIs(t, d.Err, ErrNotAllowed)
			assert.Equal(t, OutcomeNotAllowed, d.Outcome())
		})
	}
	// The Default judges a subscription no rule covers.
	closed, err := NewPolicy(PolicyConfig{Targets: TargetTopics, Rules: []Rule{{Name: "devices", Target: "devices/#", Allow: everyone}}})
	require.NoError(t, err)
	d := closed.Decide("+/x", resolvedAt(fromOffice), nil)
	assert.Equal(t, "default", d.Rule)
	assert.ErrorIs(t, d.Err, ErrNotAllowed)
}

// How one rule judges a resolution: deny before allow, masqueraded and
// unresolved clients refused unless the rule says otherwise.
func TestPolicyJudge(t *testing.T) {
	malformed := &clientip.ChainError{Hop: 2, Header: "X-Forwarded-For", Value: "x", Err: clientip.ErrMalformed}
	allTrusted := &clientip.ChainError{Hop: 1, Err: clientip.ErrAllTrusted}
	node := clientip.Result{Client: netip.MustParseAddr("192.168.1.1"), Source: clientip.SourceSocket, Masqueraded: true}
	internal := clientip.Result{Via: netip.MustParseAddr("10.0.0.7"), Hop: 1}
	tests := []struct {
		name string
		rule Rule
		res  clientip.Result
		err  error
		want []error // nil: admitted
	}{
		{name: "allowed", rule: Rule{Allow: office}, res: resolvedAt("198.51.100.7")},
		{name: "outside allow", rule: Rule{Allow: office}, res: resolvedAt("203.0.113.9"), want: []error{ErrNotAllowed}},
		{name: "deny before allow", rule: Rule{Allow: office, Deny: clientip.MustParsePrefixSet("198.51.100.66/32")},
			res: resolvedAt("198.51.100.66"), want: []error{ErrDenied, ErrNotAllowed}},
		{name: "deny carves out only itself", rule: Rule{Allow: office, Deny: clientip.MustParsePrefixSet("198.51.100.66/32")},
			res: resolvedAt("198.51.100.67")},
		{name: "deny alone refuses everyone", rule: Rule{Deny: office}, res: resolvedAt("203.0.113.9"), want: []error{ErrNotAllowed}},
		{name: "zero rule refuses everyone", res: resolvedAt("198.51.100.7"), want: []error{ErrNotAllowed}},
		{name: "IPv4-mapped client judged as IPv4", rule: Rule{Allow: office}, res: resolvedAt("::ffff:198.51.100.7")},
		{name: "masqueraded refused even inside allow", rule: Rule{Allow: everyone}, res: node, err: clientip.ErrMasqueraded,
			want: []error{ErrMasqueraded, clientip.ErrMasqueraded}},
		{name: "masqueraded flag without error", rule: Rule{Allow: everyone}, res: node, want: []error{ErrMasqueraded}},
		{name: "masquerade error without flag", rule: Rule{Allow: everyone}, res: resolvedAt("198.51.100.7"), err: clientip.ErrMasqueraded,
			want: []error{ErrMasqueraded}},
		{name: "AdmitMasqueraded judges the node by the lists", rule: Rule{Allow: nodes, AdmitMasqueraded: true}, res: node, err: clientip.ErrMasqueraded},
		{name: "AdmitMasqueraded, node outside allow", rule: Rule{Allow: office, AdmitMasqueraded: true}, res: node, err: clientip.ErrMasqueraded,
			want: []error{ErrNotAllowed}},
		{name: "unresolved refused", rule: Rule{Allow: everyone}, err: malformed, want: []error{ErrUnresolved, clientip.ErrMalformed}},
		{name: "zero result without error", rule: Rule{Allow: everyone}, want: []error{ErrUnresolved}},
		{name: "AdmitInternal admits an all-trusted request from an allowed hop", rule: Rule{Allow: clientip.MustParsePrefixSet("10.0.0.0/8"), AdmitInternal: true},
			res: internal, err: allTrusted},
		{name: "AdmitInternal, hop outside allow", rule: Rule{Allow: office, AdmitInternal: true}, res: internal, err: allTrusted,
			want: []error{ErrNotAllowed}},
		{name: "AdmitInternal, too few hops", rule: Rule{Allow: everyone, AdmitInternal: true}, res: internal,
			err: &clientip.ChainError{Err: clientip.ErrTooFewHops}},
		{name: "AdmitInternal never admits a malformed chain", rule: Rule{Allow: everyone, AdmitInternal: true}, err: malformed,
			want: []error{ErrUnresolved, clientip.ErrMalformed}},
		{name: "AdmitInternal, Unix-domain hop has no address", rule: Rule{Allow: everyone, AdmitInternal: true}, err: allTrusted,
			want: []error{ErrNotAllowed}},
		{name: "no trust on the connection", rule: Rule{Allow: everyone}, err: clientip.ErrNoTrust, want: []error{ErrUnresolved, clientip.ErrNoTrust}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.rule.Name = "r"
			p, err := NewPolicy(PolicyConfig{Default: tc.rule})
			require.NoError(t, err)
			d := p.Decide("", tc.res, tc.err)
			assert.Equal(t, "r", d.Rule, "the decision names its rule")
			if tc.want == nil {
				require.NoError(t, d.Err)
				assert.True(t, d.Allowed())
				return
			}
			require.Error(t, d.Err)
			for _, w := range tc.want {
				assert.ErrorIs(t, d.Err, w)
			}
			rule, ok := RuleOf(d.Err)
			assert.True(t, ok)
			assert.Equal(t, "r", rule)
			assert.Equal(t, d.Err, p.Check("", tc.res, tc.err))
		})
	}
}

// Review finding: a client in a rule's Deny was refused with the text of
// ErrNotAllowed, "not in an allowed source range", though the Allow held it,
// so an operator could not tell a deny list's refusal from a missing allow
// entry. A deny is ErrDenied, with its own text and 403 body, and still
// ErrNotAllowed for errors.Is, OutcomeOf and the metrics; a client outside
// the Allow is not ErrDenied.
func TestPolicyDenyHasItsOwnWording(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{Default: Rule{Name: "office", Allow: office, Deny: clientip.MustParsePrefixSet("198.51.100.66/32")}})
	require.NoError(t, err)

	deny := p.Check("", resolvedAt("198.51.100.66"), nil)
	require.ErrorIs(t, deny, ErrDenied)
	assert.ErrorIs(t, deny, ErrNotAllowed, "a deny is a case of not allowed")
	assert.Equal(t, OutcomeNotAllowed, OutcomeOf(deny))
	assert.Equal(t, "middleware: client address in a denied source range (rule office)", deny.Error())

	outside := p.Check("", resolvedAt("203.0.113.9"), nil)
	require.ErrorIs(t, outside, ErrNotAllowed)
	assert.NotErrorIs(t, outside, ErrDenied, "a client outside the Allow is not denied")
	assert.Equal(t, "middleware: client address not in an allowed source range (rule office)", outside.Error())

	rec := httptest.NewRecorder()
	denied(rec, nil, resolvedAt("198.51.100.66"), deny)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Equal(t, "forbidden: the client address is in a denied source range\n", rec.Body.String())
	assert.Zero(t, testing.AllocsPerRun(100, func() { p.Check("", resolvedAt("198.51.100.66"), nil) }), "a deny allocates")
}

// The zero configuration refuses everyone, and so does a target no rule
// matches when the Default is left zero.
func TestPolicyZeroConfig(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{})
	require.NoError(t, err)
	for _, a := range []string{"198.51.100.7", "10.0.0.1", "::1"} {
		d := p.Decide("", resolvedAt(a), nil)
		assert.ErrorIs(t, d.Err, ErrNotAllowed, a)
		assert.Equal(t, "default", d.Rule)
	}
	p, err = NewPolicy(PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "open", Target: "/open", Allow: everyone}}})
	require.NoError(t, err)
	assert.NoError(t, p.Check("/open", resolvedAt("203.0.113.9"), nil))
	assert.ErrorIs(t, p.Check("/closed", resolvedAt("203.0.113.9"), nil), ErrNotAllowed)
}

func TestNewPolicyErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  PolicyConfig
		want string
	}{
		{"rules without targets", PolicyConfig{Rules: []Rule{{Name: "a", Target: "/"}}}, "need PolicyConfig.Targets"},
		{"unknown kind", PolicyConfig{Targets: 9}, "unknown"},
		{"unnamed rule", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Target: "/"}}}, "1 to 64"},
		{"name with a space", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a b", Target: "/"}}}, "letters, digits"},
		{"name too long", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: strings.Repeat("a", 65), Target: "/"}}}, "1 to 64"},
		{"name used twice", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a", Target: "/x"}, {Name: "a", Target: "/y"}}}, "used twice"},
		{"rule named like the default", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "default", Target: "/x"}}}, "used twice"},
		{"empty target", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a"}}}, "empty"},
		{"default with a target", PolicyConfig{Default: Rule{Target: "/"}}, "Default rule has Target"},
		{"invalid pattern", PolicyConfig{Targets: TargetPatterns, Rules: []Rule{{Name: "a", Target: "GET"}}}, `pattern "GET"`},
		{"conflicting patterns", PolicyConfig{Targets: TargetPatterns, Rules: []Rule{{Name: "a", Target: "/x/{a}"}, {Name: "b", Target: "/x/{b}"}}}, "conflicts"},
		{"same pattern twice", PolicyConfig{Targets: TargetPatterns, Rules: []Rule{{Name: "a", Target: "/x/"}, {Name: "b", Target: "/x/"}}}, "earlier rule"},
		{"name shadowed by a prefix", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a", Target: "/admin/*"}, {Name: "b", Target: "/admin/users"}}}, `rule "a", earlier`},
		{"prefix shadowed by a shorter prefix", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a", Target: "*"}, {Name: "b", Target: "/x*"}}}, `rule "a", earlier`},
		{"name twice", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a", Target: "/x"}, {Name: "b", Target: "/x"}}}, `rule "a", earlier`},
		{"name shadowed by a prefix's parent", PolicyConfig{Targets: TargetNames, Rules: []Rule{{Name: "a", Target: "/admin/*"}, {Name: "b", Target: "/admin"}}}, `rule "a", earlier`},
		{"invalid filter", PolicyConfig{Targets: TargetTopics, Rules: []Rule{{Name: "a", Target: "a/#/b"}}}, "not an MQTT topic filter"},
		{"filter shadowed", PolicyConfig{Targets: TargetTopics, Rules: []Rule{{Name: "a", Target: "devices/#"}, {Name: "b", Target: "devices/+/x"}}}, `rule "a", earlier`},
		{"filter shadowed: /# has no parent topic", PolicyConfig{Targets: TargetTopics, Rules: []Rule{{Name: "a", Target: "/+/#"}, {Name: "b", Target: "/#"}}}, `rule "a", earlier`},
		{"trust without resolver", PolicyConfig{Trust: nilTrust{}}, "no resolver"},
		{"a nil *clientip.Store (a variable never set)", PolicyConfig{Trust: (*clientip.Store)(nil)}, "no resolver"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicy(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, p)
		})
	}
}

type nilTrust struct{}

func (nilTrust) Resolver() *clientip.Resolver { return nil }

// recordingDecisions is an Observer that also records every decision.
type recordingDecisions struct {
	recordingObserver
	decisions []Decision
}

func (o *recordingDecisions) ObserveDecision(_ context.Context, _ clientip.Result, d Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions = append(o.decisions, d)
}

// Handler resolves on demand, from the connection's node, and passes the very
// request it was given on: the handler reads the client with FromRequest.
func TestPolicyHandler(t *testing.T) {
	trust := testResolver(t)
	obs := &recordingDecisions{}
	p, err := NewPolicy(PolicyConfig{
		Targets:  TargetPatterns,
		Rules:    []Rule{{Name: "admin", Target: "/admin/", Allow: office}},
		Default:  Rule{Name: "public", Allow: everyone},
		Observer: obs,
	})
	require.NoError(t, err)
	var seen *http.Request
	// Handler, whose handler reads the client with FromRequest, and Serve,
	// which hands it over, answer alike.
	forms := map[string]http.Handler{
		"Handler": p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r
			res, err := clientip.FromRequest(r)
			require.NoError(t, err)
			w.Write([]byte(res.Client.String()))
		})),
		"Serve": p.Serve(func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) {
			seen = r
			require.NoError(t, err)
			w.Write([]byte(res.Client.String()))
		}),
	}
	tests := []struct {
		name     string
		peer     string
		xff      string
		path     string
		wantCode int
		wantBody string
		rule     string
	}{
		{"admin from the office", "10.0.0.1:5000", "198.51.100.7", "/admin/x", 200, "198.51.100.7", "admin"},
		{"admin from elsewhere", "10.0.0.1:5000", "203.0.113.9", "/admin/x", 403, "forbidden: the client address is not in an allowed source range\n", "admin"},
		{"public from elsewhere", "10.0.0.1:5000", "203.0.113.9", "/x", 200, "203.0.113.9", "public"},
		{"forged XFF from a direct client", "203.0.113.9:5000", "198.51.100.7", "/admin/x", 403, "forbidden: the client address is not in an allowed source range\n", "admin"},
		{"malformed chain: 400", "10.0.0.1:5000", "198.51.100.7, bogus", "/x", 400, "cannot determine the client address: malformed address in X-Forwarded-For\n", "public"},
		{"masqueraded node: 403", "192.168.1.10:5000", "", "/x", 403, "forbidden: the client address was masqueraded by a node and cannot be verified\n", "public"},
	}
	for form, h := range forms {
		for _, tc := range tests {
			t.Run(form+"/"+tc.name, func(t *testing.T) {
				req := httptest.NewRequestWithContext(connContext(trust, tc.peer), "GET", "http://example.org"+tc.path, nil)
				if tc.xff != "" {
					req.Header.Set("X-Forwarded-For", tc.xff)
				}
				seen = nil
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				assert.Equal(t, tc.wantCode, rec.Code)
				assert.Equal(t, tc.wantBody, rec.Body.String())
				require.Len(t, obs.decisions, 1)
				assert.Equal(t, tc.rule, obs.decisions[0].Rule)
				denials := obs.take()
				if tc.wantCode == 200 {
					assert.Same(t, req, seen, "the request was copied")
					assert.Empty(t, denials)
				} else {
					require.Len(t, denials, 1)
					assert.Equal(t, obs.decisions[0].Err, denials[0].err)
				}
				obs.decisions = nil
			})
		}
	}
}

// Serve hands the handler the error too when the deciding rule admits a
// client that was not resolved: the handler can tell a stand-in from a
// client (a health check from a trusted hop).
func TestPolicyServeUnresolved(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{
		Targets: TargetPatterns,
		Rules:   []Rule{{Name: "health", Target: "GET /healthz", Allow: everyone, AdmitInternal: true}},
	})
	require.NoError(t, err)
	var got error
	h := p.Serve(func(w http.ResponseWriter, _ *http.Request, _ clientip.Result, err error) { got = err })
	req := httptest.NewRequestWithContext(connContext(testResolver(t), "10.0.0.1:5000"), "GET", "http://example.org/healthz", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.ErrorIs(t, got, clientip.ErrAllTrusted, "a trusted hop with no header names no client")
}

// connContext returns the context a server with ConnContext(trust) gives the
// requests of a TCP connection from peer.
func connContext(trust clientip.Trust, peer string) context.Context {
	return ConnContext(trust)(context.Background(), tcpConn{peer: netip.MustParseAddrPort(peer)})
}

// A Policy with its own Trust resolves with it, and from RemoteAddr when the
// connection stored nothing.
func TestPolicyOwnTrust(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{Default: Rule{Allow: office}, Trust: testResolver(t)})
	require.NoError(t, err)
	assert.NoError(t, p.CheckRequest(request("10.0.0.1:5000", "198.51.100.7")))
	assert.ErrorIs(t, p.CheckRequest(request("10.0.0.1:5000", "203.0.113.9")), ErrNotAllowed)
	// The policy's Trust decides, not the one the connection carries.
	other := clientip.MustNew(clientip.Config{})
	req := httptest.NewRequestWithContext(connContext(other, "10.0.0.1:5000"), "GET", "/", nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	assert.NoError(t, p.CheckRequest(req))
}

// The no-copy path allocates nothing: Check when it admits or refuses a
// resolved client, and Handler with a trust from the connection.
func TestPolicyNoAllocs(t *testing.T) {
	p := patternPolicy(t)
	in, out := resolvedAt("198.51.100.7"), resolvedAt("203.0.113.9")
	node := clientip.Result{Client: netip.MustParseAddr("192.168.1.1"), Masqueraded: true}
	for name, f := range map[string]func(){
		"Check admits":             func() { p.Check("/admin/", in, nil) },
		"Check refuses":            func() { p.Check("/admin/", out, nil) },
		"Check refuses masquerade": func() { p.Check("/admin/", node, clientip.ErrMasqueraded) },
		"Decide":                   func() { p.Decide("GET /api/", in, nil) },
	} {
		assert.Zero(t, testing.AllocsPerRun(100, f), name)
	}
	topics, err := NewPolicy(PolicyConfig{Targets: TargetTopics, Rules: []Rule{{Name: "d", Target: "devices/+/telemetry", Allow: everyone}}})
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(100, func() { topics.Check("devices/d1/telemetry", in, nil) }), "topic Check")
	assert.Zero(t, testing.AllocsPerRun(100, func() { topics.Check("devices/+/#", in, nil) }), "subscription Check")
	byPattern, err := NewPolicy(PolicyConfig{Targets: TargetPatterns, Rules: []Rule{{Name: "admin", Target: "/admin/", Allow: office}},
		Route: func(*http.Request) string { return "/admin/" }})
	require.NoError(t, err)
	routed := httptest.NewRequest("GET", "/admin/x", nil)
	assert.Zero(t, testing.AllocsPerRun(100, func() { byPattern.decideRequest(routed, &in, nil) }), "a pattern from Route, clean path")

	// Handler and Serve, with the request's target from a Route function (the
	// ServeMux a TargetPatterns policy routes with allocates, as the
	// application's own does) and with no target at all.
	names, err := NewPolicy(PolicyConfig{
		Targets: TargetNames,
		Rules:   []Rule{{Name: "admin", Target: "/admin/*", Allow: office}, {Name: "api", Target: "/api/*", Allow: everyone}},
		Route:   func(r *http.Request) string { return r.URL.Path },
	})
	require.NoError(t, err)
	ranges, err := NewSourceRanges(SourceRangesConfig{Allow: everyone})
	require.NoError(t, err)
	trust := testResolver(t)
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { clientip.FromRequest(r) })
	var got netip.Addr
	served := func(_ http.ResponseWriter, _ *http.Request, res clientip.Result, _ error) { got = res.Client }
	w := httptest.NewRecorder()
	for _, h := range []http.Handler{names.Handler(read), ranges.Handler(read), names.Serve(served), ranges.Serve(served)} {
		for _, tc := range []struct{ name, peer, xff, path, want string }{
			{"direct client", "198.51.100.7:5000", "", "/admin/x", "198.51.100.7"},
			{"through a proxy", "10.0.0.1:5000", "198.51.100.7, 10.0.0.2", "/admin/x", "198.51.100.7"},
			{"through a proxy, IPv6", "[fd00::1]:5000", "2001:db8::7, fd00::2", "/api/x", "2001:db8::7"},
		} {
			req := httptest.NewRequestWithContext(connContext(trust, tc.peer), "GET", "http://example.org"+tc.path, nil)
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			h.ServeHTTP(w, req)
			require.Equal(t, 200, w.Code, tc.name)
			assert.Zero(t, testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) }), "%T, %s", h, tc.name)
			if _, ok := h.(*policyServer); ok {
				assert.Equal(t, tc.want, got.String(), "Serve hands over the client, %s", tc.name)
			}
		}
	}
}

// A zero Policy's Handler refuses with 403, and a policy built without its
// own Trust refuses requests on a connection that carries none with 500.
func TestPolicyHandlerWiring(t *testing.T) {
	var zero Policy
	rec := httptest.NewRecorder()
	zero.Handler(echo).ServeHTTP(rec, httptest.NewRequestWithContext(connContext(testResolver(t), "198.51.100.7:1"), "GET", "/", nil))
	assert.Equal(t, http.StatusForbidden, rec.Code)

	p, err := NewSourceRanges(SourceRangesConfig{Allow: everyone})
	require.NoError(t, err)
	rec = httptest.NewRecorder()
	p.Handler(echo).ServeHTTP(rec, request("198.51.100.7:5000"))
	assert.Equal(t, http.StatusInternalServerError, rec.Code, "no trust anywhere: %q", rec.Body.String())
	assert.True(t, errors.Is(p.CheckRequest(request("198.51.100.7:5000")), clientip.ErrNoTrust))
}

// A Denial matches its verdict and its cause with errors.Is and errors.As,
// and names its rule through any wrapping, without allocating.
func TestDenial(t *testing.T) {
	cause := &clientip.ChainError{Hop: 2, Header: "X-Forwarded-For", Value: "x", Err: clientip.ErrMalformed}
	d := &Denial{Rule: "admin", Verdict: ErrUnresolved, Cause: cause}
	assert.ErrorIs(t, d, ErrUnresolved)
	assert.ErrorIs(t, d, clientip.ErrMalformed)
	assert.NotErrorIs(t, d, ErrNotAllowed)
	var ce *clientip.ChainError
	require.ErrorAs(t, d, &ce)
	assert.Same(t, cause, ce)
	assert.Equal(t, `middleware: client address unresolved (rule admin): clientip: malformed address (hop 2 in X-Forwarded-For: "x")`, d.Error())
	assert.Equal(t, OutcomeUnresolved, OutcomeOf(d))
	for _, err := range []error{d, fmt.Errorf("connect: %w", d), errors.Join(errors.New("other"), d)} {
		rule, ok := RuleOf(err)
		assert.True(t, ok, "%v", err)
		assert.Equal(t, "admin", rule)
	}
	_, ok := RuleOf(ErrNotAllowed)
	assert.False(t, ok)
	assert.Equal(t, "middleware: invalid policy target", ErrInvalidTarget.Error())
	assert.Equal(t, "middleware: client address not in an allowed source range (no rule): middleware: invalid policy target", errInvalidTarget.Error())

	refused := &Denial{Rule: "admin", Verdict: ErrNotAllowed}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		OutcomeOf(d)
		OutcomeOf(refused)
		RuleOf(refused)
	}))
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = errors.Is(d, ErrUnresolved) && errors.Is(d, clientip.ErrMalformed) && errors.As(d, &ce)
	}), "errors.Is and errors.As on a Denial allocate")
}

// While the policy's handler runs, the client the handlers read is the one
// the policy judged: a middleware between them that rewrites the header
// changes nothing.
func TestPolicyHandlerHolds(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office})
	require.NoError(t, err)
	var got clientip.Result
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Forwarded-For", "203.0.113.9") // after the policy judged
		got, err = clientip.FromRequest(r)
	}))
	req := connRequest(testResolver(t), "10.0.0.1:5000", "198.51.100.7")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, 200, rec.Code)
	require.NoError(t, err)
	assert.Equal(t, addr("198.51.100.7"), got.Client)
	got, _ = clientip.FromRequest(req)
	assert.Equal(t, addr("203.0.113.9"), got.Client, "released when the handler returned")
}
