package ranges

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sourceip/sourceip/clientip"
)

// Size limits of the formats. A document larger than its limit is refused
// with [ErrTooLarge] before it is parsed. Each is about ten times the size of
// the provider's list when the package's snapshots were taken.
const (
	// MaxCIDRListBytes bounds a plain CIDR list (Cloudflare's are 230 and
	// 104 bytes).
	MaxCIDRListBytes = 1 << 20
	// MaxFastlyBytes bounds Fastly's public IP list (402 bytes).
	MaxFastlyBytes = 1 << 20
	// MaxGoogleCloudBytes bounds Google's cloud.json (80 KB).
	MaxGoogleCloudBytes = 8 << 20
	// MaxAWSBytes bounds AWS's ip-ranges.json (2.6 MB).
	MaxAWSBytes = 32 << 20
	// MaxAzureBytes bounds an Azure service-tags file (4.1 MB).
	MaxAzureBytes = 64 << 20
	// MaxPrefixes bounds the prefixes one document selects (after its
	// filter), in every format and in a refresher's disk copy: about eight
	// times the whole of AWS's ip-ranges.json (16,828 prefixes) and ten
	// times Azure's largest tag (AzureCloud, 12,362). A document within its
	// byte limit can list far more, and a set of scattered /128s costs
	// about a kilobyte a prefix to build and to look up in; a larger
	// selection is refused with [ErrTooLarge] before the set is built.
	MaxPrefixes = 1 << 17
)

// family is the address family an entry must have.
type family uint8

const (
	anyFamily family = iota
	ipv4Only
	ipv6Only
)

// parsePrefix parses one entry of a document. It returns a reason when the
// entry is not a canonical prefix of the wanted family. bare allows a plain
// address, which stands for one host. It does not allocate on success.
func parsePrefix(s string, fam family, bare bool) (netip.Prefix, string) {
	if strings.IndexByte(s, '%') >= 0 {
		return netip.Prefix{}, "a zone is not allowed"
	}
	var p netip.Prefix
	if strings.IndexByte(s, '/') < 0 {
		if !bare {
			return netip.Prefix{}, "not a CIDR prefix"
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, "not an address or a CIDR prefix"
		}
		p = netip.PrefixFrom(a, a.BitLen())
	} else {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, "not a CIDR prefix"
		}
	}
	switch a := p.Addr(); {
	case fam == ipv4Only && !a.Is4():
		return netip.Prefix{}, "not an IPv4 prefix"
	case fam == ipv6Only && (!a.Is6() || a.Is4In6()):
		return netip.Prefix{}, "not an IPv6 prefix"
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, "host bits are set (did you mean " + m.String() + "?)"
	}
	return p, ""
}

// truncate shortens attacker-supplied text quoted in an error.
func truncate(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

func invalidEntry(where, entry, reason string) error {
	return fmt.Errorf("%w: %s: %q: %s", ErrInvalidPrefix, where, truncate(entry), reason)
}

func checkSize(b []byte, limit int, format string) error {
	if len(b) > limit {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, format, len(b), limit)
	}
	return nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// decodeJSON checks b's size and decodes it, whole, as one JSON document
// into v. A leading UTF-8 byte order mark, which some Windows tools write, is
// tolerated.
func decodeJSON(b []byte, limit int, format string, v any) error {
	if err := checkSize(b, limit, format); err != nil {
		return err
	}
	b = bytes.TrimPrefix(b, utf8BOM)
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, format, err)
	}
	return nil
}

func missing(format, field string) error {
	return fmt.Errorf("%w: %s: %s is missing", ErrMalformed, format, field)
}

// at names an element of a document's array, such as prefixes[12]; the
// zero at names the document's top level. Its text is built only for an
// error, so validating an entry does not allocate.
type at struct {
	array string
	index int
}

func (a at) field(name string) string {
	if a.array == "" {
		return name
	}
	return a.array + "[" + strconv.Itoa(a.index) + "]." + name
}

func (a at) String() string { return a.array + "[" + strconv.Itoa(a.index) + "]" }

// field is a required field of a document and whether it was present (and
// not null).
type field struct {
	name    string
	present bool
}

// require reports the first required field of where that is missing.
func require(format string, where at, fields ...field) error {
	for _, f := range fields {
		if !f.present {
			return missing(format, where.field(f.name))
		}
	}
	return nil
}

// checkStamp validates the publication stamp AWS and Google put at the top
// of their documents: a decimal syncToken and a time in layout.
func checkStamp(format, syncToken, timeField, timeValue, layout string) error {
	if _, err := strconv.ParseUint(syncToken, 10, 63); err != nil {
		return fmt.Errorf("%w: %s: syncToken %q is not a decimal time stamp", ErrMalformed, format, truncate(syncToken))
	}
	if _, err := time.Parse(layout, timeValue); err != nil {
		return fmt.Errorf("%w: %s: %s %q is not in the form %s", ErrMalformed, format, timeField, truncate(timeValue), layout)
	}
	return nil
}

// finish builds the set of a document's selected prefixes; an empty
// selection is ErrEmpty, one of more than MaxPrefixes ErrTooLarge.
func finish(ps []netip.Prefix, what string) (clientip.PrefixSet, error) {
	switch {
	case len(ps) == 0:
		return clientip.PrefixSet{}, fmt.Errorf("%w: %s", ErrEmpty, what)
	case len(ps) > MaxPrefixes:
		return clientip.PrefixSet{}, fmt.Errorf("%w: %d prefixes, the limit is %d", ErrTooLarge, len(ps), MaxPrefixes)
	}
	s, err := clientip.NewPrefixSet(ps...)
	if err != nil { // unreachable: every prefix was checked above
		return clientip.PrefixSet{}, fmt.Errorf("%w: %v", ErrInvalidPrefix, err)
	}
	return s, nil
}

// stringList validates an optional filter list and returns it as a set.
func stringList(field string, vals []string) (map[string]bool, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		if v == "" || strings.TrimSpace(v) != v {
			return nil, fmt.Errorf("%w: %s entry %q is empty or padded", ErrInvalidConfig, field, v)
		}
		m[v] = true
	}
	return m, nil
}
