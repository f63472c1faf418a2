package grpcsourceip

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// serveHTTP serves the test service through grpc.Server.ServeHTTP on an
// http.Server speaking HTTP/2 without TLS, with connCtx as its ConnContext.
func serveHTTP(t *testing.T, lis net.Listener, in *Interceptor, connCtx func(context.Context, net.Conn) context.Context) {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: newServer(in), Protocols: &protocols, ConnContext: connCtx}
	done := make(chan struct{})
	go func() { hs.Serve(lis); close(done) }()
	t.Cleanup(func() { hs.Close(); <-done })
}

// TestServeHTTPProxyFacts: a grpc.Server served as an http.Handler behind a
// proxyproto.Listener gets the PROXY layer through proxyproto.ConnContext,
// as the HTTP middleware does.
func TestServeHTTPProxyFacts(t *testing.T) {
	in, err := New(Config{Trust: clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet(proxyAddr + "/32"),
		Header:         "X-Forwarded-For",
	})})
	require.NoError(t, err)
	pl := proxyListen(t, proxyAddr)
	serveHTTP(t, pl, in, proxyproto.ConnContext)
	c := dialPROXY(t, pl.Addr().String(), netip.MustParseAddrPort("203.0.113.7:5555"), insecure.NewCredentials())
	for _, call := range calls {
		got, err := call.do(t, c, "x-forwarded-for", "6.6.6.6")
		require.NoError(t, err)
		assert.Contains(t, got, "client=203.0.113.7 source=proxy-protocol hop=1 via=127.0.0.2 peer=127.0.0.2 proxy=203.0.113.7", call.name)
	}
}

// TestUnixSocketPeer pins a spoofing trick: a Unix-domain peer's address is
// the path its client bound its socket to, and a client in the server's
// directory can bind "127.0.0.1:9". Served as an http.Handler, gRPC reports
// that path as a TCP peer's "ip:port"; it must not pass for a trusted
// 127.0.0.1, whose forwarding metadata would then be believed.
func TestUnixSocketPeer(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // so that the client can bind the relative path "127.0.0.1:9"
	trusting := func(unix bool) *Interceptor {
		in, err := New(Config{Trust: clientip.MustNew(clientip.Config{
			TrustedProxies:  clientip.MustParsePrefixSet("127.0.0.1/32"),
			TrustUnixSocket: unix,
			Header:          "X-Forwarded-For",
		})})
		require.NoError(t, err)
		return in
	}
	servers := []struct {
		name  string
		serve func(t *testing.T, lis net.Listener, in *Interceptor)
	}{
		{"grpc", func(t *testing.T, lis net.Listener, in *Interceptor) { serve(t, lis, in) }},
		{"ServeHTTP", func(t *testing.T, lis net.Listener, in *Interceptor) { serveHTTP(t, lis, in, nil) }},
	}
	tests := []struct {
		name     string
		unix     bool
		want     string
		wantCode codes.Code
	}{
		{name: "untrusted Unix peer has no address", wantCode: codes.InvalidArgument},
		{name: "trusted Unix peer delivers the header", unix: true, want: "client=203.0.113.7 source=x-forwarded-for hop=1 via=invalid IP peer=invalid IP"},
	}
	for i, s := range servers {
		for _, tt := range tests {
			t.Run(s.name+"/"+tt.name, func(t *testing.T) {
				sock := filepath.Join(dir, "s"+string(rune('0'+i))+tt.name[:1])
				lis, err := net.Listen("unix", sock)
				require.NoError(t, err)
				s.serve(t, lis, trusting(tt.unix))
				cc, err := grpc.NewClient("passthrough:///unix",
					grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
						os.Remove("127.0.0.1:9")
						return net.DialUnix("unix", &net.UnixAddr{Name: "127.0.0.1:9", Net: "unix"}, &net.UnixAddr{Name: sock, Net: "unix"})
					}))
				require.NoError(t, err)
				defer cc.Close()
				got, err := callUnary(t, testgrpc.NewTestServiceClient(cc), "x-forwarded-for", "203.0.113.7")
				if tt.wantCode != codes.OK {
					wantStatus(t, err, tt.wantCode, "cannot determine the client address: no_address")
					return
				}
				require.NoError(t, err)
				assert.Contains(t, got, tt.want)
			})
		}
	}
}
