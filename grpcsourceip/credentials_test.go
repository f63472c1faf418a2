package grpcsourceip

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// proxyListen returns a PROXY protocol listener on loopback that trusts
// upstream to send headers (and requires them from it).
func proxyListen(t testing.TB, upstream string) *proxyproto.Listener {
	t.Helper()
	pl, err := proxyproto.NewListener(listen(t), proxyproto.Config{
		Trust:             clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(upstream + "/32")}),
		ReadHeaderTimeout: 5 * time.Second,
	})
	require.NoError(t, err)
	return pl
}

// dialPROXY connects to target from proxyAddr as a load balancer would:
// a PROXY v2 header naming source first, then gRPC with creds.
func dialPROXY(t testing.TB, target string, source netip.AddrPort, creds credentials.TransportCredentials) testgrpc.TestServiceClient {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(proxyAddr)}}
	h := proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy, Source: source}
	cc, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return proxyproto.DialContext(ctx, d, "tcp", addr, h)
		}))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// TestCredentials: the PROXY facts a proxyproto.Listener read reach the
// interceptor through Credentials, under insecure and TLS credentials, and
// the application still finds the wrapped AuthInfo.
func TestCredentials(t *testing.T) {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet(proxyAddr + "/32"),
		Header:         "X-Forwarded-For",
	})
	in, err := New(Config{Trust: r})
	require.NoError(t, err)
	serverTLS, clientTLS := testTLS(t)
	tests := []struct {
		name         string
		server, dial credentials.TransportCredentials
		auth         string
	}{
		{"insecure", insecure.NewCredentials(), insecure.NewCredentials(), "insecure"},
		{"tls", credentials.NewTLS(serverTLS), credentials.NewTLS(clientTLS), "tls"},
	}
	source := netip.MustParseAddrPort("203.0.113.7:5555")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := proxyListen(t, proxyAddr)
			serve(t, pl, in, grpc.Creds(Credentials(tt.server)))
			for _, c := range calls {
				// The client's forged metadata is never read: the PROXY
				// source is not a trusted proxy.
				got, err := c.do(t, dialPROXY(t, pl.Addr().String(), source, tt.dial), "x-forwarded-for", "6.6.6.6", "x-forwarded-for", "7.7.7.7")
				require.NoError(t, err)
				assert.Equal(t, "client=203.0.113.7 source=proxy-protocol hop=1 via=127.0.0.2 peer=127.0.0.2 proxy=203.0.113.7 masq=false pp=2 auth="+tt.auth, got, c.name)
			}
		})
	}

	// A peer outside the trusted upstreams connects without a header and is
	// served as itself.
	t.Run("direct client", func(t *testing.T) {
		pl := proxyListen(t, proxyAddr)
		serve(t, pl, in, grpc.Creds(Credentials(insecure.NewCredentials())))
		got, err := callUnary(t, dial(t, pl.Addr().String(), clientAddr, nil), "x-forwarded-for", "6.6.6.6")
		require.NoError(t, err)
		assert.Equal(t, "client=127.0.0.3 source=socket hop=0 via=invalid IP peer=127.0.0.3 proxy=invalid IP masq=false pp=0 auth=insecure", got)
	})
}

// TestCredentialsHopCount pins why a PROXY listener needs Credentials: gRPC's
// own peer address on such a connection is the PROXY source, so without the
// wrapper the load balancer drops out of the chain, and in hop-count mode
// the client is one hop further out — an entry the client wrote itself.
func TestCredentialsHopCount(t *testing.T) {
	r := clientip.MustNew(clientip.Config{TrustedHops: 1, Header: "X-Forwarded-For"})
	in, err := New(Config{Trust: r})
	require.NoError(t, err)
	source := netip.MustParseAddrPort("203.0.113.7:5555")

	with := proxyListen(t, proxyAddr)
	serve(t, with, in, grpc.Creds(Credentials(insecure.NewCredentials())))
	got, err := callUnary(t, dialPROXY(t, with.Addr().String(), source, insecure.NewCredentials()), "x-forwarded-for", "6.6.6.6")
	require.NoError(t, err)
	assert.Contains(t, got, "client=203.0.113.7 source=proxy-protocol hop=1 via=127.0.0.2")

	without := proxyListen(t, proxyAddr)
	serve(t, without, in)
	got, err = callUnary(t, dialPROXY(t, without.Addr().String(), source, insecure.NewCredentials()), "x-forwarded-for", "6.6.6.6")
	require.NoError(t, err)
	assert.Contains(t, got, "client=6.6.6.6 source=x-forwarded-for hop=1 via=203.0.113.7", "without Credentials")
}

func TestAuthInfo(t *testing.T) {
	tlsInfo := credentials.TLSInfo{
		State:          tls.ConnectionState{HandshakeComplete: true},
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}
	f := proxyproto.Facts{Version: 2, Command: proxyproto.CommandProxy}
	ai := AuthInfo{Inner: tlsInfo, Facts: f, Proxied: true}

	assert.Equal(t, "tls", ai.AuthType())
	assert.Equal(t, credentials.PrivacyAndIntegrity, ai.GetCommonAuthInfo().SecurityLevel)
	require.NoError(t, credentials.CheckSecurityLevel(ai, credentials.PrivacyAndIntegrity))
	assert.NotNil(t, ai.GetSecurityValue())
	got, ok := InnerAuthInfo(ai).(credentials.TLSInfo)
	require.True(t, ok)
	assert.True(t, got.State.HandshakeComplete)
	assert.Equal(t, credentials.AuthInfo(tlsInfo), InnerAuthInfo(tlsInfo), "without the wrapper")

	p := &peer.Peer{AuthInfo: ai}
	pf, ok := FactsFromPeer(p)
	assert.True(t, ok)
	assert.Equal(t, f, pf)
	pf, ok = FactsFromContext(peer.NewContext(context.Background(), p))
	assert.True(t, ok)
	assert.Equal(t, f, pf)
	_, ok = FactsFromPeer(&peer.Peer{AuthInfo: AuthInfo{Inner: tlsInfo}})
	assert.False(t, ok, "not from a proxyproto.Listener")
	_, ok = FactsFromPeer(nil)
	assert.False(t, ok)

	// An insecure connection's level is NoSecurity, which per-RPC
	// credentials that require more must see.
	ins := AuthInfo{Inner: insecureInfo(t)}
	assert.Equal(t, "insecure", ins.AuthType())
	assert.Error(t, credentials.CheckSecurityLevel(ins, credentials.PrivacyAndIntegrity))
	assert.Nil(t, ins.GetSecurityValue())
	assert.Equal(t, "grpcsourceip", AuthInfo{}.AuthType())
}

// insecureInfo returns the AuthInfo insecure credentials give a connection.
func insecureInfo(t *testing.T) credentials.AuthInfo {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_, ai, err := insecure.NewCredentials().ServerHandshake(a)
	require.NoError(t, err)
	return ai
}

func TestCredentialsDelegate(t *testing.T) {
	inner := insecure.NewCredentials()
	c := Credentials(inner)
	assert.Equal(t, inner.Info(), c.Info())
	_, ok := c.Clone().(*creds)
	assert.True(t, ok, "Clone keeps the wrapper")
	assert.NoError(t, c.OverrideServerName("example.com"))
}

// TestCredentialsNoClientFromLoadBalancer: a trusted load balancer's
// connection that names no client — a v2 LOCAL header (its own health
// check), or no header at all from a load balancer listed in
// proxyproto.Config.Upstreams under HeaderlessAllow — ends the walk at the
// load balancer through Credentials, and through proxyproto.ConnContext
// under ServeHTTP (Facts.Transport's ProxyLocal). The
// x-forwarded-for metadata on it is the client's own and is never read:
// the spoofing trick of writing one's own address behind a load balancer
// that relays the bytes as they came. Without Credentials gRPC's peer is
// the load balancer and the walk reads that metadata, in trusted-range mode
// too: why the package documentation requires the wrapper.
func TestCredentialsNoClientFromLoadBalancer(t *testing.T) {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet(proxyAddr + "/32,10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	in, err := New(Config{Trust: r})
	require.NoError(t, err)
	listenLB := func() *proxyproto.Listener {
		pl, err := proxyproto.NewListener(listen(t), proxyproto.Config{
			Trust:             r,
			Upstreams:         clientip.MustParsePrefixSet(proxyAddr + "/32"),
			Headerless:        proxyproto.HeaderlessAllow,
			ReadHeaderTimeout: 5 * time.Second,
		})
		require.NoError(t, err)
		return pl
	}
	with, viaHTTP, without := listenLB(), listenLB(), listenLB()
	serve(t, with, in, grpc.Creds(Credentials(insecure.NewCredentials())))
	serveHTTP(t, viaHTTP, in, proxyproto.ConnContext)
	serve(t, without, in)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(proxyAddr)}}
	for _, tt := range []struct {
		name   string
		header *proxyproto.Header
	}{
		{"LOCAL header", &proxyproto.Header{Version: 2, Command: proxyproto.CommandLocal}},
		{"no header from an upstream", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := func(target string) testgrpc.TestServiceClient {
				cc, err := grpc.NewClient("passthrough:///"+target,
					grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
						if tt.header == nil {
							return d.DialContext(ctx, "tcp", addr)
						}
						return proxyproto.DialContext(ctx, d, "tcp", addr, *tt.header)
					}))
				require.NoError(t, err)
				t.Cleanup(func() { cc.Close() })
				return testgrpc.NewTestServiceClient(cc)
			}
			for _, pl := range []*proxyproto.Listener{with, viaHTTP} {
				for _, c := range calls {
					_, err := c.do(t, client(pl.Addr().String()), "x-forwarded-for", "203.0.113.66, 10.1.1.1")
					assert.Equal(t, codes.InvalidArgument, status.Code(err), c.name)
					assert.Contains(t, status.Convert(err).Message(), clientip.ReasonAllTrusted.String(), c.name)
				}
			}
			got, err := callUnary(t, client(without.Addr().String()), "x-forwarded-for", "203.0.113.66, 10.1.1.1")
			require.NoError(t, err)
			assert.Contains(t, got, "client=203.0.113.66 source=x-forwarded-for", "without Credentials")
		})
	}
}
