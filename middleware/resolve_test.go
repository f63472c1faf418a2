package middleware

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

func TestNewRequiresResolver(t *testing.T) {
	mw, err := New(Config{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Nil(t, mw)
	// A *clientip.Store variable never set: a typed nil Trust, whose
	// Resolver dereferenced it, and New panicked.
	mw, err = New(Config{Trust: (*clientip.Store)(nil)})
	assert.ErrorIs(t, err, ErrInvalidConfig, "a nil *clientip.Store")
	assert.Nil(t, mw)
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		req      *http.Request
		wantCode int
		wantBody string // exact body
		want     string // client in the context ("" when the request is refused)
		src      clientip.Source
		masq     bool
		wantErr  error // error the observer sees
	}{
		{name: "direct client's forged XFF ignored", req: request("203.0.113.9:5000", "6.6.6.6"),
			wantCode: 200, wantBody: "203.0.113.9", want: "203.0.113.9", src: clientip.SourceSocket},
		{name: "rightmost untrusted XFF entry", req: request("10.0.0.1:5000", "6.6.6.6, 198.51.100.7, 10.0.0.2"),
			wantCode: 200, wantBody: "198.51.100.7", want: "198.51.100.7", src: clientip.SourceXForwardedFor},
		{name: "repeated XFF lines merge", req: request("10.0.0.1:5000", "6.6.6.6", "198.51.100.7"),
			wantCode: 200, wantBody: "198.51.100.7", want: "198.51.100.7", src: clientip.SourceXForwardedFor},
		{name: "IPv6 behind IPv6 proxy", req: request("[fd00::1]:5000", "2001:db8::7"),
			wantCode: 200, wantBody: "2001:db8::7", want: "2001:db8::7", src: clientip.SourceXForwardedFor},
		{name: "masqueraded node passes on flagged", req: request("192.168.1.10:5000"),
			wantCode: 200, wantBody: "192.168.1.10", want: "192.168.1.10", src: clientip.SourceSocket, masq: true,
			wantErr: clientip.ErrMasqueraded},
		{name: "malformed hop is 400", req: request("10.0.0.1:5000", "198.51.100.7, <script>"),
			wantCode: 400, wantBody: "cannot determine the client address: malformed address in X-Forwarded-For\n",
			wantErr: clientip.ErrMalformed},
		{name: "all trusted is 400", req: request("10.0.0.1:5000", "10.0.0.2"),
			wantCode: 400, wantBody: "cannot determine the client address: every hop is trusted in X-Forwarded-For\n",
			wantErr: clientip.ErrAllTrusted},
		{name: "trusted peer without header is 400", req: request("10.0.0.1:5000"),
			wantCode: 400, wantBody: "cannot determine the client address: every hop is trusted\n",
			wantErr: clientip.ErrAllTrusted},
		{name: "unspecified is 400", req: request("10.0.0.1:5000", "0.0.0.0"),
			wantCode: 400, wantBody: "cannot determine the client address: unspecified address is not a client in X-Forwarded-For\n",
			wantErr: clientip.ErrUnspecified},
		{name: "unreadable RemoteAddr is 400", req: request("not-an-address"),
			wantCode: 400, wantBody: "cannot determine the client address: socket peer has no IP address\n",
			wantErr: clientip.ErrNoAddress},
		{name: "oversized header is 400", req: request("10.0.0.1:5000", strings.Repeat("1.2.3.4, ", 2000)),
			wantCode: 400, wantBody: "cannot determine the client address: header too large in X-Forwarded-For\n",
			wantErr: clientip.ErrHeaderTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			mw, err := New(Config{Trust: testResolver(t), Observer: obs})
			require.NoError(t, err)
			before := *tc.req
			rec := httptest.NewRecorder()
			mw(echo).ServeHTTP(rec, tc.req)
			assert.Equal(t, tc.wantCode, rec.Code)
			assert.Equal(t, tc.wantBody, rec.Body.String())
			if tc.wantCode != 200 {
				assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
				assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
			}
			// The caller's request is untouched.
			assert.Equal(t, before.RemoteAddr, tc.req.RemoteAddr, "middleware modified the caller's request")
			assert.True(t, tc.req.Context() == before.Context(), "middleware modified the caller's request")
			got := obs.take()
			require.Len(t, got, 1)
			o := got[0]
			require.Equal(t, "resolve", o.kind)
			if tc.wantErr == nil {
				assert.NoError(t, o.err)
			} else {
				assert.ErrorIs(t, o.err, tc.wantErr)
			}
			assert.Equal(t, addr(tc.want), o.res.Client, "observed client")
			assert.Equal(t, tc.masq, o.res.Masqueraded, "observed masquerade flag")
			if tc.want != "" {
				assert.Equal(t, tc.src, o.res.Source)
				assert.True(t, o.inCtx, "the observer's context carries no Result")
				assert.Equal(t, o.res, o.ctxRes, "the observer's context carries another Result")
			} else {
				assert.False(t, o.inCtx, "a failed resolution's context carries a Result")
			}
		})
	}
}

func TestResolveOnError(t *testing.T) {
	var gotRes clientip.Result
	var gotErr error
	mw, err := New(Config{
		Trust: testResolver(t),
		OnError: func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) {
			gotRes, gotErr = res, err
			w.WriteHeader(http.StatusTeapot)
		},
	})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	mw(echo).ServeHTTP(rec, request("10.0.0.1:5000", "198.51.100.7, bogus"))
	assert.Equal(t, http.StatusTeapot, rec.Code)
	var ce *clientip.ChainError
	require.ErrorAs(t, gotErr, &ce)
	assert.ErrorIs(t, gotErr, clientip.ErrMalformed)
	assert.Equal(t, "X-Forwarded-For", ce.Header)
	assert.Equal(t, 1, ce.Hop)
	assert.Equal(t, "10.0.0.1:5000", gotRes.Peer.String())
	assert.False(t, gotRes.Client.IsValid(), "OnError result names a client: %v", gotRes)
}

func TestResolveSetRemoteAddr(t *testing.T) {
	tests := []struct {
		name string
		req  *http.Request
		want string
	}{
		{name: "socket keeps its port", req: request("203.0.113.9:5000"), want: "203.0.113.9:5000"},
		{name: "header client has port 0", req: request("10.0.0.1:5000", "198.51.100.7"), want: "198.51.100.7:0"},
		{name: "IPv6 header client", req: request("[fd00::1]:5000", "2001:db8::7"), want: "[2001:db8::7]:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, set := range []bool{false, true} {
				mw, err := New(Config{Trust: testResolver(t), SetRemoteAddr: set})
				require.NoError(t, err)
				orig := tc.req.RemoteAddr
				var seen string
				mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr })).
					ServeHTTP(httptest.NewRecorder(), tc.req)
				want := orig
				if set {
					want = tc.want
				}
				assert.Equal(t, want, seen, "SetRemoteAddr=%v: the handler's RemoteAddr", set)
				assert.Equal(t, orig, tc.req.RemoteAddr, "the caller's RemoteAddr changed")
			}
		})
	}
}

// Review finding: with SetRemoteAddr, a masqueraded result (Kubernetes
// externalTrafficPolicy: Cluster, the node's SNAT address standing in for a
// lost client) was written into RemoteAddr as the client's, so rate limiters
// and logs downstream, which cannot see the flag, took the node for the
// client. With SetRemoteAddr such a request is refused by OnError with an
// error wrapping clientip.ErrMasqueraded (403 by default); without it, the
// request goes on as before, RemoteAddr untouched and the flag in the
// Result, for a Policy to judge.
func TestSetRemoteAddrMasqueraded(t *testing.T) {
	tests := []struct {
		name string
		req  func() *http.Request
	}{
		{name: "node as the socket peer", req: func() *http.Request { return request("192.168.1.10:5000") }},
		{name: "node reported by a trusted proxy", req: func() *http.Request { return request("10.0.0.1:5000", "192.168.1.10") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			served := false
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served = true })

			obs := &recordingObserver{}
			mw, err := New(Config{Trust: testResolver(t), SetRemoteAddr: true, Observer: obs})
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			mw(next).ServeHTTP(rec, tc.req())
			assert.False(t, served, "a masqueraded request reached the handler with the node in RemoteAddr")
			assert.Equal(t, http.StatusForbidden, rec.Code)
			assert.Equal(t, "forbidden: the client address was masqueraded by a node and cannot be verified\n", rec.Body.String())
			require.Len(t, obs.obs, 1)
			assert.ErrorIs(t, obs.obs[0].err, clientip.ErrMasqueraded, "observed")

			var gotRes clientip.Result
			var gotErr error
			mw, err = New(Config{Trust: testResolver(t), SetRemoteAddr: true,
				OnError: func(w http.ResponseWriter, _ *http.Request, res clientip.Result, err error) {
					gotRes, gotErr = res, err
				}})
			require.NoError(t, err)
			mw(next).ServeHTTP(httptest.NewRecorder(), tc.req())
			assert.False(t, served)
			assert.ErrorIs(t, gotErr, clientip.ErrMasqueraded, "OnError's error")
			assert.True(t, gotRes.Masqueraded, "OnError's Result")

			mw, err = New(Config{Trust: testResolver(t)})
			require.NoError(t, err)
			req := tc.req()
			var seen *http.Request
			mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r })).ServeHTTP(httptest.NewRecorder(), req)
			require.NotNil(t, seen, "without SetRemoteAddr a masqueraded request goes on")
			assert.Equal(t, req.RemoteAddr, seen.RemoteAddr)
			res, ok := clientip.FromContext(seen.Context())
			require.True(t, ok)
			assert.True(t, res.Masqueraded)
		})
	}
}

// TestResolveAllocs pins the allocation budget: at most three per resolved
// request (context node, boxed Result, request copy), with and without an
// observer, and one more for SetRemoteAddr.
func TestResolveAllocs(t *testing.T) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	w := httptest.NewRecorder()
	tests := []struct {
		name string
		cfg  Config
		req  *http.Request
		max  float64
	}{
		{name: "direct", cfg: Config{}, req: request("203.0.113.9:5000", "6.6.6.6"), max: 2},
		{name: "xff", cfg: Config{}, req: request("10.0.0.1:5000", "6.6.6.6, 198.51.100.7, 10.0.0.2"), max: 2},
		{name: "masqueraded", cfg: Config{}, req: request("192.168.1.10:5000"), max: 2},
		{name: "observer", cfg: Config{Observer: nopObserver{}}, req: request("10.0.0.1:5000", "198.51.100.7"), max: 2},
		{name: "SetRemoteAddr", cfg: Config{SetRemoteAddr: true}, req: request("10.0.0.1:5000", "198.51.100.7"), max: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Trust = testResolver(t)
			mw, err := New(tc.cfg)
			require.NoError(t, err)
			h := mw(noop)
			n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, tc.req) })
			assert.LessOrEqual(t, n, tc.max, "allocations per request")
		})
	}
}

// retainedBody is a request body large enough to matter if it leaked.
type retainedBody struct {
	io.Reader
	big [1 << 16]byte
}

func (*retainedBody) Close() error { return nil }

// A context the handler keeps beyond the request (context.WithoutCancel for
// background audit work, say) must not keep the request, and so its body and
// buffers, reachable: the Result's context node holds no pointer back to the
// request copy. Allocating the two together would save an allocation and break
// this.
func TestContextDoesNotRetainRequest(t *testing.T) {
	mw, err := New(Config{Trust: testResolver(t)})
	require.NoError(t, err)
	var kept context.Context
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		kept = context.WithoutCancel(r.Context())
	}))
	body := &retainedBody{Reader: strings.NewReader("")}
	collected := weak.Make(body)
	req := request("10.0.0.1:5000", "198.51.100.7")
	req.Body = body
	h.ServeHTTP(httptest.NewRecorder(), req)
	req, body = nil, nil
	runtime.GC()
	runtime.GC()
	assert.Nil(t, collected.Value(), "the kept context keeps the request's body reachable")
	res, ok := clientip.FromContext(kept)
	require.True(t, ok, "the kept context has no Result")
	assert.Equal(t, addr("198.51.100.7"), res.Client)
	runtime.KeepAlive(kept)
}
