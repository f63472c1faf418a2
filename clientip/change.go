package clientip

import (
	"log/slog"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
)

// PrefixDiff is how one prefix set differs from another: the prefixes only
// the new one holds and those only the old one held, each in canonical
// order. It compares prefixes, not address space: replacing 10.0.0.0/8 by
// 10.0.0.0/9 and 10.128.0.0/9 adds two prefixes and removes one.
type PrefixDiff struct {
	Added, Removed []netip.Prefix
}

// diffPrefixSets returns how next differs from old.
func diffPrefixSets(old, next PrefixSet) PrefixDiff {
	var d PrefixDiff
	a, b := old.list, next.list
	for len(a) > 0 && len(b) > 0 {
		switch c := comparePrefix(a[0], b[0]); {
		case c < 0:
			d.Removed, a = append(d.Removed, a[0]), a[1:]
		case c > 0:
			d.Added, b = append(d.Added, b[0]), b[1:]
		default:
			a, b = a[1:], b[1:]
		}
	}
	d.Removed = append(d.Removed, a...)
	d.Added = append(d.Added, b...)
	return d
}

// comparePrefix is the order of a PrefixSet's list.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Empty reports whether the sets were equal.
func (d PrefixDiff) Empty() bool { return len(d.Added) == 0 && len(d.Removed) == 0 }

// maxListed bounds the prefixes String and LogValue list per direction.
const maxListed = 16

// appendList appends the prefixes, at most maxListed of them, then "… (n more)".
func appendList(b []byte, ps []netip.Prefix) []byte {
	for i, p := range ps {
		if i == maxListed {
			b = append(b, " … ("...)
			b = strconv.AppendInt(b, int64(len(ps)-maxListed), 10)
			return append(b, " more)"...)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = p.AppendTo(b)
	}
	return b
}

// String returns "+a,b -c", leaving out an empty direction; the empty diff
// is "". At most 16 prefixes are listed per direction, followed by
// "… (n more)".
func (d PrefixDiff) String() string {
	var b []byte
	if len(d.Added) > 0 {
		b = appendList(append(b, '+'), d.Added)
	}
	if len(d.Removed) > 0 {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = appendList(append(b, '-'), d.Removed)
	}
	return string(b)
}

// Change is what one call of [Store.Swap], [Store.Update] or
// [Store.SetRanges] did to the configuration in force, or would have done
// had it not been refused. It is a value: the Store keeps no reference to it.
type Change struct {
	// Ranges names the range set a SetRanges call replaced; it is "" for
	// Swap and Update.
	Ranges string

	// Old is the configuration in force before the call and New the one
	// after it, both as [New] validated them (Header canonical, limits
	// filled in), with the named ranges in TrustedProxies. For a refused
	// change New is the configuration that was refused, with the defaults
	// New would have filled in.
	Old, New Config

	// TrustedProxies and Masquerade are how the sets of New differ from
	// those of Old.
	TrustedProxies, Masquerade PrefixDiff

	// Err is the error of New for a refused change, which left Old in
	// force; nil for a change that was installed.
	Err error
}

// withDefaults returns c with the defaults New fills in: the limits and the
// canonical form of the header.
func withDefaults(c Config) Config {
	if c.MaxHops == 0 {
		c.MaxHops = DefaultMaxHops
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	c.Header = textproto.CanonicalMIMEHeaderKey(c.Header)
	return c
}

func diff(old, next Config, ranges string) Change {
	return Change{
		Ranges:         ranges,
		Old:            old,
		New:            next,
		TrustedProxies: diffPrefixSets(old.TrustedProxies, next.TrustedProxies),
		Masquerade:     diffPrefixSets(old.Masquerade, next.Masquerade),
	}
}

// Empty reports whether New is the same configuration as Old.
func (c Change) Empty() bool {
	return c.TrustedProxies.Empty() && c.Masquerade.Empty() && c.scalarsEqual()
}

func (c Change) scalarsEqual() bool {
	o, n := c.Old, c.New
	return strings.EqualFold(o.Header, n.Header) && o.TrustedHops == n.TrustedHops &&
		o.TrustUnixSocket == n.TrustUnixSocket && o.MaxHops == n.MaxHops && o.MaxHeaderBytes == n.MaxHeaderBytes
}

// field is one line of a Change's rendering.
type field struct {
	key, val string
}

// fields lists what changed, in a fixed order, with the keys LogValue uses.
func (c Change) fields() []field {
	var fs []field
	if c.Ranges != "" {
		fs = append(fs, field{"ranges", c.Ranges})
	}
	o, n := c.Old, c.New
	if s := string(appendList(nil, c.TrustedProxies.Added)); s != "" {
		fs = append(fs, field{"trusted_proxies_added", s})
	}
	if s := string(appendList(nil, c.TrustedProxies.Removed)); s != "" {
		fs = append(fs, field{"trusted_proxies_removed", s})
	}
	if s := string(appendList(nil, c.Masquerade.Added)); s != "" {
		fs = append(fs, field{"masquerade_added", s})
	}
	if s := string(appendList(nil, c.Masquerade.Removed)); s != "" {
		fs = append(fs, field{"masquerade_removed", s})
	}
	if !strings.EqualFold(o.Header, n.Header) {
		fs = append(fs, field{"header", quoteHeader(o.Header) + " → " + quoteHeader(n.Header)})
	}
	fromTo := func(key string, a, b int) {
		if a != b {
			fs = append(fs, field{key, strconv.Itoa(a) + " → " + strconv.Itoa(b)})
		}
	}
	fromTo("trusted_hops", o.TrustedHops, n.TrustedHops)
	fromTo("max_hops", o.MaxHops, n.MaxHops)
	fromTo("max_header_bytes", o.MaxHeaderBytes, n.MaxHeaderBytes)
	if o.TrustUnixSocket != n.TrustUnixSocket {
		fs = append(fs, field{"trust_unix_socket", strconv.FormatBool(o.TrustUnixSocket) + " → " + strconv.FormatBool(n.TrustUnixSocket)})
	}
	return fs
}

// quoteHeader names a header for a diff; no header is "none".
func quoteHeader(h string) string {
	if h == "" {
		return "none"
	}
	return h
}

// String returns the change on one line, such as
// "ranges=cloudflare trusted_proxies_added=203.0.113.0/24 header=none → X-Forwarded-For",
// listing only what changed, "unchanged" when nothing did, and the error at
// the end of a refused change ("refused: …"). At most 16 prefixes are listed
// per set and direction.
func (c Change) String() string {
	var parts []string
	for _, f := range c.fields() {
		parts = append(parts, f.key+"="+f.val)
	}
	switch {
	case c.Err != nil:
		parts = append(parts, "refused: "+c.Err.Error())
	case c.Empty():
		parts = append(parts, "unchanged")
	}
	return strings.Join(parts, " ")
}

// LogValue implements [slog.LogValuer]: a group with an attribute per
// changed item, under the keys String uses (ranges, trusted_proxies_added,
// trusted_proxies_removed, masquerade_added, masquerade_removed, header,
// trusted_hops, max_hops, max_header_bytes, trust_unix_socket), each a
// string; a scalar's is "old → new". The error of a refused change is not in
// the group; the Store logs it beside it.
func (c Change) LogValue() slog.Value {
	fs := c.fields()
	attrs := make([]slog.Attr, len(fs))
	for i, f := range fs {
		attrs[i] = slog.String(f.key, f.val)
	}
	return slog.GroupValue(attrs...)
}
