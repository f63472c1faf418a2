package ratelimit

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// The RateLimit header fields of the IETF HTTPAPI working group's draft
// "RateLimit header fields for HTTP", draft-ietf-httpapi-ratelimit-headers-12
// (Structured Field lists, RFC 9651):
//
//	RateLimit-Policy: "default";q=20;w=10   the policy: q units per w seconds
//	RateLimit: "default";a=5;w=1            now: a units available within w seconds
//
// Earlier drafts (-08 to -11) named the RateLimit field's parameters r and
// t; draft -12 renamed them a (available quota) and w (effective window).
// Everything that writes them is in this file.

// Canonical forms of the field names, as net/http keys them.
const (
	fieldRateLimit  = "Ratelimit"
	fieldPolicy     = "Ratelimit-Policy"
	fieldRetryAfter = "Retry-After"
)

// SetHeaders sets the RateLimit-Policy and RateLimit fields on h for a
// decision d under limit l, for the policy called name, and, when d
// refused the event, Retry-After (whole seconds, rounded up). The policy
// announces l as Burst units per [Limit.Window]; the RateLimit field
// reports d.Remaining units available within [Decision.Window], rounded up
// to whole seconds (at least 1), so Retry-After never ends before the
// effective window, as the draft asks. name must satisfy [ValidPolicyName].
// SetHeaders suits handlers that decide for themselves; the [HTTP]
// middleware sets the same fields without allocating on most requests.
func SetHeaders(h http.Header, name string, l Limit, d Decision) {
	h[fieldPolicy] = []string{policyValue(name, l)}
	h[fieldRateLimit] = []string{limitValue(name, d)}
	if !d.Allowed {
		h[fieldRetryAfter] = []string{strconv.FormatInt(wholeSeconds(d.RetryAfter), 10)}
	}
}

// ValidPolicyName returns nil when name can be written as a policy name in
// the RateLimit fields: 1 to 64 characters of letters, digits and "-._:/".
// (The draft allows any Structured Field string; this subset needs no
// escaping.)
func ValidPolicyName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: policy name %q must have 1 to 64 characters", ErrInvalidConfig, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == ':' || c == '/') {
			return fmt.Errorf("%w: policy name %q: only letters, digits and -._:/ are allowed", ErrInvalidConfig, name)
		}
	}
	return nil
}

// policyValue renders the RateLimit-Policy item for l.
func policyValue(name string, l Limit) string {
	b := make([]byte, 0, len(name)+32)
	b = strconv.AppendQuote(b, name)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, int64(l.Burst), 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, wholeSeconds(l.Window()), 10)
	return string(b)
}

// limitValue renders the RateLimit item for d.
func limitValue(name string, d Decision) string {
	return limitItem(name, d.Remaining, wholeSeconds(d.Window()))
}

func limitItem(name string, available int, window int64) string {
	b := make([]byte, 0, len(name)+32)
	b = strconv.AppendQuote(b, name)
	b = append(b, ";a="...)
	b = strconv.AppendInt(b, int64(max(available, 0)), 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, window, 10)
	return string(b)
}

// wholeSeconds rounds d up to whole seconds, at least 1: the fields have
// no sub-second precision, and a client told 0 would not wait at all.
func wholeSeconds(d time.Duration) int64 {
	if d <= time.Second {
		return 1
	}
	return int64(math.Ceil(d.Seconds()))
}

// fieldCache holds the RateLimit values of allowed decisions, which is most
// responses: Remaining is 0 to Burst and the window, for an allowed event,
// at most the time one token takes, so a small table covers them and the
// middleware sets them without allocating. Each value is a one-element
// slice with no spare capacity, so a handler that adds to the field makes
// a copy instead of writing into the shared array.
type fieldCache struct {
	policy []string
	limit  [][]string // [window-1][available]
	burst  int
}

// maxCached bounds the table: (Burst+1) × window values.
const maxCached = 4096

func newFieldCache(name string, l Limit) fieldCache {
	c := fieldCache{policy: one(policyValue(name, l)), burst: l.Burst}
	windows := int(wholeSeconds(seconds(1 / l.Rate)))
	// Each factor is bounded before the product, which could overflow.
	if l.Unlimited() || l.Burst >= maxCached || windows > maxCached || (l.Burst+1)*windows > maxCached {
		return c
	}
	c.limit = make([][]string, windows)
	for w := range c.limit {
		c.limit[w] = make([]string, l.Burst+1)
		for a := range c.limit[w] {
			c.limit[w][a] = limitItem(name, a, int64(w+1))
		}
	}
	return c
}

func one(s string) []string { return []string{s}[:1:1] }

// set sets the fields for d on h; it allocates only for values outside the
// table (refusals, and fallback decisions of a different shape).
func (c *fieldCache) set(h http.Header, name string, d Decision) {
	h[fieldPolicy] = c.policy
	w := wholeSeconds(d.Window())
	if a := d.Remaining; a >= 0 && a <= c.burst && w <= int64(len(c.limit)) {
		h[fieldRateLimit] = c.limit[w-1][a : a+1 : a+1]
	} else {
		h[fieldRateLimit] = one(limitItem(name, a, w))
	}
	if !d.Allowed {
		h[fieldRetryAfter] = []string{strconv.FormatInt(wholeSeconds(d.RetryAfter), 10)}
	}
}
