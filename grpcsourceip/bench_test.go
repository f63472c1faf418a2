package grpcsourceip

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/ratelimit"
)

// benchScenario is one call as the interceptor sees it: the peer, the
// metadata gRPC's transport builds, and the client the walk must name.
type benchScenario struct {
	name string
	peer string
	xff  []string // nil: no x-forwarded-for
	want string
}

var benchScenarios = []benchScenario{
	{name: "direct", peer: "198.51.100.7:40000", want: "198.51.100.7"},
	{name: "direct-forged", peer: "198.51.100.7:40000", xff: []string{"203.0.113.9"}, want: "198.51.100.7"},
	{name: "xff3", peer: "10.0.0.1:40000", xff: []string{"203.0.113.7, 10.0.0.3, 10.0.0.2"}, want: "203.0.113.7"},
}

// benchResolver trusts 10.0.0.0/8 to write X-Forwarded-For.
var benchResolver = clientip.MustNew(clientip.Config{
	TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
	Header:         "X-Forwarded-For",
})

// callContext returns the context of a call in s as grpc-go's server hands
// it to interceptors: a peer with insecure credentials' AuthInfo, and the
// incoming metadata a grpc-go client sends.
func (s benchScenario) callContext(tb testing.TB) context.Context {
	addr, err := net.ResolveTCPAddr("tcp", s.peer)
	require.NoError(tb, err)
	_, ai, err := insecure.NewCredentials().ServerHandshake(nil)
	require.NoError(tb, err)
	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr:      addr,
		LocalAddr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 443},
		AuthInfo:  ai,
	})
	md := metadata.MD{
		":authority":   {"api.example:443"},
		"content-type": {"application/grpc"},
		"user-agent":   {"grpc-go/1.85.0"},
	}
	if s.xff != nil {
		md["x-forwarded-for"] = s.xff
	}
	return metadata.NewIncomingContext(ctx, md)
}

var benchInfo = &grpc.UnaryServerInfo{FullMethod: "/pkg.Service/Method"}

// benchClient is where readClient puts the client it read.
var benchClient netip.Addr

// readClient is the handler of the benchmarks: it reads the client, as a
// service would.
func readClient(ctx context.Context, _ any) (any, error) {
	res, _ := clientip.FromContext(ctx)
	benchClient = res.Client
	return nil, nil
}

// BenchmarkUnary measures the unary interceptor's added cost: each
// scenario's "bare" handler against the same handler behind the
// interceptor, and behind the interceptor with a rate limit.
func BenchmarkUnary(b *testing.B) {
	plain, err := New(Config{Trust: benchResolver})
	require.NoError(b, err)
	lim, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1e9, Burst: 1 << 20}}) // never refuses, but keeps buckets
	require.NoError(b, err)
	limited, err := New(Config{Trust: benchResolver, RateLimit: RateLimit{Store: lim}})
	require.NoError(b, err)
	for _, s := range benchScenarios {
		ctx := s.callContext(b)
		b.Run(s.name+"/bare", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				readClient(ctx, nil)
			}
		})
		for name, in := range map[string]*Interceptor{"interceptor": plain, "interceptor+limit": limited} {
			_, err := in.Unary(ctx, nil, benchInfo, readClient)
			require.NoError(b, err)
			require.Equal(b, s.want, benchClient.String())
			b.Run(s.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					in.Unary(ctx, nil, benchInfo, readClient)
				}
			})
		}
		b.Run(s.name+"/interceptor/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					plain.Unary(ctx, nil, benchInfo, readClient)
				}
			})
		})
	}
}

// TestAllocs pins the allocations the interceptor promises: one for the
// context that carries the Result, and one more when the call carries the
// forwarding header (gRPC's copy of its values), whether or not it is
// read; Resolve alone makes only the second; a Limiter holding the client's
// bucket adds none.
func TestAllocs(t *testing.T) {
	in, err := New(Config{Trust: benchResolver})
	require.NoError(t, err)
	lim, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1e9, Burst: 1 << 20}})
	require.NoError(t, err)
	limited, err := New(Config{Trust: benchResolver, RateLimit: RateLimit{Store: lim}})
	require.NoError(t, err)
	for _, s := range benchScenarios {
		ctx := s.callContext(t)
		header := 0.0
		if s.xff != nil {
			header = 1
		}
		assert.Equal(t, header, testing.AllocsPerRun(100, func() { in.Resolve(ctx) }), "%s: Resolve", s.name)
		assert.Equal(t, 1+header, testing.AllocsPerRun(100, func() { in.Unary(ctx, nil, benchInfo, readClient) }), "%s: Unary", s.name)
		_, err := limited.Unary(ctx, nil, benchInfo, readClient) // the bucket is made
		require.NoError(t, err)
		assert.Equal(t, 1+header, testing.AllocsPerRun(100, func() { limited.Unary(ctx, nil, benchInfo, readClient) }), "%s: Unary with a limit", s.name)
	}
}
