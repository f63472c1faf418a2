package grpcsourceip

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/ratelimit"
)

// Loopback addresses of these tests: the server trusts proxyAddr; a direct
// client connects from clientAddr; nodeAddr is a masquerading node.
const (
	proxyAddr  = "127.0.0.2"
	clientAddr = "127.0.0.3"
	nodeAddr   = "127.0.0.4"
)

// startTrusting serves the test service with an Interceptor over a
// resolver that trusts proxyAddr to write header, flags nodeAddr as
// masquerading, and has cfg's other fields, with the server options opts;
// it returns the server's address.
func startTrusting(t *testing.T, header string, cfg Config, opts ...grpc.ServerOption) string {
	t.Helper()
	cfg.Trust = clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet(proxyAddr + "/32"),
		Masquerade:     clientip.MustParsePrefixSet(nodeAddr + "/32"),
		Header:         header,
	})
	in, err := New(cfg)
	require.NoError(t, err)
	lis := listen(t)
	serve(t, lis, in, opts...)
	return lis.Addr().String()
}

// call is one way of calling the test service.
type call struct {
	name string
	do   func(t testing.TB, c testgrpc.TestServiceClient, md ...string) (string, error)
}

var calls = []call{{"unary", callUnary}, {"stream", callStream}}

// wantStatus checks that err is a status with code and message msg.
func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status: %v", err)
	assert.Equal(t, code, st.Code())
	assert.Equal(t, msg, st.Message())
}

// TestResolve pins how the forwarding metadata is read: only the configured
// header's key, only from a trusted peer, every value in order as a header
// line, and failures as InvalidArgument that never echo the client's text.
func TestResolve(t *testing.T) {
	servers := map[string]string{
		"X-Forwarded-For": startTrusting(t, "X-Forwarded-For", Config{}),
		"X-Real-IP":       startTrusting(t, "X-Real-IP", Config{}),
		"Forwarded":       startTrusting(t, "Forwarded", Config{}),
	}
	tests := []struct {
		name     string
		header   string // the resolver's
		from     string
		md       []string
		want     string // the fields of describe that must match, or
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "direct client forging x-forwarded-for is its socket peer",
			header: "X-Forwarded-For", from: clientAddr, md: []string{"x-forwarded-for", "203.0.113.9"},
			want: "client=127.0.0.3 source=socket hop=0 via=invalid IP peer=127.0.0.3"},
		{name: "direct client forging two x-forwarded-for values is its socket peer",
			header: "X-Forwarded-For", from: clientAddr, md: []string{"x-forwarded-for", "203.0.113.9", "x-forwarded-for", "198.51.100.9"},
			want: "client=127.0.0.3 source=socket hop=0"},
		{name: "trusted proxy's entry names the client",
			header: "X-Forwarded-For", from: proxyAddr, md: []string{"x-forwarded-for", "203.0.113.7"},
			want: "client=203.0.113.7 source=x-forwarded-for hop=1 via=127.0.0.2 peer=127.0.0.2"},
		// A proxy that adds its own field line instead of appending to the
		// client's: a reader of the first value only (md.Get(key)[0]) would
		// take the client's forged 6.6.6.6.
		{name: "second x-forwarded-for value is a second header line, read from the right",
			header: "X-Forwarded-For", from: proxyAddr, md: []string{"x-forwarded-for", "6.6.6.6", "x-forwarded-for", "203.0.113.7"},
			want: "client=203.0.113.7 source=x-forwarded-for hop=1"},
		{name: "entries within and across values walk as one list",
			header: "X-Forwarded-For", from: proxyAddr, md: []string{"x-forwarded-for", "6.6.6.6, 198.51.100.1, 127.0.0.2", "x-forwarded-for", "127.0.0.2"},
			want: "client=198.51.100.1 source=x-forwarded-for hop=3 via=127.0.0.2"},
		{name: "malformed entry behind a trusted proxy is refused without echoing it",
			header: "X-Forwarded-For", from: proxyAddr, md: []string{"x-forwarded-for", "evil.example"},
			wantCode: codes.InvalidArgument, wantMsg: "cannot determine the client address: malformed"},
		{name: "every hop trusted is refused",
			header: "X-Forwarded-For", from: proxyAddr,
			wantCode: codes.InvalidArgument, wantMsg: "cannot determine the client address: all_trusted"},
		{name: "other forwarding keys are never read",
			header: "X-Forwarded-For", from: proxyAddr, md: []string{"x-real-ip", "203.0.113.7", "forwarded", "for=203.0.113.8", "x-forwarded-for-bin", "AAAA"},
			wantCode: codes.InvalidArgument, wantMsg: "cannot determine the client address: all_trusted"},
		{name: "single-address header from a trusted proxy",
			header: "X-Real-IP", from: proxyAddr, md: []string{"x-real-ip", "203.0.113.7"},
			want: "client=203.0.113.7 source=header hop=1"},
		// The client's own X-Real-IP travels beside the one the edge set:
		// neither can be picked safely (clientip.ErrMultipleValues).
		{name: "second x-real-ip value is refused as multiple values",
			header: "X-Real-IP", from: proxyAddr, md: []string{"x-real-ip", "6.6.6.6", "x-real-ip", "203.0.113.7"},
			wantCode: codes.InvalidArgument, wantMsg: "cannot determine the client address: multiple_values"},
		{name: "direct client's x-real-ip is ignored",
			header: "X-Real-IP", from: clientAddr, md: []string{"x-real-ip", "203.0.113.7"},
			want: "client=127.0.0.3 source=socket"},
		{name: "RFC 7239 forwarded from a trusted proxy",
			header: "Forwarded", from: proxyAddr, md: []string{"forwarded", `for="[2001:db8::7]:4711"`},
			want: "client=2001:db8::7 source=forwarded hop=1"},
		{name: "forwarded values merge like x-forwarded-for ones",
			header: "Forwarded", from: proxyAddr, md: []string{"forwarded", "for=6.6.6.6", "forwarded", "for=203.0.113.7"},
			want: "client=203.0.113.7 source=forwarded hop=1"},
		{name: "masqueraded node goes on flagged without a policy",
			header: "X-Forwarded-For", from: nodeAddr, md: []string{"x-forwarded-for", "203.0.113.9"},
			want: "client=127.0.0.4 source=socket masq=true"},
	}
	for _, c := range calls {
		for _, tt := range tests {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				got, err := c.do(t, dial(t, servers[tt.header], tt.from, nil), tt.md...)
				if tt.wantCode != codes.OK {
					wantStatus(t, err, tt.wantCode, tt.wantMsg)
					return
				}
				require.NoError(t, err)
				have := fields(got)
				for k, v := range fields(tt.want) {
					assert.Equal(t, v, have[k], "%s in %q", k, got)
				}
			})
		}
	}
}

// TestNoIPPeer: a connection whose peer is not on an IP network (an
// in-memory listener) has no address to believe.
func TestNoIPPeer(t *testing.T) {
	in, err := New(Config{Trust: clientip.MustNew(clientip.Config{})})
	require.NoError(t, err)
	lis := bufconn.Listen(1 << 16)
	serve(t, lis, in)
	cc, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithTransportCredentials(Credentials(insecure.NewCredentials())),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	require.NoError(t, err)
	defer cc.Close()
	for _, c := range calls {
		_, err := c.do(t, testgrpc.NewTestServiceClient(cc))
		wantStatus(t, err, codes.InvalidArgument, "cannot determine the client address: no_address")
	}
}

// sourceRanges is a middleware.NewSourceRanges allowlist, which is a Policy.
func sourceRanges(t *testing.T, allow string) Policy {
	sr, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{Allow: clientip.MustParsePrefixSet(allow)})
	require.NoError(t, err)
	return sr
}

// TestPolicy: a policy sees every resolution, failures included, and its
// verdict decides the status code.
func TestPolicy(t *testing.T) {
	ranges := startTrusting(t, "X-Forwarded-For", Config{Policy: sourceRanges(t, "203.0.113.0/24")})
	byMethod := startTrusting(t, "X-Forwarded-For", Config{Policy: PolicyFunc(func(target string, res clientip.Result, err error) error {
		switch {
		case target == testgrpc.TestService_StreamingOutputCall_FullMethodName:
			return middleware.ErrNotAllowed
		case target != testgrpc.TestService_UnaryCall_FullMethodName:
			return errors.New("unexpected target " + target)
		case errors.Is(err, clientip.ErrAllTrusted):
			return nil // a health check from a trusted hop, say
		}
		return err
	})})
	own := startTrusting(t, "X-Forwarded-For", Config{Policy: PolicyFunc(func(string, clientip.Result, error) error {
		return errors.New("policy store down: 203.0.113.7")
	})})

	tests := []struct {
		name     string
		server   string
		call     call
		from     string
		md       []string
		want     string
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "allowed range", server: ranges, call: calls[0], from: proxyAddr, md: []string{"x-forwarded-for", "203.0.113.7"},
			want: "client=203.0.113.7 source=x-forwarded-for"},
		{name: "outside the ranges is PermissionDenied", server: ranges, call: calls[1], from: proxyAddr, md: []string{"x-forwarded-for", "198.51.100.7"},
			wantCode: codes.PermissionDenied, wantMsg: "client address refused: not_allowed"},
		{name: "forged entry in range from a direct client is PermissionDenied", server: ranges, call: calls[0], from: clientAddr, md: []string{"x-forwarded-for", "203.0.113.7"},
			wantCode: codes.PermissionDenied, wantMsg: "client address refused: not_allowed"},
		{name: "unresolved is InvalidArgument naming the cause", server: ranges, call: calls[0], from: proxyAddr, md: []string{"x-forwarded-for", "203.0.113.7:80:80"},
			wantCode: codes.InvalidArgument, wantMsg: "cannot determine the client address: malformed"},
		{name: "masqueraded is PermissionDenied", server: ranges, call: calls[1], from: nodeAddr,
			wantCode: codes.PermissionDenied, wantMsg: "client address refused: masqueraded"},
		{name: "target is the full method: unary admitted though unresolved", server: byMethod, call: calls[0], from: proxyAddr,
			want: "no result"},
		{name: "target is the full method: stream refused", server: byMethod, call: calls[1], from: clientAddr,
			wantCode: codes.PermissionDenied, wantMsg: "client address refused: not_allowed"},
		{name: "policy's own error is PermissionDenied without its text", server: own, call: calls[0], from: clientAddr,
			wantCode: codes.PermissionDenied, wantMsg: "client address refused: error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call.do(t, dial(t, tt.server, tt.from, nil), tt.md...)
			if tt.wantCode != codes.OK {
				wantStatus(t, err, tt.wantCode, tt.wantMsg)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, got, tt.want)
		})
	}
}

// downStore is a shared Store during an outage, configured to fail closed.
type downStore struct{}

func (downStore) Take(context.Context, ratelimit.Key, time.Time, int, time.Duration) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, ratelimit.ErrUnavailable
}

func (downStore) Limit() ratelimit.Limit { return ratelimit.Limit{Rate: 1, Burst: 1} }

// TestRateLimit: the limit charges the client the chain names — never a
// forged entry, never the proxy — and refuses with ResourceExhausted and
// the time to wait.
func TestRateLimit(t *testing.T) {
	newLimiter := func() *ratelimit.Limiter {
		l, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1, Burst: 2}})
		require.NoError(t, err)
		return l
	}
	// Refused calls, their status and trailer.
	limited := func(t *testing.T, c call, client testgrpc.TestServiceClient, md ...string) {
		t.Helper()
		var trailer metadata.MD
		var err error
		if c.name == "unary" {
			_, err = client.UnaryCall(outgoing(t, md...), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
		} else {
			var s grpc.ServerStreamingClient[testgrpc.StreamingOutputCallResponse]
			s, err = client.StreamingOutputCall(outgoing(t, md...), &testgrpc.StreamingOutputCallRequest{})
			require.NoError(t, err)
			_, err = s.Recv()
			trailer = s.Trailer()
		}
		wantStatus(t, err, codes.ResourceExhausted, "rate limit exceeded")
		st, _ := status.FromError(err)
		require.Len(t, st.Details(), 1)
		ri, ok := st.Details()[0].(*errdetails.RetryInfo)
		require.True(t, ok, "detail %T", st.Details()[0])
		d := ri.GetRetryDelay().AsDuration()
		assert.True(t, d > 0 && d <= time.Second, "retry delay %v", d)
		require.Len(t, trailer.Get(PushbackKey), 1)
		assert.NotEqual(t, "0", trailer.Get(PushbackKey)[0])
	}

	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			srv := startTrusting(t, "X-Forwarded-For", Config{RateLimit: RateLimit{Store: newLimiter()}})
			direct, proxy := dial(t, srv, clientAddr, nil), dial(t, srv, proxyAddr, nil)

			// A direct client's bucket is its own whatever it forges.
			for i, forged := range []string{"203.0.113.1", "203.0.113.2"} {
				_, err := c.do(t, direct, "x-forwarded-for", forged)
				require.NoError(t, err, "call %d", i)
			}
			limited(t, c, direct, "x-forwarded-for", "203.0.113.3")

			// Behind the proxy each client has its own bucket, and the
			// proxy's address is nobody's.
			for range 2 {
				_, err := c.do(t, proxy, "x-forwarded-for", "6.6.6.6, 198.51.100.1")
				require.NoError(t, err)
			}
			limited(t, c, proxy, "x-forwarded-for", "7.7.7.7, 198.51.100.1")
			_, err := c.do(t, proxy, "x-forwarded-for", "198.51.100.2")
			require.NoError(t, err)
		})
	}

	t.Run("unresolved takes no token", func(t *testing.T) {
		srv := startTrusting(t, "X-Forwarded-For", Config{RateLimit: RateLimit{Store: newLimiter()}})
		proxy := dial(t, srv, proxyAddr, nil)
		for range 3 {
			_, err := callUnary(t, proxy)
			wantStatus(t, err, codes.InvalidArgument, "cannot determine the client address: all_trusted")
		}
	})
	t.Run("unresolved admitted by a policy is refused", func(t *testing.T) {
		srv := startTrusting(t, "X-Forwarded-For", Config{
			Policy:    PolicyFunc(func(string, clientip.Result, error) error { return nil }),
			RateLimit: RateLimit{Store: newLimiter()},
		})
		_, err := callUnary(t, dial(t, srv, proxyAddr, nil))
		wantStatus(t, err, codes.InvalidArgument, "cannot determine the client address: all_trusted")
	})
	t.Run("masqueraded limited on the node's key", func(t *testing.T) {
		srv := startTrusting(t, "X-Forwarded-For", Config{RateLimit: RateLimit{Store: newLimiter()}})
		node := dial(t, srv, nodeAddr, nil)
		for range 2 {
			got, err := callUnary(t, node)
			require.NoError(t, err)
			assert.Contains(t, got, "masq=true")
		}
		limited(t, calls[0], node)
	})
	t.Run("masqueraded refused", func(t *testing.T) {
		srv := startTrusting(t, "X-Forwarded-For", Config{RateLimit: RateLimit{Store: newLimiter(), RefuseMasqueraded: true}})
		_, err := callStream(t, dial(t, srv, nodeAddr, nil))
		wantStatus(t, err, codes.PermissionDenied, "client address refused: masqueraded")
	})
	t.Run("identity narrows the bucket", func(t *testing.T) {
		srv := startTrusting(t, "X-Forwarded-For", Config{RateLimit: RateLimit{
			Store:    newLimiter(),
			Identity: func(_ context.Context, method string, _ clientip.Result) string { return method },
		}})
		direct := dial(t, srv, clientAddr, nil)
		for range 2 {
			_, err := callUnary(t, direct)
			require.NoError(t, err)
		}
		limited(t, calls[0], direct)
		_, err := callStream(t, direct)
		require.NoError(t, err, "the stream method has a bucket of its own")
	})
	t.Run("store down is Unavailable", func(t *testing.T) {
		srv := startTrusting(t, "X-Forwarded-For", Config{RateLimit: RateLimit{Store: downStore{}}})
		_, err := callUnary(t, dial(t, srv, clientAddr, nil))
		wantStatus(t, err, codes.Unavailable, "rate limiter unavailable")
	})
}

func TestNew(t *testing.T) {
	r := clientip.MustNew(clientip.Config{})
	lim, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1, Burst: 1}})
	require.NoError(t, err)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no trust", Config{}},
		{"nil resolver", Config{Trust: (*clientip.Resolver)(nil)}},
		{"nil *clientip.Store (a variable never set)", Config{Trust: (*clientip.Store)(nil)}},
		{"invalid limit", Config{Trust: r, RateLimit: RateLimit{Store: &ratelimit.Limiter{}}}},
		{"keyer out of range", Config{Trust: r, RateLimit: RateLimit{Store: lim, Keyer: clientip.Keyer{IPv6Bits: 129}}}},
		{"keyer with a NAT64 prefix RFC 6052 does not allow", Config{Trust: r, RateLimit: RateLimit{Store: lim, Keyer: clientip.Keyer{NAT64: netip.MustParsePrefix("64:ff9b:1::/80")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	_, err = New(Config{Trust: r, RateLimit: RateLimit{Store: lim}})
	assert.NoError(t, err)
}

// swappable is a Trust whose resolver can be replaced while calls are
// served, as a live trust store's is.
type swappable struct {
	r atomic.Pointer[clientip.Resolver]
}

func (s *swappable) Resolver() *clientip.Resolver { return s.r.Load() }

// TestTrustSwap: each call reads the metadata key of the resolver the Trust
// returns for that call, never a key remembered from an earlier resolver.
func TestTrustSwap(t *testing.T) {
	trusted := clientip.MustParsePrefixSet(proxyAddr + "/32")
	xff := clientip.MustNew(clientip.Config{TrustedProxies: trusted, Header: "X-Forwarded-For"})
	realIP := clientip.MustNew(clientip.Config{TrustedProxies: trusted, Header: "X-Real-IP"})
	var trust swappable
	trust.r.Store(xff)
	in, err := New(Config{Trust: &trust})
	require.NoError(t, err)
	lis := listen(t)
	serve(t, lis, in)
	c := dial(t, lis.Addr().String(), proxyAddr, nil)
	md := []string{"x-forwarded-for", "203.0.113.7", "x-real-ip", "198.51.100.7"}

	for _, step := range []struct {
		r    *clientip.Resolver
		want string
	}{
		{xff, "client=203.0.113.7 source=x-forwarded-for"},
		{realIP, "client=198.51.100.7 source=header"},
		{xff, "client=203.0.113.7 source=x-forwarded-for"},
	} {
		trust.r.Store(step.r)
		got, err := callUnary(t, c, md...)
		require.NoError(t, err)
		assert.Contains(t, got, step.want)
	}
}
