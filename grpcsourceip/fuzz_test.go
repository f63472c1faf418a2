package grpcsourceip

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sourceip/sourceip/clientip"
)

// FuzzMetadata checks the header view against the resolver it feeds: for
// any values of the configured key (split on "\n" into separate values) and
// of another key, under each header kind, Resolve answers exactly what
// clientip answers for the same values as lines of the header, never names
// a trusted hop, and reads nothing from a direct client.
func FuzzMetadata(f *testing.F) {
	for _, seed := range []struct {
		trustedPeer bool
		vals, other string
	}{
		{true, "203.0.113.7", ""},
		{true, "6.6.6.6\n203.0.113.7", "198.51.100.1"},
		{true, "6.6.6.6, 198.51.100.1, 10.0.0.2\n10.0.0.3", ""},
		{true, "for=6.6.6.6\nfor=\"[2001:db8::7]:4711\"", ""},
		{true, "evil.example", "203.0.113.7"},
		{false, "203.0.113.9\n198.51.100.9", ""},
		{true, "", "203.0.113.7"},
	} {
		f.Add(seed.trustedPeer, seed.vals, seed.other)
	}
	trusted := clientip.MustParsePrefixSet("10.0.0.0/8")
	var resolvers []*clientip.Resolver
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		resolvers = append(resolvers, clientip.MustNew(clientip.Config{TrustedProxies: trusted, Header: h}))
	}
	f.Fuzz(func(t *testing.T, trustedPeer bool, vals, other string) {
		peerAddr := netip.MustParseAddrPort("198.51.100.200:4000")
		if trustedPeer {
			peerAddr = netip.MustParseAddrPort("10.0.0.1:4000")
		}
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(peerAddr)})
		var lines []string
		if vals != "" {
			lines = strings.Split(vals, "\n")
		}
		for _, r := range resolvers {
			key := strings.ToLower(r.Config().Header)
			md := metadata.MD{"x-other": {other}}
			if lines != nil {
				md[key] = lines
			}
			var names headerCache
			res, err := resolve(metadata.NewIncomingContext(ctx, md), r, &names)

			var h http.Header
			if lines != nil {
				h = http.Header{r.Config().Header: lines}
			}
			want, wantErr := r.Resolve(clientip.Transport{Peer: peerAddr}, h)
			require.Equal(t, want, res, "%s", key)
			require.Equal(t, wantErr == nil, err == nil, "%s: %v vs %v", key, err, wantErr)
			if err != nil {
				assert.Equal(t, clientip.ReasonOf(wantErr), clientip.ReasonOf(err))
				continue
			}
			assert.False(t, trusted.Contains(res.Client), "%s: trusted hop %s named", key, res.Client)
			if !trustedPeer {
				assert.Equal(t, clientip.SourceSocket, res.Source, "%s: a direct client's metadata was read", key)
			}
		}
	})
}
