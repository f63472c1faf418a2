package ranges

import (
	"fmt"

	"github.com/sourceip/sourceip/internal/enumtext"
)

// Provider names the publisher of a range list and, with it, the list's
// format.
//
// The zero value is [ProviderUnknown], which no [Source] accepts.
type Provider uint8

const (
	// ProviderUnknown is the zero Provider.
	ProviderUnknown Provider = iota
	// ProviderCloudflare: https://www.cloudflare.com/ips-v4 and /ips-v6,
	// plain text, one CIDR prefix a line. Read by [ParseCIDRList].
	ProviderCloudflare
	// ProviderAWS: https://ip-ranges.amazonaws.com/ip-ranges.json, filtered
	// by service and region. Read by [ParseAWS].
	ProviderAWS
	// ProviderGoogleCloud: https://www.gstatic.com/ipranges/cloud.json,
	// optionally filtered by scope. Read by [ParseGoogleCloud].
	ProviderGoogleCloud
	// ProviderAzure: an Azure service-tags JSON file (ServiceTags_Public_*.json)
	// and one tag of it. Read by [ParseAzureServiceTags].
	ProviderAzure
	// ProviderFastly: https://api.fastly.com/public-ip-list. Read by
	// [ParseFastly].
	ProviderFastly
	// ProviderCIDRList: any file or URL holding a plain CIDR list. Read by
	// [ParseCIDRList].
	ProviderCIDRList
)

var providerNames = [...]string{
	ProviderUnknown:     "unknown",
	ProviderCloudflare:  "cloudflare",
	ProviderAWS:         "aws",
	ProviderGoogleCloud: "google-cloud",
	ProviderAzure:       "azure",
	ProviderFastly:      "fastly",
	ProviderCIDRList:    "cidr-list",
}

// String returns the Provider's name: "unknown", "cloudflare", "aws",
// "google-cloud", "azure", "fastly" or "cidr-list".
func (p Provider) String() string { return enumtext.String(providerNames[:], p, "Provider") }

// MarshalText implements [encoding.TextMarshaler] with the names String
// returns. ProviderUnknown and values outside the list are an error.
func (p Provider) MarshalText() ([]byte, error) {
	if p == ProviderUnknown {
		return nil, fmt.Errorf("%w: %s", ErrUnknownProvider, p)
	}
	return enumtext.Marshal(providerNames[:], p, "Provider", ErrUnknownProvider)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String
// returns, except "unknown".
func (p *Provider) UnmarshalText(text []byte) error {
	v, err := enumtext.Parse[Provider](providerNames[:], text, "Provider", ErrUnknownProvider)
	if err == nil && v == ProviderUnknown {
		err = fmt.Errorf("%w: %q", ErrUnknownProvider, text)
	}
	if err != nil {
		return err
	}
	*p = v
	return nil
}
