package ranges

import (
	"net/netip"
	"strconv"

	"github.com/sourceip/sourceip/clientip"
)

type fastlyJSON struct {
	Addresses     *[]string `json:"addresses"`
	IPv6Addresses *[]string `json:"ipv6_addresses"`
}

const fastlyFormat = "Fastly public IP list"

// ParseFastly parses Fastly's public IP list
// (https://api.fastly.com/public-ip-list, documented at
// https://www.fastly.com/documentation/reference/api/utils/public-ip-list/):
// a JSON object whose "addresses" holds IPv4 prefixes and whose
// "ipv6_addresses" holds IPv6 prefixes.
//
// The parser is strict: a document larger than [MaxFastlyBytes], anything but
// one JSON object, and a missing or null addresses or ipv6_addresses is
// [ErrMalformed] (an empty body, which Fastly's endpoint has been seen to
// serve, is one); every entry must be a canonical prefix of its array's
// family ([ErrInvalidPrefix]). Duplicates collapse. A list without a prefix
// is [ErrEmpty].
func ParseFastly(b []byte) (clientip.PrefixSet, error) {
	var d fastlyJSON
	if err := decodeJSON(b, MaxFastlyBytes, fastlyFormat, &d); err != nil {
		return clientip.PrefixSet{}, err
	}
	if err := require(fastlyFormat, at{}, field{"addresses", d.Addresses != nil}, field{"ipv6_addresses", d.IPv6Addresses != nil}); err != nil {
		return clientip.PrefixSet{}, err
	}
	var ps []netip.Prefix
	for _, arr := range []struct {
		name    string
		entries []string
		fam     family
	}{
		{"addresses", *d.Addresses, ipv4Only},
		{"ipv6_addresses", *d.IPv6Addresses, ipv6Only},
	} {
		for i, s := range arr.entries {
			p, reason := parsePrefix(s, arr.fam, false)
			if reason != "" {
				return clientip.PrefixSet{}, invalidEntry(fastlyFormat+": "+arr.name+"["+strconv.Itoa(i)+"]", s, reason)
			}
			ps = append(ps, p)
		}
	}
	return finish(ps, fastlyFormat+" has no prefixes")
}
