package ranges

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	must.NoError(t, err)
	return b
}

// wantSet compares a parsed set with the prefixes listed in want (comma
// separated, canonical order).
func wantSet(t *testing.T, got clientip.PrefixSet, err error, want string) {
	t.Helper()
	must.NoError(t, err)
	assert.Equal(t, want, got.String(), "set")
}

func TestParseCIDRList(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // String() of the set
		wantErr error
	}{
		{"one prefix", "192.0.2.0/24", "192.0.2.0/24", nil},
		{"no final newline (as Cloudflare serves it)", "192.0.2.0/24\n198.51.100.0/24", "192.0.2.0/24,198.51.100.0/24", nil},
		{"CRLF line ends", "192.0.2.0/24\r\n2001:db8::/32\r\n", "192.0.2.0/24,2001:db8::/32", nil},
		{"comments and blank lines", "# edge\n\n192.0.2.0/24 # west\n\t\n  2001:db8::/32  \n#end", "192.0.2.0/24,2001:db8::/32", nil},
		{"bare address is one host", "192.0.2.7\n2001:db8::1", "192.0.2.7/32,2001:db8::1/128", nil},
		{"duplicates collapse", "192.0.2.0/24\n192.0.2.0/24\n", "192.0.2.0/24", nil},
		{"mapped IPv6 is stored as IPv4 (no alias)", "::ffff:192.0.2.0/120", "192.0.2.0/24", nil},
		{"byte order mark is tolerated", "\xef\xbb\xbf192.0.2.0/24", "192.0.2.0/24", nil},
		{"host bits set", "192.0.2.1/24", "", ErrInvalidPrefix},
		{"IPv6 host bits set", "2001:db8::1/32", "", ErrInvalidPrefix},
		{"zone", "fe80::1%eth0", "", ErrInvalidPrefix},
		{"zone in a prefix", "fe80::%eth0/64", "", ErrInvalidPrefix},
		{"leading zeros", "010.0.0.0/8", "", ErrInvalidPrefix},
		{"leading zeros in the length", "192.0.2.0/024", "", ErrInvalidPrefix},
		{"length out of range", "192.0.2.0/33", "", ErrInvalidPrefix},
		{"host name", "proxy.example", "", ErrInvalidPrefix},
		{"preset names are not entries here", "loopback", "", ErrInvalidPrefix},
		{"a later bad line refuses the whole list", "192.0.2.0/24\n198.51.100.0/24x\n", "", ErrInvalidPrefix},
		{"two entries on a line", "192.0.2.0/24 198.51.100.0/24", "", ErrMalformed},
		{"comma list on a line", "192.0.2.0/24,198.51.100.0/24", "", ErrInvalidPrefix},
		{"not UTF-8", "192.0.2.0/24\n\xff\n", "", ErrMalformed},
		{"HTML page", "\n<html><body>rate limited</body></html>", "", ErrMalformed},
		{"empty document", "", "", ErrEmpty},
		{"only comments", "# nothing yet\n\n", "", ErrEmpty},
		{"too large", strings.Repeat("#", MaxCIDRListBytes+1), "", ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCIDRList([]byte(tc.in))
			if tc.wantErr != nil {
				must.ErrorIs(t, err, tc.wantErr)
				return
			}
			wantSet(t, got, err, tc.want)
		})
	}
}

func TestParseCIDRListErrorNamesLineAndFix(t *testing.T) {
	_, err := ParseCIDRList([]byte("192.0.2.0/24\n# c\n198.51.100.9/24\n"))
	assert.ErrorContains(t, err, "line 3", "the error names the line")
	assert.ErrorContains(t, err, "did you mean 198.51.100.0/24", "the error names the fix")
	_, err = ParseCIDRList([]byte(strings.Repeat("x", 500)))
	must.Error(t, err)
	assert.LessOrEqual(t, len(err.Error()), 200, "error quotes too much attacker text")
}

// Cloudflare's lists, byte for byte as published (no final newline).
func TestParseCIDRListCloudflare(t *testing.T) {
	v4, err := ParseCIDRList(readFixture(t, "snapshots/cloudflare-ips-v4.txt"))
	wantSet(t, v4, err, "103.21.244.0/22,103.22.200.0/22,103.31.4.0/22,104.16.0.0/13,104.24.0.0/14,108.162.192.0/18,"+
		"131.0.72.0/22,141.101.64.0/18,162.158.0.0/15,172.64.0.0/13,173.245.48.0/20,188.114.96.0/20,190.93.240.0/20,"+
		"197.234.240.0/22,198.41.128.0/17")
	v6, err := ParseCIDRList(readFixture(t, "snapshots/cloudflare-ips-v6.txt"))
	wantSet(t, v6, err, "2400:cb00::/32,2405:8100::/32,2405:b500::/32,2606:4700::/32,2803:f800::/32,2a06:98c0::/29,2c0f:f248::/32")
}

// The mirror github.com/femueller/cloud-ip-ranges recorded, at commit
// d2ae43b7a3ef391a30789f7d2855b57868911377 (2024-10-29), Cloudflare's HTML
// "500 Internal Server Error" page in place of ips-v4. A naive parser that
// skips bad lines would have produced an empty list.
func TestParseCIDRListCloudflareErrorPageCapturedByMirror(t *testing.T) {
	_, err := ParseCIDRList(readFixture(t, "testdata/cloudflare-ips-v4-500.html"))
	must.ErrorIs(t, err, ErrMalformed)
}

func TestParseAWS(t *testing.T) {
	sample := readFixture(t, "testdata/aws-ip-ranges-sample.json")
	tests := []struct {
		name    string
		filter  AWSFilter
		want    string
		wantErr error
	}{
		{"CloudFront origin-facing only, not the viewer-facing CLOUDFRONT entries",
			AWSFilter{Services: []string{AWSServiceCloudFrontOriginFacing}},
			"52.82.134.0/23,54.239.134.0/23,130.176.86.0/23,130.176.88.0/21,2600:9000:1000::/36,2600:9000:5200::/40,2600:9000:6000::/36", nil},
		{"service and region",
			AWSFilter{Services: []string{"ROUTE53_HEALTHCHECKS"}, Regions: []string{"us-east-1"}},
			"54.243.31.192/26,107.23.255.0/26,2600:1f18:3fff:f800::/56,2600:1f18:7fff:f800::/56", nil},
		{"a prefix listed under two selected services collapses",
			AWSFilter{Services: []string{"AMAZON", "EC2"}, Regions: []string{"eu-west-1"}},
			"3.4.12.4/32,18.97.192.0/18,18.200.0.0/16,54.247.0.0/16,99.87.32.0/22,2600:1f01:4822::/56,2600:f0f0:1:1a00::/56,2600:f0f0:c138::/48,2a05:d06a:8000::/40", nil},
		{"names are exact: lower-case service selects nothing",
			AWSFilter{Services: []string{"cloudfront_origin_facing"}}, "", ErrEmpty},
		{"region without entries of the service",
			AWSFilter{Services: []string{"S3"}, Regions: []string{"us-east-1"}}, "", ErrEmpty},
		{"no service: all of AWS includes rentable EC2 addresses",
			AWSFilter{}, "", ErrInvalidConfig},
		{"empty service name", AWSFilter{Services: []string{""}}, "", ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAWS(sample, tc.filter)
			if tc.wantErr != nil {
				must.ErrorIs(t, err, tc.wantErr)
				return
			}
			wantSet(t, got, err, tc.want)
		})
	}
}

func TestParseAWSMalformed(t *testing.T) {
	f := AWSFilter{Services: []string{"S"}}
	const entry = `{"ip_prefix": "192.0.2.0/24", "region": "r", "service": "S", "network_border_group": "r"}`
	doc := func(prefixes, v6 string) string {
		return `{"syncToken": "1787411825", "createDate": "2026-08-22-15-17-05", "prefixes": [` + prefixes + `], "ipv6_prefixes": [` + v6 + `]}`
	}
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"valid minimal document", doc(entry, ""), nil},
		{"fields AWS may add are ignored", strings.Replace(doc(entry, ""), `"prefixes"`, `"newField": {"x": 1}, "prefixes"`, 1), nil},
		{"not JSON", "ip-ranges", ErrMalformed},
		{"HTML error page", "<html><body>503</body></html>", ErrMalformed},
		{"empty body", "", ErrMalformed},
		{"JSON array", "[]", ErrMalformed},
		{"trailing garbage", doc(entry, "") + "x", ErrMalformed},
		{"missing syncToken", `{"createDate": "2026-08-22-15-17-05", "prefixes": [], "ipv6_prefixes": []}`, ErrMalformed},
		{"missing createDate", `{"syncToken": "1", "prefixes": [], "ipv6_prefixes": []}`, ErrMalformed},
		{"missing ipv6_prefixes", `{"syncToken": "1", "createDate": "2026-08-22-15-17-05", "prefixes": []}`, ErrMalformed},
		{"null prefixes", `{"syncToken": "1", "createDate": "2026-08-22-15-17-05", "prefixes": null, "ipv6_prefixes": []}`, ErrMalformed},
		{"syncToken not a number", strings.Replace(doc(entry, ""), "1787411825", "soon", 1), ErrMalformed},
		{"createDate in another layout", strings.Replace(doc(entry, ""), "2026-08-22-15-17-05", "2026-08-22T15:17:05Z", 1), ErrMalformed},
		{"entry without prefix", doc(`{"region": "r", "service": "S"}`, ""), ErrMalformed},
		{"entry without service", doc(`{"ip_prefix": "192.0.2.0/24", "region": "r"}`, ""), ErrMalformed},
		{"entry without region", doc(`{"ip_prefix": "192.0.2.0/24", "service": "S"}`, ""), ErrMalformed},
		{"entry with both families", doc(`{"ip_prefix": "192.0.2.0/24", "ipv6_prefix": "2001:db8::/32", "region": "r", "service": "S"}`, ""), ErrMalformed},
		{"prefix as a number", doc(`{"ip_prefix": 3232235520, "region": "r", "service": "S"}`, ""), ErrMalformed},
		{"host bits set", doc(strings.Replace(entry, "192.0.2.0/24", "192.0.2.1/24", 1), ""), ErrInvalidPrefix},
		{"host bits set in an entry the filter does not select", doc(entry+`, {"ip_prefix": "198.51.100.1/24", "region": "r", "service": "OTHER"}`, ""), ErrInvalidPrefix},
		{"IPv6 in the IPv4 array", doc(strings.Replace(entry, "192.0.2.0/24", "2001:db8::/32", 1), ""), ErrInvalidPrefix},
		{"IPv4 in the IPv6 array", doc(entry, `{"ipv6_prefix": "192.0.2.0/24", "region": "r", "service": "S"}`), ErrInvalidPrefix},
		{"mapped IPv4 in the IPv6 array", doc(entry, `{"ipv6_prefix": "::ffff:192.0.2.0/120", "region": "r", "service": "S"}`), ErrInvalidPrefix},
		{"bare address", doc(strings.Replace(entry, "192.0.2.0/24", "192.0.2.1", 1), ""), ErrInvalidPrefix},
		{"padded prefix", doc(strings.Replace(entry, "192.0.2.0/24", " 192.0.2.0/24", 1), ""), ErrInvalidPrefix},
		{"no entries", doc("", ""), ErrEmpty},
		{"too large", doc(entry, "") + strings.Repeat(" ", MaxAWSBytes), ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAWS([]byte(tc.in), f)
			must.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestParseGoogleCloud(t *testing.T) {
	b := readFixture(t, "snapshots/google-cloud.json")
	all, err := ParseGoogleCloud(b)
	must.NoError(t, err)
	assert.GreaterOrEqual(t, all.Len(), 700, "whole cloud.json: prefixes")
	assert.True(t, all.Contains(netip.MustParseAddr("34.35.0.1")), "whole cloud.json: 34.35.0.1 in it")
	africa, err := ParseGoogleCloud(b, "africa-south1")
	must.NoError(t, err)
	assert.True(t, africa.Contains(netip.MustParseAddr("34.35.0.1")), "scope filter: %s", africa)
	assert.False(t, africa.Contains(netip.MustParseAddr("34.64.0.1")), "scope filter: %s", africa)
	assert.Less(t, africa.Len(), all.Len(), "scope filter: %s", africa)
	_, err = ParseGoogleCloud(b, "mars-north1")
	assert.ErrorIs(t, err, ErrEmpty, "unknown scope")
	_, err = ParseGoogleCloud(b, " africa-south1")
	assert.ErrorIs(t, err, ErrInvalidConfig, "padded scope")
}

func TestParseGoogleCloudMalformed(t *testing.T) {
	doc := func(entries string) string {
		return `{"syncToken": "1753409788780", "creationTime": "2025-07-24T19:16:28.780563", "prefixes": [` + entries + `]}`
	}
	const v4 = `{"ipv4Prefix": "192.0.2.0/24", "service": "Google Cloud", "scope": "s"}`
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"valid", doc(v4 + `, {"ipv6Prefix": "2001:db8::/32", "service": "Google Cloud", "scope": "s"}`), nil},
		{"not JSON", "cloud", ErrMalformed},
		{"missing prefixes", `{"syncToken": "1", "creationTime": "2025-07-24T19:16:28"}`, ErrMalformed},
		{"missing creationTime", `{"syncToken": "1", "prefixes": []}`, ErrMalformed},
		{"bad creationTime", strings.Replace(doc(v4), "2025-07-24T19:16:28.780563", "yesterday", 1), ErrMalformed},
		{"bad syncToken", strings.Replace(doc(v4), "1753409788780", "-1", 1), ErrMalformed},
		{"entry with both families", doc(`{"ipv4Prefix": "192.0.2.0/24", "ipv6Prefix": "2001:db8::/32", "service": "x", "scope": "s"}`), ErrMalformed},
		{"entry with neither", doc(`{"service": "x", "scope": "s"}`), ErrMalformed},
		{"entry without scope", doc(`{"ipv4Prefix": "192.0.2.0/24", "service": "x"}`), ErrMalformed},
		{"entry without service", doc(`{"ipv4Prefix": "192.0.2.0/24", "scope": "s"}`), ErrMalformed},
		{"IPv6 in ipv4Prefix", doc(`{"ipv4Prefix": "2001:db8::/32", "service": "x", "scope": "s"}`), ErrInvalidPrefix},
		{"host bits", doc(`{"ipv4Prefix": "192.0.2.9/24", "service": "x", "scope": "s"}`), ErrInvalidPrefix},
		{"no prefixes", doc(""), ErrEmpty},
		{"too large", doc(v4) + strings.Repeat(" ", MaxGoogleCloudBytes), ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGoogleCloud([]byte(tc.in))
			must.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestParseAzureServiceTags(t *testing.T) {
	sample := readFixture(t, "testdata/azure-service-tags-sample.json")
	got, err := ParseAzureServiceTags(sample, AzureTagFrontDoorBackend)
	wantSet(t, got, err, "4.213.28.114/31,4.213.81.64/29,4.232.98.120/29,13.73.248.16/29,2603:1000:4::600/123,2603:1000:104::e0/123")
	// The Frontend tag is where clients connect, not where Front Door
	// connects to origins from; it must not leak into the Backend set.
	front, err := ParseAzureServiceTags(sample, "AzureFrontDoor.Frontend")
	assert.NoError(t, err, "Frontend tag")
	assert.False(t, front.Contains(netip.MustParseAddr("13.73.248.16")), "Frontend tag: %s", front)
	assert.True(t, front.Contains(netip.MustParseAddr("13.73.248.8")), "Frontend tag: %s", front)
	_, err = ParseAzureServiceTags(sample, "azurefrontdoor.backend")
	assert.ErrorIs(t, err, ErrTagNotFound, "tag names are exact")
	_, err = ParseAzureServiceTags(sample, "")
	assert.ErrorIs(t, err, ErrInvalidConfig, "empty tag")
	bom := append([]byte("\xef\xbb\xbf"), sample...)
	_, err = ParseAzureServiceTags(bom, AzureTagFrontDoorBackend)
	assert.NoError(t, err, "a byte order mark, as Windows tools write, is refused")
}

func TestParseAzureServiceTagsMalformed(t *testing.T) {
	doc := func(values string) string {
		return `{"changeNumber": 363, "cloud": "Public", "values": [` + values + `]}`
	}
	val := func(name, prefixes string) string {
		return `{"name": "` + name + `", "id": "` + name + `", "properties": {"changeNumber": 1, "addressPrefixes": [` + prefixes + `]}}`
	}
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"valid", doc(val("T", `"192.0.2.0/24", "2001:db8::/32"`)), nil},
		{"not JSON", "tags", ErrMalformed},
		{"missing values", `{"changeNumber": 1, "cloud": "Public"}`, ErrMalformed},
		{"missing cloud", `{"changeNumber": 1, "values": []}`, ErrMalformed},
		{"missing changeNumber", `{"cloud": "Public", "values": []}`, ErrMalformed},
		{"changeNumber not a number", `{"changeNumber": "x", "cloud": "Public", "values": []}`, ErrMalformed},
		{"value without id", doc(`{"name": "T", "properties": {"addressPrefixes": []}}`), ErrMalformed},
		{"value without properties", doc(`{"name": "T", "id": "T"}`), ErrMalformed},
		{"value without addressPrefixes", doc(`{"name": "T", "id": "T", "properties": {}}`), ErrMalformed},
		{"tag listed twice", doc(val("T", `"192.0.2.0/24"`) + "," + val("T", `"198.51.100.0/24"`)), ErrMalformed},
		{"host bits in another tag", doc(val("T", `"192.0.2.0/24"`) + "," + val("U", `"198.51.100.1/24"`)), ErrInvalidPrefix},
		{"bare address", doc(val("T", `"192.0.2.1"`)), ErrInvalidPrefix},
		{"tag absent", doc(val("U", `"192.0.2.0/24"`)), ErrTagNotFound},
		{"tag without prefixes", doc(val("T", "")), ErrEmpty},
		{"too large", doc(val("T", `"192.0.2.0/24"`)) + strings.Repeat(" ", MaxAzureBytes), ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAzureServiceTags([]byte(tc.in), "T")
			must.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestParseFastly(t *testing.T) {
	got, err := ParseFastly(readFixture(t, "snapshots/fastly-public-ip-list.json"))
	wantSet(t, got, err, "23.235.32.0/20,43.249.72.0/22,103.244.50.0/24,103.245.222.0/23,103.245.224.0/24,104.156.80.0/20,"+
		"140.248.64.0/18,140.248.128.0/17,146.75.0.0/17,151.101.0.0/16,157.52.64.0/18,167.82.0.0/17,167.82.128.0/20,"+
		"167.82.160.0/20,167.82.224.0/20,172.111.64.0/18,185.31.16.0/22,199.27.72.0/21,199.232.0.0/16,2a04:4e40::/32,2a04:4e42::/32")
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		// The mirror github.com/femueller/cloud-ip-ranges recorded an empty
		// body from api.fastly.com at commit 88fe2c72c8bbbecc832e5175f80e18d4e6e46f5e
		// (2024-10-07).
		{"empty body captured by a mirror", "", ErrMalformed},
		{"missing ipv6_addresses", `{"addresses": ["192.0.2.0/24"]}`, ErrMalformed},
		{"null addresses", `{"addresses": null, "ipv6_addresses": []}`, ErrMalformed},
		{"addresses as a string", `{"addresses": "192.0.2.0/24", "ipv6_addresses": []}`, ErrMalformed},
		{"IPv6 in addresses", `{"addresses": ["2001:db8::/32"], "ipv6_addresses": []}`, ErrInvalidPrefix},
		{"IPv4 in ipv6_addresses", `{"addresses": [], "ipv6_addresses": ["192.0.2.0/24"]}`, ErrInvalidPrefix},
		{"host bits", `{"addresses": ["192.0.2.1/24"], "ipv6_addresses": []}`, ErrInvalidPrefix},
		{"both empty", `{"addresses": [], "ipv6_addresses": []}`, ErrEmpty},
		{"too large", `{"addresses": [], "ipv6_addresses": []}` + strings.Repeat(" ", MaxFastlyBytes), ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFastly([]byte(tc.in))
			must.ErrorIs(t, err, tc.wantErr)
		})
	}
}

// TestParseTooManyPrefixes: a document within its byte limit that lists
// more than MaxPrefixes prefixes is refused before its set is built. A
// hostile Azure file of 64 MiB holds 1.5 million scattered /128s, whose set
// took 1.7 GB of live heap (2.3 GB allocated, half a minute of CPU), and a
// refresher keeps a refused set as pending.
func TestParseTooManyPrefixes(t *testing.T) {
	scattered := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			// Spread over every byte of the address, as a hostile list would.
			out[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16), 7: byte(i)}).String() + "/128"
		}
		return out
	}
	quoted := func(ps []string) string { return `"` + strings.Join(ps, `","`) + `"` }
	azure := func(ps []string) []byte {
		return []byte(`{"changeNumber": 1, "cloud": "Public", "values": [{"name": "` + AzureTagFrontDoorBackend +
			`", "id": "x", "properties": {"addressPrefixes": [` + quoted(ps) + `]}}]}`)
	}
	aws := func(ps []string) []byte {
		entries := make([]string, len(ps))
		for i, p := range ps {
			entries[i] = `{"ipv6_prefix": "` + p + `", "region": "r", "service": "S", "network_border_group": "r"}`
		}
		return []byte(`{"syncToken": "1787411825", "createDate": "2026-08-22-15-17-05", "prefixes": [], "ipv6_prefixes": [` +
			strings.Join(entries, ",") + `]}`)
	}

	atLimit, over := scattered(MaxPrefixes), scattered(MaxPrefixes+1)
	set, err := ParseAzureServiceTags(azure(atLimit), AzureTagFrontDoorBackend)
	must.NoError(t, err, "MaxPrefixes prefixes")
	assert.Equal(t, MaxPrefixes, set.Len())
	_, err = ParseAzureServiceTags(azure(over), AzureTagFrontDoorBackend)
	assert.ErrorIs(t, err, ErrTooLarge, "Azure, MaxPrefixes+1")
	_, err = ParseAWS(aws(over), AWSFilter{Services: []string{"S"}})
	assert.ErrorIs(t, err, ErrTooLarge, "AWS, MaxPrefixes+1")
	_, err = ParseAWS(aws(over), AWSFilter{Services: []string{"other"}})
	assert.ErrorIs(t, err, ErrEmpty, "the limit counts what the filter selects")
}
