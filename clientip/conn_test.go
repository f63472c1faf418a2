package clientip

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connRequest returns a request whose context carries ctx's values, with a
// RemoteAddr and headers that must not be what a connection's node says.
func connRequest(ctx context.Context, h http.Header) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.99:1" // not the connection's peer: it must not be read
	req.Header = h
	return req
}

func TestFromRequest(t *testing.T) {
	r := MustNew(Config{TrustedProxies: private10, Header: "X-Forwarded-For", Masquerade: MustParsePrefixSet("192.168.0.0/16")})
	direct := Transport{Peer: ap("203.0.113.9:5000")}
	viaLB := Transport{Peer: ap("10.0.0.1:5000")}
	xff := http.Header{"X-Forwarded-For": {"6.6.6.6, 198.51.100.7"}}
	bg := context.Background()
	tests := []struct {
		name    string
		ctx     context.Context
		want    string // client
		from    Source
		wantErr error
	}{
		{name: "direct peer from the connection, RemoteAddr unread", ctx: NewConnContext(bg, r, direct),
			want: "203.0.113.9", from: SourceSocket},
		{name: "trusted peer from the connection, header walked", ctx: NewConnContext(bg, r, viaLB),
			want: "198.51.100.7", from: SourceXForwardedFor},
		{name: "PROXY source from the connection", ctx: NewConnContext(bg, r, Transport{Peer: ap("10.0.0.1:5000"), Proxy: ap("198.51.100.8:1")}),
			want: "198.51.100.8", from: SourceProxyProtocol},
		{name: "peer the accepting layer did not trust", ctx: NewConnContext(bg, r, Transport{Peer: ap("10.0.0.1:5000"), PeerUntrusted: true}),
			want: "10.0.0.1", from: SourceSocket},
		{name: "unknown peer kind is no address", ctx: NewConnContext(bg, MustNew(Config{TrustUnixSocket: true}), Transport{PeerUntrusted: true}),
			wantErr: ErrNoAddress},
		{name: "stored Result wins over the connection", ctx: NewContext(NewConnContext(bg, r, direct), Result{Client: addr("198.51.100.1"), Source: SourceForwarded}),
			want: "198.51.100.1", from: SourceForwarded},
		{name: "stored masqueraded Result", ctx: NewContext(bg, Result{Client: addr("192.168.1.1"), Source: SourceSocket, Masqueraded: true}),
			want: "192.168.1.1", from: SourceSocket, wantErr: ErrMasqueraded},
		{name: "no trust anywhere: refused, not resolved from RemoteAddr", ctx: bg, wantErr: ErrNoTrust},
		{name: "transport without trust (proxyproto.ConnContext alone): refused", ctx: NewTransportContext(bg, direct), wantErr: ErrNoTrust},
		{name: "nil trust: refused", ctx: NewConnContext(bg, nil, direct), wantErr: ErrNoTrust},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := FromRequest(connRequest(tc.ctx, xff))
			require.ErrorIs(t, err, tc.wantErr)
			if tc.wantErr != nil && tc.want == "" {
				assert.False(t, res.Client.IsValid(), "a client with %v", err)
				return
			}
			assert.Equal(t, addr(tc.want), res.Client)
			assert.Equal(t, tc.from, res.Source)
		})
	}
}

// nilTrust breaks the Trust contract by returning a nil resolver.
type nilTrust struct{}

func (nilTrust) Resolver() *Resolver { return nil }

// A Trust that returns no resolver is refused with ErrNoTrust; it must never
// yield the connection's empty cache as a Result without an error.
func TestFromRequestNilResolver(t *testing.T) {
	res, err := FromRequest(connRequest(NewConnContext(context.Background(), nilTrust{}, Transport{Peer: ap("203.0.113.9:1")}), nil))
	require.ErrorIs(t, err, ErrNoTrust)
	assert.Equal(t, Result{}, res)
}

// The node a connection stores answers exactly as Resolve does, for every
// configuration, transport and header of the fuzz corpus, whether its cached
// Result is used or the header walked; ResolveRequest on the same request
// agrees, reading the node's transport and not RemoteAddr.
func TestConnContextMatchesResolve(t *testing.T) {
	for ci, cfg := range fuzzConfigs {
		cfg.Header = "X-Forwarded-For"
		r := MustNew(cfg)
		for ti, tr := range fuzzTransports {
			ctx := NewConnContext(context.Background(), r, tr)
			for _, line := range fuzzSeeds {
				h := http.Header{"X-Forwarded-For": {line}}
				t.Run(fmt.Sprintf("cfg%d/transport%d/%q", ci, ti, line), func(t *testing.T) {
					want, wantErr := r.Resolve(tr, h)
					req := connRequest(ctx, h)
					got, err := FromRequest(req)
					assert.Equal(t, want, got)
					assert.Equal(t, ReasonOf(wantErr), ReasonOf(err), "errors %v and %v", wantErr, err)
					got, err = r.ResolveRequest(req)
					assert.Equal(t, want, got)
					assert.Equal(t, ReasonOf(wantErr), ReasonOf(err), "ResolveRequest: errors %v and %v", wantErr, err)
				})
			}
		}
	}
}

// The connection's cached answer belongs to the resolver it was computed
// under: after a Store swap, requests on an open connection are resolved
// under the new one.
func TestConnContextStoreSwap(t *testing.T) {
	store, err := NewStore(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/24"), Header: "X-Forwarded-For"}, StoreOptions{})
	require.NoError(t, err)
	ctx := NewConnContext(context.Background(), store, Transport{Peer: ap("10.0.1.5:1")})
	req := connRequest(ctx, http.Header{"X-Forwarded-For": {"198.51.100.7"}})

	res, err := FromRequest(req)
	require.NoError(t, err)
	assert.Equal(t, addr("10.0.1.5"), res.Client, "an untrusted peer is the client")

	_, err = store.Swap(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/16"), Header: "X-Forwarded-For"})
	require.NoError(t, err)
	res, err = FromRequest(req)
	require.NoError(t, err)
	assert.Equal(t, addr("198.51.100.7"), res.Client, "after the swap the peer is a trusted proxy")
}

func TestFromRequestNoAllocs(t *testing.T) {
	r := MustNew(Config{TrustedProxies: private10, Header: "X-Forwarded-For"})
	store, err := NewStore(Config{TrustedProxies: private10, Header: "X-Forwarded-For"}, StoreOptions{})
	require.NoError(t, err)
	h := http.Header{"X-Forwarded-For": {"2001:db8::7, fd00::2, 198.51.100.7, 10.0.0.3"}}
	for _, tc := range []struct {
		name  string
		trust Trust
		t     Transport
	}{
		{"direct, cached", r, Transport{Peer: ap("203.0.113.9:1")}},
		{"walk", r, Transport{Peer: ap("10.0.0.1:1")}},
		{"store, cached", store, Transport{Peer: ap("203.0.113.9:1")}},
		{"store, walk", store, Transport{Peer: ap("[fd00::1]:1")}},
	} {
		req := connRequest(NewConnContext(context.Background(), tc.trust, tc.t), h)
		_, err := FromRequest(req)
		require.NoError(t, err, tc.name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { FromRequest(req) }), "FromRequest, %s", tc.name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { r.ResolveRequest(req) }), "ResolveRequest, %s", tc.name)
	}
	var sink context.Context
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		sink = NewConnContext(context.Background(), r, Transport{Peer: ap("203.0.113.9:1")})
	}), "NewConnContext allocations")
	assert.NotNil(t, sink)
}

func TestConnContextString(t *testing.T) {
	ctx := NewConnContext(context.Background(), MustNew(Config{}), Transport{})
	assert.Equal(t, "context.Background.WithValue(clientip.Transport)", fmt.Sprint(ctx))
	tr, ok := TransportFromContext(ctx)
	assert.True(t, ok)
	assert.Equal(t, Transport{}, tr)
	_, ok = FromContext(ctx)
	assert.False(t, ok, "a connection's node is not a stored Result")
	assert.False(t, errors.Is(ErrNoTrust, ErrNoAddress))
}

// An Origin stored after the client's resolution (the middleware package's
// NewOrigin, mounted inside New or behind ConnContext) is not a carrier of
// the client: FromRequest and HoldRequest look past it to the stored Result
// or the connection's node, and never refuse the request with ErrNoTrust
// because an Origin was found first.
func TestFromRequestPastOrigin(t *testing.T) {
	r := MustNew(Config{TrustedProxies: private10, Header: "X-Forwarded-For"})
	bg := context.Background()
	xff := http.Header{"X-Forwarded-For": {"6.6.6.6, 198.51.100.7"}}
	o := Origin{Scheme: "https", Host: "example.org"}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"stored Result, then Origin", NewOriginContext(NewContext(NewConnContext(bg, r, Transport{Peer: ap("10.0.0.1:1")}), Result{Client: addr("198.51.100.1")}), o), "198.51.100.1"},
		{"connection's node, then Origin: walked", NewOriginContext(NewConnContext(bg, r, Transport{Peer: ap("10.0.0.1:1")}), o), "198.51.100.7"},
		{"connection's node, then Origin: named by the connection", NewOriginContext(NewConnContext(bg, r, Transport{Peer: ap("203.0.113.9:1")}), o), "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := connRequest(tc.ctx, xff)
			res, err := FromRequest(req)
			require.NoError(t, err)
			assert.Equal(t, addr(tc.want), res.Client)
			h := HoldRequest(req, nil)
			defer h.Release()
			require.NoError(t, h.Err)
			assert.Equal(t, addr(tc.want), h.Result.Client, "HoldRequest")
			got, ok := OriginFromContext(tc.ctx)
			require.True(t, ok)
			assert.Equal(t, o, got, "the Origin is still found")
		})
	}
	_, err := FromRequest(connRequest(NewOriginContext(bg, o), xff))
	assert.ErrorIs(t, err, ErrNoTrust, "an Origin alone carries no trust")
}
