package grpcsourceip

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// TestNginx sends a real grpc-go client's calls through a real nginx
// proxying gRPC (grpc_pass over HTTP/2 without TLS) with the configuration
// the nginx documentation suggests for X-Forwarded-For:
//
//	grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
//
// Each call forges x-forwarded-for, once or twice; nginx appends the address
// it received the call from, and the server, trusting only nginx, must name
// that address and nothing the client wrote — and, reached directly, must
// ignore the forged metadata altogether.
func TestNginx(t *testing.T) {
	in, err := New(Config{Trust: clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"), // nginx's address towards the server
		Header:         "X-Forwarded-For",
	})})
	require.NoError(t, err)
	lis := listen(t)
	serve(t, lis, in)
	upstream := lis.Addr().String()
	ports := e2e.StartNginx(t, 1, func(p []int) string {
		return `server {
	listen 127.0.0.1:` + strconv.Itoa(p[0]) + ` http2;
	location / {
		grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
		grpc_pass grpc://` + upstream + `;
	}
}`
	})
	front := "127.0.0.1:" + strconv.Itoa(ports[0])

	tests := []struct {
		name   string
		target string
		from   string
		md     []string
		want   string
	}{
		{name: "through nginx, one forged value", target: front, from: "127.0.0.7", md: []string{"x-forwarded-for", "6.6.6.6"},
			want: "client=127.0.0.7 source=x-forwarded-for hop=1 via=127.0.0.1 peer=127.0.0.1"},
		{name: "through nginx, two forged values", target: front, from: "127.0.0.8", md: []string{"x-forwarded-for", "6.6.6.6", "x-forwarded-for", "7.7.7.7, 127.0.0.1"},
			want: "client=127.0.0.8 source=x-forwarded-for hop=1 via=127.0.0.1 peer=127.0.0.1"},
		{name: "through nginx, nothing forged", target: front, from: "127.0.0.9",
			want: "client=127.0.0.9 source=x-forwarded-for hop=1 via=127.0.0.1 peer=127.0.0.1"},
		{name: "direct, two forged values", target: upstream, from: "127.0.0.10", md: []string{"x-forwarded-for", "6.6.6.6", "x-forwarded-for", "127.0.0.1"},
			want: "client=127.0.0.10 source=socket hop=0 via=invalid IP peer=127.0.0.10"},
	}
	for _, tt := range tests {
		client := dial(t, tt.target, tt.from, nil)
		for _, c := range calls {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				got, err := c.do(t, client, tt.md...)
				require.NoError(t, err)
				assert.Contains(t, got, tt.want)
			})
		}
	}
}
