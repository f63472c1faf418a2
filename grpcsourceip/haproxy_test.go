package grpcsourceip

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// haproxyAddr is the source address HAProxy connects to the servers from,
// so that its socket layer is distinguishable from every client.
const haproxyAddr = "127.0.0.200"

// TestHAProxy sends a real grpc-go client's calls through a real HAProxy in
// mode tcp with send-proxy-v2 to gRPC servers on a proxyproto.Listener with
// Credentials, insecure and TLS (HAProxy passes TLS through). Each call
// forges two x-forwarded-for values; the server must name the client's own
// address from the PROXY layer, keep HAProxy as the socket peer, and read
// none of the metadata, since the client is not a trusted proxy.
func TestHAProxy(t *testing.T) {
	in, err := New(Config{Trust: clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet(haproxyAddr + "/32"),
		Header:         "X-Forwarded-For",
	})})
	require.NoError(t, err)
	serverTLS, clientTLS := testTLS(t)

	plain, secure := proxyListen(t, haproxyAddr), proxyListen(t, haproxyAddr)
	serve(t, plain, in, grpc.Creds(Credentials(insecure.NewCredentials())))
	serve(t, secure, in, grpc.Creds(Credentials(credentials.NewTLS(serverTLS))))

	ports := e2e.StartHAProxy(t, 2, func(p []int) string {
		return fmt.Sprintf(`
defaults
    mode tcp
    timeout connect 2s
    timeout client 10s
    timeout server 10s

listen plain
    bind 127.0.0.1:%d
    server app %s send-proxy-v2 source %s

listen tls
    bind 127.0.0.1:%d
    server app %s send-proxy-v2 source %s
`, p[0], plain.Addr(), haproxyAddr, p[1], secure.Addr(), haproxyAddr)
	})

	tests := []struct {
		name   string
		target string // HAProxy's frontend, or the server itself
		from   string
		creds  credentials.TransportCredentials
		want   string
	}{
		{name: "insecure through HAProxy", target: fmt.Sprintf("127.0.0.1:%d", ports[0]), from: "127.0.0.11",
			want: "client=127.0.0.11 source=proxy-protocol hop=1 via=127.0.0.200 peer=127.0.0.200 proxy=127.0.0.11 masq=false pp=2 auth=insecure"},
		{name: "TLS through HAProxy", target: fmt.Sprintf("127.0.0.1:%d", ports[1]), from: "127.0.0.12", creds: credentials.NewTLS(clientTLS),
			want: "client=127.0.0.12 source=proxy-protocol hop=1 via=127.0.0.200 peer=127.0.0.200 proxy=127.0.0.12 masq=false pp=2 auth=tls"},
		{name: "direct to the PROXY listener", target: plain.Addr().String(), from: "127.0.0.13",
			want: "client=127.0.0.13 source=socket hop=0 via=invalid IP peer=127.0.0.13 proxy=invalid IP masq=false pp=0 auth=insecure"},
	}
	for _, tt := range tests {
		client := dial(t, tt.target, tt.from, tt.creds)
		for _, c := range calls {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				got, err := c.do(t, client, "x-forwarded-for", "6.6.6.6", "x-forwarded-for", "203.0.113.7")
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			})
		}
	}
}
