package middleware

import "github.com/sourceip/sourceip/internal/enumtext"

// TargetKind says what the targets of a [Policy]'s rules are and how a
// target is matched against them.
type TargetKind uint8

const (
	// TargetNone: the policy has no rules per target; its Default decides
	// every request, connection or call. A policy with Rules must choose
	// another kind.
	TargetNone TargetKind = iota

	// TargetPatterns: each Rule.Target is a net/http ServeMux pattern
	// ("/admin/", "GET /api/{id}", "example.com/static/"), and a request is
	// judged by the rule whose pattern a ServeMux holding exactly the rules'
	// patterns routes it to: the most specific pattern wins, as in the
	// application's own ServeMux, and order does not matter. A request that
	// ServeMux would redirect (to add a trailing slash or clean the path) or
	// answer with 405 matches no rule. A request whose path escapes '/' or
	// '.' ("/admin%2Fkey", "/x/%2e%2e/admin/") or is unclean is also judged
	// by the rule its decoded, cleaned path routes to, which a handler that
	// reads r.URL.Path (http.FileServer) serves; the first refusal decides.
	// Given to [Policy.Check], a target is a pattern as ServeMux reports it
	// (http.Request.Pattern) and matches the rule with that exact pattern.
	TargetPatterns

	// TargetNames: each Rule.Target is a name compared exactly ("/users/{id}",
	// as chi's RoutePattern reports a route; "/pkg.Service/Method", a gRPC
	// full method), or a prefix when it ends in "*" ("/admin/*",
	// "/pkg.Service/*"; "*" alone matches every name). A prefix ending in
	// "/" also matches the name without that slash: "/admin/*" matches
	// "/admin", which is what chi's RoutePattern reports for the "/" route
	// of r.Route("/admin", ...) and for a route registered as "/admin/".
	// The first rule in order that matches decides.
	TargetNames

	// TargetTopics: each Rule.Target is an MQTT topic filter
	// ("devices/+/telemetry", "$SYS/#"), and a target is a topic name (a
	// PUBLISH) or a topic filter (a SUBSCRIBE). A topic name is judged by
	// the first rule in order whose filter matches it. A filter with
	// wildcards receives every topic it matches, so it is judged by each
	// rule in order whose filter shares a topic with it, until one whose
	// filter covers it, and by the Default when none does: the first
	// refusal decides, and an admission names the covering rule or the
	// Default. A rule whose shared topics all fall to earlier rules judges
	// too, so a subscription may be refused where each of its topics would
	// be admitted. A target that is not a valid topic or filter is refused
	// whatever the rules say.
	TargetTopics
)

var targetKindNames = []string{
	TargetNone:     "none",
	TargetPatterns: "patterns",
	TargetNames:    "names",
	TargetTopics:   "topics",
}

// String returns the kind's name: "none", "patterns", "names" or "topics".
func (k TargetKind) String() string { return enumtext.String(targetKindNames, k, "TargetKind") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (k TargetKind) MarshalText() ([]byte, error) {
	return enumtext.Marshal(targetKindNames, k, "TargetKind", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (k *TargetKind) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(k, targetKindNames, text, "TargetKind", errUnknownName)
}
