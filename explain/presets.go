package explain

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// preset is a platform whose edge the Advisor recognises by its published
// ranges: the ranges snapshot that lists the edge's addresses and the
// header the edge writes with the client.
type preset struct {
	name     string // the preset's name in Advice.Preset
	title    string // for people
	snapshot string // ranges.Snapshot name
	header   string // canonical name of the header the edge sets or appends
}

// presetDefs lists the platforms in classification order. CloudFront also
// sets CloudFront-Viewer-Address, but writes an IPv6 viewer as
// "2001:db8::1:443", address and port without brackets, which no parser
// can split (2001:db8::1:443 is itself an address); it appends the viewer
// to X-Forwarded-For as every other edge does, so that is the header
// proposed for it.
func presetDefs() []preset {
	return []preset{
		{"cloudflare", "Cloudflare", "cloudflare", "Cf-Connecting-Ip"},
		{"cloudfront", "Amazon CloudFront (origin-facing)", "aws-cloudfront-origin-facing", "X-Forwarded-For"},
		{"fastly", "Fastly", "fastly", "Fastly-Client-Ip"},
		{"azure-front-door", "Azure Front Door", "azure-frontdoor-backend", "X-Azure-Clientip"},
		{"google-load-balancers", "Google Cloud load balancers", "google-load-balancers", "X-Forwarded-For"},
	}
}

// presetSet is a preset with its snapshot's prefixes and date.
type presetSet struct {
	preset
	set  clientip.PrefixSet
	date time.Time
}

// expr returns Go that builds the preset's trusted set: today its ranges
// snapshot; the one line to change when the platform presets land.
func (p presetSet) expr() goExpr {
	return goExpr{
		expr:    fmt.Sprintf("snapshotSet(%q)", p.snapshot),
		comment: fmt.Sprintf("snapshotSet(%q) is ranges.SnapshotNamed(%[1]q).Set, the published ranges of %s as of %s (preset %q).", p.snapshot, p.title, p.date.Format(time.DateOnly), p.name),
	}
}

// loadPresets returns every preset whose snapshot the ranges package ships.
func loadPresets() []presetSet {
	var out []presetSet
	for _, p := range presetDefs() {
		if s, ok := ranges.SnapshotNamed(p.snapshot); ok {
			out = append(out, presetSet{preset: p, set: s.Set, date: s.Date})
		}
	}
	return out
}

// Address classes of a header entry: one per preset (its index), then
// these.
const (
	classInternal   = 5 // loopback, private, link-local, CGNAT, unique local
	classPublic     = 6
	classUnreadable = 7 // the entry holds no address
	classCount      = 8
)

// internalSpace is what classInternal covers.
func internalSpace() clientip.PrefixSet {
	return clientip.Loopback().Union(clientip.Private()).Union(clientip.LinkLocal()).Union(clientip.CGNAT())
}

// classify returns the class of a header entry's address.
func (a *Advisor) classify(e netip.Addr) int {
	switch {
	case !e.IsValid():
		return classUnreadable
	case a.internal.Contains(e):
		return classInternal
	}
	if i := a.presetOf(e); i >= 0 {
		return i
	}
	return classPublic
}

// presetOf returns the index of the preset whose ranges contain e, or -1.
func (a *Advisor) presetOf(e netip.Addr) int {
	for i, p := range a.presets {
		if p.set.Contains(e) {
			return i
		}
	}
	return -1
}

// className names class c.
func (a *Advisor) className(c int) string {
	switch {
	case c < len(a.presets):
		return a.presets[c].name
	case c == classInternal:
		return "internal"
	case c == classPublic:
		return "public"
	}
	return "unreadable"
}
