package middleware

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// nothing is a handler that does nothing.
var nothing = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

var xfOrigin = clientip.OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Prefix: "X-Forwarded-Prefix",
	AllowedHosts: []string{"example.com"}}

// originChain is the resolve middleware around the origin middleware
// around next.
func originChain(t *testing.T, cfg OriginConfig, next http.Handler) http.Handler {
	t.Helper()
	if cfg.Reader == nil {
		cfg.Reader = clientip.MustNewOriginReader(xfOrigin)
	}
	resolve, err := New(Config{Trust: testResolver(t)})
	require.NoError(t, err)
	origin, err := NewOrigin(cfg)
	require.NoError(t, err)
	return resolve(origin(next))
}

// seenRequest is what a handler saw of the request and its origin.
type seenRequest struct {
	origin                clientip.Origin
	ok                    bool
	scheme, urlHost, host string
	tls                   bool
}

func recordOrigin(into *seenRequest) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, ok := clientip.OriginFromContext(r.Context())
		*into = seenRequest{o, ok, r.URL.Scheme, r.URL.Host, r.Host, r.TLS != nil}
	})
}

func TestOriginMiddleware(t *testing.T) {
	proxied := func() *http.Request {
		r := request("10.0.0.1:4000", "198.51.100.7")
		r.Host = "backend:8080"
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("X-Forwarded-Host", "example.com")
		r.Header.Set("X-Forwarded-Prefix", "/app/")
		return r
	}
	want := clientip.Origin{Scheme: "https", Host: "example.com", Prefix: "/app"}

	t.Run("stored in the context; the request itself left alone", func(t *testing.T) {
		var seen seenRequest
		req := proxied()
		originChain(t, OriginConfig{}, recordOrigin(&seen)).ServeHTTP(httptest.NewRecorder(), req)
		require.True(t, seen.ok)
		assert.Equal(t, want, seen.origin)
		assert.Equal(t, seenRequest{origin: want, ok: true, scheme: "http", urlHost: "example", host: "backend:8080"}, seen,
			"as httptest.NewRequest made it")
	})
	t.Run("Apply: scheme and host in the request copy, TLS untouched, the caller's request unchanged", func(t *testing.T) {
		var seen seenRequest
		req := proxied()
		url := req.URL
		before := *req.URL
		originChain(t, OriginConfig{Apply: true}, recordOrigin(&seen)).ServeHTTP(httptest.NewRecorder(), req)
		assert.Equal(t, seenRequest{origin: want, ok: true, scheme: "https", urlHost: "example.com", host: "example.com"}, seen)
		assert.Same(t, url, req.URL)
		assert.Equal(t, before, *req.URL, "the caller's URL")
		assert.Equal(t, "backend:8080", req.Host, "the caller's Host")
	})
	t.Run("spoof: a direct client's forged headers do not change its origin", func(t *testing.T) {
		var seen seenRequest
		req := request("203.0.113.9:5000")
		req.Host = "example.com"
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "evil.example")
		originChain(t, OriginConfig{Apply: true}, recordOrigin(&seen)).ServeHTTP(httptest.NewRecorder(), req)
		assert.Equal(t, clientip.Origin{Scheme: "http", Host: "example.com"}, seen.origin)
		assert.Equal(t, "http", seen.scheme)
	})
	t.Run("an unreadable origin is answered with 400, never echoing the client", func(t *testing.T) {
		req := proxied()
		req.Header.Set("X-Forwarded-Host", "evil.example")
		w := httptest.NewRecorder()
		called := false
		originChain(t, OriginConfig{}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).ServeHTTP(w, req)
		assert.False(t, called)
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, "cannot determine the request's origin: host not allowed in X-Forwarded-Host\n", w.Body.String())
		assert.NotContains(t, w.Body.String(), "evil")
	})
	t.Run("OnError sees the error", func(t *testing.T) {
		req := proxied()
		req.Header.Del("X-Forwarded-Proto")
		var got error
		h := originChain(t, OriginConfig{OnError: func(w http.ResponseWriter, _ *http.Request, res clientip.Result, err error) {
			got = err
			w.WriteHeader(http.StatusTeapot)
		}}, nothing)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		assert.Equal(t, http.StatusTeapot, w.Code)
		assert.ErrorIs(t, got, clientip.ErrOriginMissing)
	})
	t.Run("without the resolve middleware: 500, ErrNoResult", func(t *testing.T) {
		origin, err := NewOrigin(OriginConfig{Reader: clientip.MustNewOriginReader(xfOrigin)})
		require.NoError(t, err)
		w := httptest.NewRecorder()
		origin(nothing).ServeHTTP(w, proxied())
		assert.Equal(t, http.StatusInternalServerError, w.Code)
		_, err = ReadOrigin(clientip.MustNewOriginReader(xfOrigin), proxied())
		assert.ErrorIs(t, err, ErrNoResult)
	})
	t.Run("a request over TLS is https", func(t *testing.T) {
		var seen seenRequest
		req := request("203.0.113.9:5000")
		req.Host = "example.com"
		req.TLS = &tls.ConnectionState{}
		originChain(t, OriginConfig{}, recordOrigin(&seen)).ServeHTTP(httptest.NewRecorder(), req)
		assert.Equal(t, clientip.Origin{Scheme: "https", Host: "example.com"}, seen.origin)
	})
	_, err := NewOrigin(OriginConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig, "Reader is required")
}

// TestReadOriginProxySSL: the load balancer that reported the client in a
// PROXY header also says, in its SSL TLV, whether it terminated TLS for it.
func TestReadOriginProxySSL(t *testing.T) {
	lb := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("192.0.2.10/32, 10.0.0.0/8"), Header: "X-Forwarded-For"})
	reader := clientip.MustNewOriginReader(clientip.OriginConfig{})
	sslTLVs := func(client uint8) proxyproto.TLVs {
		tlvs, err := proxyproto.NewTLVs(proxyproto.SSL{Client: client, Version: "TLSv1.3"}.TLV())
		require.NoError(t, err)
		return tlvs
	}
	tests := []struct {
		name   string
		source string // the PROXY source
		xff    string
		tlvs   proxyproto.TLVs
		want   string
	}{
		{name: "PROXY client, SSL TLV with the TLS bit: https", source: "198.51.100.7:5000", tlvs: sslTLVs(proxyproto.SSLClientTLS), want: "https"},
		{name: "PROXY client, SSL TLV without the TLS bit: http", source: "198.51.100.7:5000", tlvs: sslTLVs(0), want: "http"},
		{name: "PROXY client, no SSL TLV: http", source: "198.51.100.7:5000", want: "http"},
		{name: "a client further out, in X-Forwarded-For: the balancer's TLS was not the client's", source: "10.0.0.5:5000", xff: "198.51.100.7",
			tlvs: sslTLVs(proxyproto.SSLClientTLS), want: "http"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := proxyproto.Facts{Peer: netip.MustParseAddrPort("192.0.2.10:1"), Version: 2, Command: proxyproto.CommandProxy,
				Source: netip.MustParseAddrPort(tc.source), Destination: netip.MustParseAddrPort("192.0.2.1:443"), TLVs: tc.tlvs}
			req := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
			ctx := clientip.NewTransportContext(proxyproto.NewContext(req.Context(), f), f.Transport())
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			req = req.WithContext(ctx)
			res, err := lb.ResolveRequest(req)
			require.NoError(t, err)
			req = req.WithContext(clientip.NewContext(ctx, res))
			o, err := ReadOrigin(reader, req)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.Scheme)
		})
	}
}

func TestOriginMiddlewareAllocs(t *testing.T) {
	r := request("10.0.0.1:4000", "198.51.100.7")
	r.Header.Set("X-Forwarded-Proto", "https")
	r.Header.Set("X-Forwarded-Host", "example.com")
	res, err := testResolver(t).ResolveRequest(r)
	require.NoError(t, err)
	r = r.WithContext(clientip.NewContext(r.Context(), res))
	for _, tc := range []struct {
		apply bool
		max   float64
	}{{false, 2}, {true, 3}} {
		origin, err := NewOrigin(OriginConfig{Reader: clientip.MustNewOriginReader(xfOrigin), Apply: tc.apply})
		require.NoError(t, err)
		h := origin(nothing)
		w := discard{}
		assert.LessOrEqual(t, testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }), tc.max, "Apply %v", tc.apply)
	}
}

// Behind the origin middleware, the middlewares and handlers that read the
// client on demand still find it: clientip.FromRequest returns the Result
// New stored, and RequireClient (with the connection's trust) admits the
// request, instead of taking the Origin's context node for a server whose
// connections carry no trust (500, ErrNoTrust).
func TestOriginThenFromRequest(t *testing.T) {
	requireClient, err := RequireClient(Config{})
	require.NoError(t, err)
	var got clientip.Result
	var gotErr error
	h := originChain(t, OriginConfig{}, requireClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotErr = clientip.FromRequest(r)
	})))
	req := connRequest(testResolver(t), "10.0.0.1:4000", "198.51.100.7")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "example.com")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NoError(t, gotErr)
	assert.Equal(t, addr("198.51.100.7"), got.Client)
}
