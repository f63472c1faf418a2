package proxyproto

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

func TestForwardHeader(t *testing.T) {
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For",
		Masquerade: clientip.MustParsePrefixSet("192.0.2.0/28")})
	resolve := func(tr clientip.Transport, xff string) clientip.Result {
		var h http.Header
		if xff != "" {
			h = http.Header{"X-Forwarded-For": {xff}}
		}
		res, _ := r.Resolve(tr, h)
		return res
	}
	dst := ap("198.51.100.1:443")
	tests := []struct {
		name    string
		res     clientip.Result
		dst     netip.AddrPort
		want    Header
		wantErr error
	}{
		{name: "a socket client with its port", res: resolve(clientip.Transport{Peer: ap("203.0.113.9:5555")}, ""), dst: dst,
			want: Header{Version: 2, Command: CommandProxy, Source: ap("203.0.113.9:5555"), Destination: dst}},
		{name: "a client a PROXY header named, with its port", res: resolve(clientip.Transport{Peer: ap("10.0.0.1:1"), Proxy: ap("[2001:db8::7]:6000")}, ""), dst: dst,
			want: Header{Version: 2, Command: CommandProxy, Source: ap("[2001:db8::7]:6000"), Destination: dst}},
		{name: "a client an HTTP header named: no port", res: resolve(clientip.Transport{Peer: ap("10.0.0.1:1")}, "6.6.6.6, 203.0.113.9:8080"), dst: dst,
			want: Header{Version: 2, Command: CommandProxy, Source: ap("203.0.113.9:0"), Destination: dst}},
		{name: "a zoned link-local client and a mapped, zoned destination are written canonical",
			res: resolve(clientip.Transport{Peer: ap("[fe80::7%eth0]:5555")}, ""), dst: netip.MustParseAddrPort("[::ffff:198.51.100.1]:443"),
			want: Header{Version: 2, Command: CommandProxy, Source: ap("[fe80::7]:5555"), Destination: dst}},
		{name: "unresolved: no header", res: resolve(clientip.Transport{Peer: ap("10.0.0.1:1")}, "garbage"), dst: dst, wantErr: ErrInvalidHeaderValue},
		{name: "every hop trusted: no header", res: resolve(clientip.Transport{Peer: ap("10.0.0.1:1")}, ""), dst: dst, wantErr: ErrInvalidHeaderValue},
		{name: "a masquerading node never reaches the upstream as a client", res: resolve(clientip.Transport{Peer: ap("192.0.2.3:1")}, ""), dst: dst,
			wantErr: clientip.ErrMasqueraded},
		{name: "no destination", res: resolve(clientip.Transport{Peer: ap("203.0.113.9:5555")}, ""), wantErr: ErrInvalidHeaderValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ForwardHeader(tc.res, tc.dst)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.ErrorIs(t, err, ErrInvalidHeaderValue)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, h)
			b, err := h.Format()
			require.NoError(t, err)
			back, n, err := ParseHeader(b)
			require.NoError(t, err)
			assert.Equal(t, len(b), n)
			assert.Equal(t, h.Source, back.Source, "the wire form")
		})
	}
}
