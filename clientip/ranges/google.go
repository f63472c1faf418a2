package ranges

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

type googleDoc struct {
	SyncToken    *string        `json:"syncToken"`
	CreationTime *string        `json:"creationTime"`
	Prefixes     *[]googleEntry `json:"prefixes"`
}

type googleEntry struct {
	IPv4Prefix *string `json:"ipv4Prefix"`
	IPv6Prefix *string `json:"ipv6Prefix"`
	Service    *string `json:"service"`
	Scope      *string `json:"scope"`
}

const googleFormat = "Google cloud.json"

// ParseGoogleCloud parses Google's cloud.json
// (https://www.gstatic.com/ipranges/cloud.json, described at
// https://cloud.google.com/compute/docs/faq#find_ip_range) and returns the
// prefixes of the entries whose scope (a region such as "europe-west1") is one
// of scopes; no scopes selects every entry.
//
// cloud.json lists the external addresses Google Cloud customers can be
// assigned. It is not a list of Google's proxies: trusting it trusts every
// Compute Engine VM, an attacker's included. The addresses Google's load
// balancers connect to backends from are [GoogleLoadBalancerRanges].
//
// The parser is strict: a document larger than [MaxGoogleCloudBytes],
// anything but one JSON object, a missing syncToken, creationTime or
// prefixes, a syncToken that is not a number, a creationTime that is not a
// timestamp, and an entry without a service or scope or with not exactly one
// of ipv4Prefix and ipv6Prefix is [ErrMalformed]. Every entry's prefix must
// be a canonical prefix of its field's family ([ErrInvalidPrefix]).
// Duplicates collapse. A selection without a prefix is [ErrEmpty].
func ParseGoogleCloud(b []byte, scopes ...string) (clientip.PrefixSet, error) {
	want, err := stringList("Google Cloud scope", scopes)
	if err != nil {
		return clientip.PrefixSet{}, err
	}
	var d googleDoc
	if err := decodeJSON(b, MaxGoogleCloudBytes, googleFormat, &d); err != nil {
		return clientip.PrefixSet{}, err
	}
	if err := require(googleFormat, at{}, field{"syncToken", d.SyncToken != nil}, field{"creationTime", d.CreationTime != nil},
		field{"prefixes", d.Prefixes != nil}); err != nil {
		return clientip.PrefixSet{}, err
	}
	if err := checkStamp(googleFormat, *d.SyncToken, "creationTime", *d.CreationTime, "2006-01-02T15:04:05.999999999"); err != nil {
		return clientip.PrefixSet{}, err
	}
	var ps []netip.Prefix
	for i, e := range *d.Prefixes {
		where := at{"prefixes", i}
		text, name, fam := e.IPv4Prefix, "ipv4Prefix", ipv4Only
		switch {
		case e.IPv4Prefix != nil && e.IPv6Prefix != nil:
			return clientip.PrefixSet{}, fmt.Errorf("%w: %s: %s has both ipv4Prefix and ipv6Prefix", ErrMalformed, googleFormat, where)
		case e.IPv6Prefix != nil:
			text, name, fam = e.IPv6Prefix, "ipv6Prefix", ipv6Only
		case e.IPv4Prefix == nil:
			return clientip.PrefixSet{}, missing(googleFormat, where.field("ipv4Prefix or ipv6Prefix"))
		}
		if err := require(googleFormat, where, field{"service", e.Service != nil}, field{"scope", e.Scope != nil}); err != nil {
			return clientip.PrefixSet{}, err
		}
		p, reason := parsePrefix(*text, fam, false)
		if reason != "" {
			return clientip.PrefixSet{}, invalidEntry(googleFormat+": "+where.field(name), *text, reason)
		}
		if want == nil || want[*e.Scope] {
			ps = append(ps, p)
		}
	}
	what := googleFormat + " has no prefixes"
	if want != nil {
		what = googleFormat + ": no entry has scope " + strings.Join(scopes, ",")
	}
	return finish(ps, what)
}
