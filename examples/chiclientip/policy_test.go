package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// peerConn is a connection seen from a given peer address.
type peerConn struct {
	net.Conn
	peer netip.AddrPort
}

func (c peerConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.peer) }

// TestChiPolicy judges chi routes by the pattern chi matched, read through
// the policy's route function: the first rule that names the route decides,
// Deny before Allow, and a route no rule names is refused by the Default.
// Requests carry the context a server with ConnContext gives them.
func TestChiPolicy(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"})
	h, err := newPolicyRouter(clientip.MustParsePrefixSet("198.51.100.0/24"), clientip.MustParsePrefixSet("198.51.100.66/32, 203.0.113.66/32"), nil)
	require.NoError(t, err)
	tests := []struct {
		name, path, peer, xff string
		wantCode              int
		wantBody              string
	}{
		{"route with a parameter, rule by its pattern", "/hello/ada", "10.0.0.2:4000", "203.0.113.7", 200, "hello ada from 203.0.113.7 (x-forwarded-for)\n"},
		{"deny list of the same rule", "/hello/eve", "10.0.0.2:4000", "203.0.113.66", 403, "forbidden: the client address is in a denied source range\n"},
		{"exact route before the prefix rule", "/admin/audit", "10.0.0.2:4000", "198.51.100.7", 200, "audit log for 198.51.100.7\n"},
		{"the exact rule's deny list", "/admin/audit", "10.0.0.2:4000", "198.51.100.66", 403, "forbidden: the client address is in a denied source range\n"},
		{"prefix rule for the rest of /admin", "/admin/users", "10.0.0.2:4000", "198.51.100.66", 200, "admin users for 198.51.100.66\n"},
		{"prefix rule refuses outside the office", "/admin/users", "10.0.0.2:4000", "203.0.113.7", 403, "forbidden: the client address is not in an allowed source range\n"},
		{"forged office address from a direct client", "/admin/users", "203.0.113.9:4000", "198.51.100.7", 403, "forbidden: the client address is not in an allowed source range\n"},
		{"a route no rule names: the Default refuses", "/unlisted", "10.0.0.2:4000", "198.51.100.7", 403, "forbidden: the client address is not in an allowed source range\n"},
		{"unresolvable chain", "/hello/bob", "10.0.0.2:4000", "198.51.100.7, not-an-ip", 400, "cannot determine the client address: malformed address in X-Forwarded-For\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := middleware.ConnContext(trust)(context.Background(), peerConn{peer: netip.MustParseAddrPort(tc.peer)})
			req := httptest.NewRequestWithContext(ctx, "GET", tc.path, nil)
			req.Header.Set("X-Forwarded-For", tc.xff)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.wantCode, rec.Code)
			assert.Equal(t, tc.wantBody, rec.Body.String())
		})
	}
}

// A policy mounted before routing sees no route pattern: chi has not matched
// one yet, so the Default decides and every route is refused. It fails
// closed, loudly.
func TestChiPolicyBeforeRouting(t *testing.T) {
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetNames,
		Rules:   []middleware.Rule{{Name: "hello", Target: "/hello/{name}", Allow: clientip.MustParsePrefixSet("0.0.0.0/0")}},
		Route:   chiRoute,
		Trust:   clientip.MustNew(clientip.Config{}),
	})
	require.NoError(t, err)
	r := chi.NewRouter()
	r.Use(policy.Handler)
	r.Get("/hello/{name}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	req := httptest.NewRequest("GET", "/hello/ada", nil)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusForbidden, rec.Code)
}

// chi reports a group's "/" route, and a route registered with a trailing
// slash, without the slash: GET /admin/ in r.Route("/admin") is "/admin".
// A rule "/admin/*" judges it, as chi's own mount at "/admin/*" serves it,
// instead of leaving the admin index to a permissive Default.
func TestChiPolicyGroupIndex(t *testing.T) {
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetNames,
		Rules:   []middleware.Rule{{Name: "admin", Target: "/admin/*", Allow: clientip.MustParsePrefixSet("198.51.100.0/24")}},
		Default: middleware.Rule{Name: "public", Allow: clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")},
		Route:   chiRoute,
		Trust:   clientip.MustNew(clientip.Config{}),
	})
	require.NoError(t, err)
	r := chi.NewRouter()
	r.Route("/admin", func(r chi.Router) {
		r = r.With(policy.Handler)
		r.Get("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "admin index") })
		r.Get("/users", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "admin users") })
	})
	r.With(policy.Handler).Get("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	for _, tc := range []struct {
		path, peer string
		wantCode   int
	}{
		{"/admin/", "203.0.113.7:5000", http.StatusForbidden},
		{"/admin", "203.0.113.7:5000", http.StatusForbidden},
		{"/admin/users", "203.0.113.7:5000", http.StatusForbidden},
		{"/admin/", "198.51.100.7:5000", http.StatusOK},
		{"/hello", "203.0.113.7:5000", http.StatusOK},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		req.RemoteAddr = tc.peer
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		assert.Equal(t, tc.wantCode, rec.Code, "%s from %s", tc.path, tc.peer)
	}
}

// The -policy server end to end: a real http.Server with ConnContext, chi and
// the route policy.
func TestChiPolicyServer(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback(), Header: "X-Forwarded-For"})
	h, err := newPolicyRouter(clientip.MustParsePrefixSet("198.51.100.0/24"), clientip.PrefixSet{}, nil)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = middleware.ConnContext(trust)
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		xff      string
		wantCode int
	}{{"198.51.100.7", 200}, {"203.0.113.7", 403}} {
		req, _ := http.NewRequest("GET", srv.URL+"/admin/users", nil)
		req.Header.Set("X-Forwarded-For", tc.xff)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, tc.wantCode, resp.StatusCode, tc.xff)
	}
}
