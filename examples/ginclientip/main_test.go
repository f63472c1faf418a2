package main

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGin(t *testing.T) {
	e, err := newEngine(clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	}))
	require.NoError(t, err)
	tests := []struct {
		name, peer, xff string
		wantCode        int
		wantBody        string
	}{
		{"through a proxy", "10.0.0.2:4000", "6.6.6.6, 203.0.113.7", 200, `{"client":"203.0.113.7","source":"x-forwarded-for"}`},
		{"direct with a forged header", "203.0.113.9:4000", "198.51.100.7", 200, `{"client":"203.0.113.9","source":"socket"}`},
		{"unresolvable", "10.0.0.2:4000", "203.0.113.7, bogus", 400, `{"error":"cannot determine the client address"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/whoami", nil)
			req.RemoteAddr = tc.peer
			req.Header.Set("X-Forwarded-For", tc.xff)
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			assert.Equal(t, tc.wantCode, rec.Code, "body %s", rec.Body.String())
			assert.Equal(t, tc.wantBody, rec.Body.String())
		})
	}
}

// The engine trusts no proxy, as the package documentation says: gin's own
// c.ClientIP() returns the socket peer whatever forwarding headers a client
// sends, even from an address sourceip trusts.
func TestGinClientIPIsThePeer(t *testing.T) {
	e, err := newEngine(clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	}))
	require.NoError(t, err)
	e.GET("/ginip", func(c *gin.Context) { c.String(200, c.ClientIP()) })
	for _, peer := range []string{"10.0.0.2:4000", "203.0.113.9:4000"} {
		req := httptest.NewRequest("GET", "/ginip", nil)
		req.RemoteAddr = peer
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		req.Header.Set("X-Real-IP", "198.51.100.8")
		req.Header.Set("X-Appengine-Remote-Addr", "198.51.100.9")
		req.Header.Set("CF-Connecting-IP", "198.51.100.10")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		require.Equal(t, 200, rec.Code, rec.Body.String())
		assert.Equal(t, peer[:len(peer)-len(":4000")], rec.Body.String())
	}
}

// Gin users call the resolver on the request inside a gin middleware.
func Example() {
	e, _ := newEngine(clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	}))
	req := httptest.NewRequest("GET", "/whoami", nil)
	req.RemoteAddr = "10.0.0.2:4000"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	fmt.Println(rec.Body.String())
	// Output:
	// {"client":"203.0.113.7","source":"x-forwarded-for"}
}
