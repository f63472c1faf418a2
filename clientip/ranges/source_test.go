package ranges

import (
	"encoding"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

var (
	_ encoding.TextMarshaler   = ProviderAWS
	_ encoding.TextUnmarshaler = (*Provider)(nil)
	_ encoding.TextMarshaler   = ProvenanceDisk
	_ encoding.TextUnmarshaler = (*Provenance)(nil)
)

func TestNewSource(t *testing.T) {
	tests := []struct {
		name    string
		cfg     SourceConfig
		wantID  string
		wantErr bool
	}{
		{"zero config fails closed", SourceConfig{}, "", true},
		{"Cloudflare defaults to both published lists", SourceConfig{Provider: ProviderCloudflare},
			"cloudflare from https://www.cloudflare.com/ips-v4 https://www.cloudflare.com/ips-v6", false},
		{"AWS with sorted, deduplicated filter", SourceConfig{Provider: ProviderAWS, Services: []string{"S3", "EC2", "S3"}, Regions: []string{"us-east-1"}},
			"aws services=EC2,S3 regions=us-east-1 from https://ip-ranges.amazonaws.com/ip-ranges.json", false},
		{"AWS without a service", SourceConfig{Provider: ProviderAWS}, "", true},
		{"Google Cloud scopes", SourceConfig{Provider: ProviderGoogleCloud, Regions: []string{"us-west8"}},
			"google-cloud scopes=us-west8 from https://www.gstatic.com/ipranges/cloud.json", false},
		{"Azure from a file", SourceConfig{Provider: ProviderAzure, Tag: "AzureFrontDoor.Backend", Locations: []string{"/srv/tags.json"}},
			"azure tag=AzureFrontDoor.Backend from /srv/tags.json", false},
		{"Azure without a location (its URL rotates weekly)", SourceConfig{Provider: ProviderAzure, Tag: "AzureFrontDoor.Backend"}, "", true},
		{"Azure without a tag", SourceConfig{Provider: ProviderAzure, Locations: []string{"/srv/tags.json"}}, "", true},
		{"CIDR list without a location", SourceConfig{Provider: ProviderCIDRList}, "", true},
		{"CIDR list from a mirror", SourceConfig{Provider: ProviderCIDRList, Locations: []string{"https://mirror.example/edge.txt"}},
			"cidr-list from https://mirror.example/edge.txt", false},
		{"plain http is refused", SourceConfig{Provider: ProviderCIDRList, Locations: []string{"http://mirror.example/edge.txt"}}, "", true},
		{"plain http when allowed", SourceConfig{Provider: ProviderCIDRList, Locations: []string{"http://mirror.example/edge.txt"}, AllowHTTP: true},
			"cidr-list from http://mirror.example/edge.txt", false},
		{"other schemes are refused", SourceConfig{Provider: ProviderCIDRList, Locations: []string{"ftp://mirror.example/edge.txt"}}, "", true},
		{"credentials in a URL would be logged", SourceConfig{Provider: ProviderCIDRList, Locations: []string{"https://u:p@mirror.example/x"}}, "", true},
		{"URL without host", SourceConfig{Provider: ProviderCIDRList, Locations: []string{"https:///x"}}, "", true},
		{"empty location", SourceConfig{Provider: ProviderCIDRList, Locations: []string{""}}, "", true},
		{"too many locations", SourceConfig{Provider: ProviderCIDRList, Locations: strings.Fields("a b c d e f g h i")}, "", true},
		{"Services on another provider", SourceConfig{Provider: ProviderFastly, Services: []string{"S3"}}, "", true},
		{"Regions on another provider", SourceConfig{Provider: ProviderCloudflare, Regions: []string{"x"}}, "", true},
		{"Tag on another provider", SourceConfig{Provider: ProviderCloudflare, Tag: "x"}, "", true},
		{"out-of-range provider", SourceConfig{Provider: Provider(99)}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSource(tc.cfg)
			if tc.wantErr {
				must.ErrorIs(t, err, ErrInvalidConfig)
				return
			}
			must.NoError(t, err)
			assert.Equal(t, tc.wantID, s.String())
		})
	}
}

func TestSourceLocationsAreCopied(t *testing.T) {
	s := Cloudflare()
	s.Locations()[0] = "https://attacker.example/"
	assert.Equal(t, cloudflareV4URL, s.Locations()[0], "Locations returned the source's own slice")
}

func TestProviderText(t *testing.T) {
	for p := ProviderCloudflare; p <= ProviderCIDRList; p++ {
		b, err := p.MarshalText()
		must.NoError(t, err)
		var q Provider
		assert.NoError(t, q.UnmarshalText(b), "%v: round trip", p)
		assert.Equal(t, p, q, "round trip")
		assert.Equal(t, p.String(), string(b), "MarshalText and String")
	}
	var q Provider
	for _, bad := range []string{"unknown", "Cloudflare", "", "aws "} {
		assert.ErrorIs(t, q.UnmarshalText([]byte(bad)), ErrUnknownProvider, "UnmarshalText(%q)", bad)
	}
	_, err := ProviderUnknown.MarshalText()
	assert.Error(t, err, "the zero Provider marshals")
	assert.Equal(t, "Provider(42)", Provider(42).String())
}

func TestProvenanceText(t *testing.T) {
	for p := ProvenanceNone; p <= ProvenanceNetwork; p++ {
		b, err := p.MarshalText()
		var q Provenance
		assert.NoError(t, err, "%v", p)
		assert.NoError(t, q.UnmarshalText(b), "%v: round trip", p)
		assert.Equal(t, p, q, "round trip")
		assert.Equal(t, p.String(), string(b), "MarshalText and String")
	}
	var q Provenance
	assert.Error(t, q.UnmarshalText([]byte("Disk")), "UnmarshalText accepted a name in the wrong case")
	_, err := Provenance(9).MarshalText()
	assert.Error(t, err, "out-of-range Provenance")
	assert.Equal(t, "Provenance(9)", Provenance(9).String())
}
