package ranges

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/sourceip/sourceip/clientip"
)

// AzureTagFrontDoorBackend is the service tag of the addresses Azure Front
// Door connects to origins from. Microsoft's guide to locking an origin down
// to Front Door (https://learn.microsoft.com/en-us/azure/frontdoor/origin-security)
// pairs it with a check of the X-Azure-FDID header, because every Front Door
// profile — an attacker's too — connects from these addresses.
const AzureTagFrontDoorBackend = "AzureFrontDoor.Backend"

type azureDoc struct {
	ChangeNumber *int64        `json:"changeNumber"`
	Cloud        *string       `json:"cloud"`
	Values       *[]azureValue `json:"values"`
}

type azureValue struct {
	Name       *string `json:"name"`
	ID         *string `json:"id"`
	Properties *struct {
		AddressPrefixes *[]string `json:"addressPrefixes"`
	} `json:"properties"`
}

const azureFormat = "Azure service tags"

// ParseAzureServiceTags parses an Azure service-tags file — the weekly
// ServiceTags_Public_YYYYMMDD.json linked from
// https://www.microsoft.com/en-us/download/details.aspx?id=56519, described at
// https://learn.microsoft.com/en-us/azure/virtual-network/service-tags-overview
// — and returns the address prefixes of the value named tag, such as
// [AzureTagFrontDoorBackend].
//
// The parser is strict: a document larger than [MaxAzureBytes], anything but
// one JSON object, a missing changeNumber, cloud or values, a value without
// name, id, properties or properties.addressPrefixes, and two values with the
// same name are [ErrMalformed]. Every prefix of every value must be a
// canonical CIDR prefix ([ErrInvalidPrefix]), so a corrupt file is refused as
// a whole. A leading UTF-8 byte order mark is tolerated. A tag that is not in
// the file is [ErrTagNotFound]; a tag with no prefixes is [ErrEmpty]; an
// empty tag is [ErrInvalidConfig].
func ParseAzureServiceTags(b []byte, tag string) (clientip.PrefixSet, error) {
	if tag == "" {
		return clientip.PrefixSet{}, fmt.Errorf("%w: an Azure service tag name is required", ErrInvalidConfig)
	}
	var d azureDoc
	if err := decodeJSON(b, MaxAzureBytes, azureFormat, &d); err != nil {
		return clientip.PrefixSet{}, err
	}
	if err := require(azureFormat, at{}, field{"changeNumber", d.ChangeNumber != nil}, field{"cloud", d.Cloud != nil},
		field{"values", d.Values != nil}); err != nil {
		return clientip.PrefixSet{}, err
	}
	var (
		ps    []netip.Prefix
		found bool
		names = make(map[string]bool, len(*d.Values))
	)
	for i, v := range *d.Values {
		where := at{"values", i}
		if err := require(azureFormat, where, field{"name", v.Name != nil}, field{"id", v.ID != nil},
			field{"properties", v.Properties != nil}); err != nil {
			return clientip.PrefixSet{}, err
		}
		if err := require(azureFormat, where, field{"properties.addressPrefixes", v.Properties.AddressPrefixes != nil}); err != nil {
			return clientip.PrefixSet{}, err
		}
		if names[*v.Name] {
			return clientip.PrefixSet{}, fmt.Errorf("%w: %s: %s: tag %q appears twice", ErrMalformed, azureFormat, where, truncate(*v.Name))
		}
		names[*v.Name] = true
		match := *v.Name == tag
		found = found || match
		for j, s := range *v.Properties.AddressPrefixes {
			p, reason := parsePrefix(s, anyFamily, false)
			if reason != "" {
				return clientip.PrefixSet{}, invalidEntry(azureFormat+": "+where.field("properties.addressPrefixes["+strconv.Itoa(j)+"]"), s, reason)
			}
			if match {
				ps = append(ps, p)
			}
		}
	}
	if !found {
		return clientip.PrefixSet{}, fmt.Errorf("%w: %q", ErrTagNotFound, truncate(tag))
	}
	return finish(ps, azureFormat+": tag "+strconv.Quote(tag)+" has no prefixes")
}
