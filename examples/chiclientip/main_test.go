package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

func testRouter(t testing.TB) http.Handler {
	t.Helper()
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	h, err := newRouter(r, clientip.MustParsePrefixSet("198.51.100.0/24"), nil)
	require.NoError(t, err)
	return h
}

// TestChiRouting mounts the middleware on a chi router and a policy on a
// route group: routing, URL parameters and the resolved client all survive
// the request copies, and refusals carry their plain-text reasons.
func TestChiRouting(t *testing.T) {
	h := testRouter(t)
	tests := []struct {
		name     string
		path     string
		peer     string
		xff      string
		wantCode int
		wantBody string
	}{
		{name: "route with parameter via proxy", path: "/hello/ada", peer: "10.0.0.2:4000", xff: "6.6.6.6, 203.0.113.7",
			wantCode: 200, wantBody: "hello ada from 203.0.113.7 (x-forwarded-for)\n"},
		{name: "direct client's header ignored", path: "/hello/bob", peer: "203.0.113.9:4000", xff: "198.51.100.7",
			wantCode: 200, wantBody: "hello bob from 203.0.113.9 (socket)\n"},
		{name: "admin from the office", path: "/admin/users", peer: "10.0.0.2:4000", xff: "198.51.100.7",
			wantCode: 200, wantBody: "admin users for 198.51.100.7\n"},
		{name: "admin from elsewhere", path: "/admin/users", peer: "10.0.0.2:4000", xff: "203.0.113.7",
			wantCode: 403, wantBody: "forbidden: the client address is not in an allowed source range\n"},
		{name: "admin with a forged office address", path: "/admin/users", peer: "203.0.113.9:4000", xff: "198.51.100.7",
			wantCode: 403, wantBody: "forbidden: the client address is not in an allowed source range\n"},
		{name: "unresolvable chain", path: "/hello/eve", peer: "10.0.0.2:4000", xff: "198.51.100.7, not-an-ip",
			wantCode: 400, wantBody: "cannot determine the client address: malformed address in X-Forwarded-For\n"},
		{name: "unknown route still resolved first", path: "/nope", peer: "10.0.0.2:4000", xff: "203.0.113.7",
			wantCode: 404, wantBody: "404 page not found\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tc.path, nil)
			req.RemoteAddr = tc.peer
			req.Header.Set("X-Forwarded-For", tc.xff)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.wantCode, rec.Code, "body %q", rec.Body.String())
			assert.Equal(t, tc.wantBody, rec.Body.String())
		})
	}
}

// TestChiRealServer runs the router behind httptest's server, so the socket
// peer is real (loopback, not trusted here).
func TestChiRealServer(t *testing.T) {
	srv := httptest.NewServer(testRouter(t))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/hello/ada", nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "hello ada from 127.0.0.1 (socket)\n", string(body))
}

// The middleware in a chi router, for chi users.
func Example() {
	resolve, _ := middleware.New(middleware.Config{
		Trust: clientip.MustNew(clientip.Config{
			TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
			Header:         "X-Forwarded-For",
		}),
	})
	r := chi.NewRouter()
	r.Use(resolve)
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		fmt.Fprintln(w, res)
	})

	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.2:4000"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.3")
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	fmt.Print(rec.Body.String())
	// Output:
	// 203.0.113.7 from x-forwarded-for hop 2 via 10.0.0.3 (peer 10.0.0.2:4000)
}
