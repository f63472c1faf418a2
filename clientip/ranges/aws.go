package ranges

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// AWSServiceCloudFrontOriginFacing is the ip-ranges.json service of the
// addresses CloudFront uses to connect to origins. It is a subset of
// "CLOUDFRONT", whose other addresses are the edge servers viewers connect to;
// an origin behind CloudFront sees only these.
const AWSServiceCloudFrontOriginFacing = "CLOUDFRONT_ORIGIN_FACING"

// AWSFilter selects entries of AWS's ip-ranges.json. Names are compared
// exactly, as AWS spells them ("CLOUDFRONT_ORIGIN_FACING", "GLOBAL",
// "us-east-1").
type AWSFilter struct {
	// Services lists the service names to select. It must not be empty: all
	// of ip-ranges.json includes the EC2 addresses any AWS customer can rent,
	// so "every service" would trust an attacker's instance as a proxy.
	Services []string

	// Regions lists the regions to select, "GLOBAL" included. The zero value
	// selects every region.
	Regions []string
}

// String returns the filter in the form "services=A,B regions=x,y".
func (f AWSFilter) String() string {
	s := "services=" + strings.Join(f.Services, ",")
	if len(f.Regions) > 0 {
		s += " regions=" + strings.Join(f.Regions, ",")
	}
	return s
}

// compile validates the filter and returns its names as sets.
func (f AWSFilter) compile() (services, regions map[string]bool, err error) {
	if services, err = stringList("AWS service", f.Services); err != nil {
		return nil, nil, err
	}
	if services == nil {
		return nil, nil, fmt.Errorf("%w: an AWS filter needs at least one service (all of AWS includes addresses any customer can rent)", ErrInvalidConfig)
	}
	if regions, err = stringList("AWS region", f.Regions); err != nil {
		return nil, nil, err
	}
	return services, regions, nil
}

type awsDoc struct {
	SyncToken    *string     `json:"syncToken"`
	CreateDate   *string     `json:"createDate"`
	Prefixes     *[]awsEntry `json:"prefixes"`
	IPv6Prefixes *[]awsEntry `json:"ipv6_prefixes"`
}

type awsEntry struct {
	IPPrefix   *string `json:"ip_prefix"`
	IPv6Prefix *string `json:"ipv6_prefix"`
	Region     *string `json:"region"`
	Service    *string `json:"service"`
}

const awsFormat = "AWS ip-ranges.json"

// ParseAWS parses AWS's ip-ranges.json
// (https://ip-ranges.amazonaws.com/ip-ranges.json, syntax documented at
// https://docs.aws.amazon.com/vpc/latest/userguide/aws-ip-syntax.html) and
// returns the prefixes of the entries f selects.
//
// The parser is strict: a document larger than [MaxAWSBytes], anything but
// one JSON object, a missing syncToken, createDate, prefixes or
// ipv6_prefixes, a syncToken that is not a Unix time, a createDate not in
// AWS's YYYY-MM-DD-hh-mm-ss form, and an entry without its prefix, region or
// service is [ErrMalformed]. Every entry's prefix — selected or not — must be
// a canonical prefix of its array's family ([ErrInvalidPrefix]), so a
// corrupt document is refused as a whole. Fields AWS may add later are
// ignored. Duplicates collapse. A filter that selects nothing is [ErrEmpty];
// a filter without services is [ErrInvalidConfig].
func ParseAWS(b []byte, f AWSFilter) (clientip.PrefixSet, error) {
	services, regions, err := f.compile()
	if err != nil {
		return clientip.PrefixSet{}, err
	}
	var d awsDoc
	if err := decodeJSON(b, MaxAWSBytes, awsFormat, &d); err != nil {
		return clientip.PrefixSet{}, err
	}
	if err := require(awsFormat, at{}, field{"syncToken", d.SyncToken != nil}, field{"createDate", d.CreateDate != nil},
		field{"prefixes", d.Prefixes != nil}, field{"ipv6_prefixes", d.IPv6Prefixes != nil}); err != nil {
		return clientip.PrefixSet{}, err
	}
	if err := checkStamp(awsFormat, *d.SyncToken, "createDate", *d.CreateDate, "2006-01-02-15-04-05"); err != nil {
		return clientip.PrefixSet{}, err
	}
	var ps []netip.Prefix
	for _, arr := range []struct {
		name, field string
		entries     []awsEntry
		fam         family
	}{
		{"prefixes", "ip_prefix", *d.Prefixes, ipv4Only},
		{"ipv6_prefixes", "ipv6_prefix", *d.IPv6Prefixes, ipv6Only},
	} {
		for i, e := range arr.entries {
			where := at{arr.name, i}
			text, other := e.IPPrefix, e.IPv6Prefix
			if arr.fam == ipv6Only {
				text, other = other, text
			}
			if other != nil {
				return clientip.PrefixSet{}, fmt.Errorf("%w: %s: %s has both ip_prefix and ipv6_prefix", ErrMalformed, awsFormat, where)
			}
			if err := require(awsFormat, where, field{arr.field, text != nil}, field{"region", e.Region != nil},
				field{"service", e.Service != nil}); err != nil {
				return clientip.PrefixSet{}, err
			}
			p, reason := parsePrefix(*text, arr.fam, false)
			if reason != "" {
				return clientip.PrefixSet{}, invalidEntry(awsFormat+": "+where.field(arr.field), *text, reason)
			}
			if services[*e.Service] && (regions == nil || regions[*e.Region]) {
				ps = append(ps, p)
			}
		}
	}
	return finish(ps, awsFormat+": no entry matches "+f.String())
}
