package explain

import (
	"fmt"
	"net/netip"
	"net/textproto"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/presets"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// preset is a platform whose edge the Advisor recognises by its published
// ranges: a clientip/presets platform, the ranges snapshot that lists the
// edge's addresses and the header the edge reports the client in when it
// connects to the service itself.
type preset struct {
	platform presets.Platform
	name     string // the preset's name in Advice.Preset: platform.String()
	title    string // for people
	snapshot string // ranges.Snapshot name
	header   string // canonical name of the header the edge sets or appends
}

// presetDefs lists the platforms in classification order. The header is
// the one the platform's preset reads (presets.Platform.Header): for
// CloudFront and Azure Front Door that is X-Forwarded-For, which the edge
// appends from the connection, not CloudFront-Viewer-Address (added only
// when an origin request policy asks for it, and written for IPv6 as
// "2001:db8::1:443", address and port without brackets) or X-Azure-ClientIP
// (which Front Door takes from a client's X-Forwarded-For).
func presetDefs() []preset {
	def := func(p presets.Platform, title, snapshot string) preset {
		return preset{platform: p, name: p.String(), title: title, snapshot: snapshot, header: textproto.CanonicalMIMEHeaderKey(p.Header())}
	}
	return []preset{
		def(presets.Cloudflare, "Cloudflare", "cloudflare"),
		def(presets.CloudFront, "Amazon CloudFront (origin-facing)", "aws-cloudfront-origin-facing"),
		def(presets.Fastly, "Fastly", "fastly"),
		def(presets.AzureFrontDoor, "Azure Front Door", "azure-frontdoor-backend"),
		def(presets.GoogleLoadBalancer, "Google Cloud load balancers", "google-load-balancers"),
	}
}

// presetSet is a preset with its snapshot's prefixes and date.
type presetSet struct {
	preset
	set  clientip.PrefixSet
	date time.Time
}

// expr returns Go that builds the preset's trusted set, presets.X.Ranges()
// (the platform's snapshot), with a comment naming the preset constructor
// that builds the whole configuration: the topology (direct when the edge
// is the peer, behind an ingress otherwise), the refresher that keeps the
// ranges current, and the edge-identity check.
func (p presetSet) expr(direct bool) goExpr {
	constant := p.platform.GoString()
	topology := "presets.Direct()"
	if !direct {
		topology = "presets.BehindIngress(ingress)"
	}
	extra := ""
	switch p.platform {
	case presets.AzureFrontDoor:
		extra = ", FrontDoorIDs: []string{id}"
	case presets.GoogleLoadBalancer:
		extra = ", ForwardingRules: rules"
	}
	return goExpr{
		expr: constant + ".Ranges()",
		comment: fmt.Sprintf("%[1]s.Ranges() is the published ranges of %[2]s as of %[3]s; presets.New(presets.Config{Platform: %[1]s, Topology: %[4]s%[5]s}) builds this configuration with a refresher for them and an edge-identity check (preset %[6]q).",
			constant, p.title, p.date.Format(time.DateOnly), topology, extra, p.name),
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
