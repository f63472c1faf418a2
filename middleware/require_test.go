package middleware

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// RequireClient refuses what New refuses and passes the caller's own request
// on: handlers read the client with FromRequest.
func TestRequireClient(t *testing.T) {
	trust := testResolver(t)
	tests := []struct {
		name     string
		cfg      Config
		req      func() *http.Request
		wantCode int
		wantBody string
		wantErr  error // observed
	}{
		{name: "client from the connection", req: func() *http.Request { return connRequest(trust, "10.0.0.1:5000", "198.51.100.7") },
			wantCode: 200, wantBody: "198.51.100.7"},
		{name: "direct client's forged XFF ignored", req: func() *http.Request { return connRequest(trust, "203.0.113.9:5000", "6.6.6.6") },
			wantCode: 200, wantBody: "203.0.113.9"},
		{name: "masqueraded node passes on, flagged", req: func() *http.Request { return connRequest(trust, "192.168.1.10:5000", "") },
			wantCode: 200, wantBody: "192.168.1.10", wantErr: clientip.ErrMasqueraded},
		{name: "malformed chain: 400", req: func() *http.Request { return connRequest(trust, "10.0.0.1:5000", "bogus") },
			wantCode: 400, wantBody: "cannot determine the client address: malformed address in X-Forwarded-For\n", wantErr: clientip.ErrMalformed},
		{name: "no trust on the connection: 500, the server's mistake", req: func() *http.Request { return request("198.51.100.7:5000") },
			wantCode: 500, wantBody: "internal server error: the server cannot resolve client addresses\n", wantErr: clientip.ErrNoTrust},
		{name: "own Trust resolves from RemoteAddr", cfg: Config{Trust: trust}, req: func() *http.Request { return request("10.0.0.1:5000", "198.51.100.7") },
			wantCode: 200, wantBody: "198.51.100.7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			tc.cfg.Observer = obs
			mw, err := RequireClient(tc.cfg)
			require.NoError(t, err)
			req := tc.req()
			var seen *http.Request
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = r
				res, _ := clientip.FromRequest(r)
				if tc.cfg.Trust != nil {
					res, _ = tc.cfg.Trust.Resolver().ResolveRequest(r)
				}
				w.Write([]byte(res.Client.String()))
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.wantCode, rec.Code)
			assert.Equal(t, tc.wantBody, rec.Body.String())
			if tc.wantCode == 200 {
				assert.Same(t, req, seen, "the request was copied")
			}
			got := obs.take()
			require.Len(t, got, 1)
			assert.Equal(t, "resolve", got[0].kind)
			assert.ErrorIs(t, got[0].err, tc.wantErr)
			assert.False(t, got[0].inCtx, "a Result in the context")
		})
	}
}

func TestRequireClientConfig(t *testing.T) {
	_, err := RequireClient(Config{SetRemoteAddr: true})
	assert.ErrorIs(t, err, ErrInvalidConfig, "SetRemoteAddr needs a copy")
	_, err = RequireClient(Config{Trust: nilTrust{}})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestRequireClientAllocs(t *testing.T) {
	mw, err := RequireClient(Config{})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { clientip.FromRequest(r) }))
	w := httptest.NewRecorder()
	for _, req := range []*http.Request{
		connRequest(testResolver(t), "203.0.113.9:5000", "6.6.6.6"),
		connRequest(testResolver(t), "10.0.0.1:5000", "198.51.100.7, 10.0.0.2"),
	} {
		assert.Zero(t, testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) }))
	}
}

// connRequest returns a request on a TCP connection from peer to a server
// whose ConnContext is ConnContext(trust), with X-Forwarded-For xff (none
// when empty).
func connRequest(trust clientip.Trust, peer, xff string) *http.Request {
	req := httptest.NewRequestWithContext(connContext(trust, peer), "GET", "http://example.org/", nil)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	return req
}
