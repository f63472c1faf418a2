package middleware

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// A spoofing trick on a chain with an ingress that writes X-Forwarded-For
// and a PROXY load balancer, both trusted: a connection from the load
// balancer without a PROXY header (allowed for its health checks) carries
// its client's bytes as they came, X-Forwarded-For included. With the load
// balancer listed in Upstreams, a request on it names no client
// (clientip.ErrAllTrusted, the load balancer as Via) instead of the address
// the client wrote; a request on a connection with a PROXY header still
// names the header's source.
func TestHeaderlessUpstreamRequestNamesNoClient(t *testing.T) {
	res, err := clientip.New(lbConfig("127.0.0.1/32"))
	require.NoError(t, err)
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{
		Trust: res, Upstreams: clientip.MustParsePrefixSet("127.0.0.1/32"), Headerless: proxyproto.HeaderlessAllow,
	})
	require.NoError(t, err)
	type seen struct {
		res clientip.Result
		err error
	}
	got := make(chan seen, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, err := clientip.FromRequest(r)
			got <- seen{res, err}
		}),
		ConnContext: ConnContext(res),
	}
	go srv.Serve(pl)
	t.Cleanup(func() { srv.Close() })

	get := func(c net.Conn) seen {
		t.Helper()
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.9\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		return <-got
	}

	c, err := net.Dial("tcp", pl.Addr().String())
	require.NoError(t, err)
	s := get(c)
	require.ErrorIs(t, s.err, clientip.ErrAllTrusted, "client %s", s.res.Client)
	assert.Equal(t, "127.0.0.1", s.res.Via.String(), "the load balancer is the last hop")

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	c, err = proxyproto.DialContext(t.Context(), d, "tcp", pl.Addr().String(), proxyHeader("198.51.100.7:5555"))
	require.NoError(t, err)
	s = get(c)
	require.NoError(t, s.err)
	assert.Equal(t, "198.51.100.7", s.res.Client.String(), "with a header, its source")
}
