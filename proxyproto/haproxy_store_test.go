package proxyproto

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// TestHAProxyStoreSwap puts the real HAProxy, sending PROXY v2 from
// haproxyAddr, in front of a listener whose trust is a clientip.Store, and
// swaps the store between connections, as an operator replacing a load
// balancer would: while HAProxy is trusted, a client's connection reaches
// the server with the client's address; after a swap that removes HAProxy,
// its next connection is refused at the header and never served; a swap
// that trusts it again restores service. A connection HAProxy opened before
// the removal keeps the resolution it was judged with. The backend has no
// health checks, so HAProxy never takes it out of service on its own.
func TestHAProxyStoreSwap(t *testing.T) {
	app, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	trusted := clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(haproxyAddr)}
	other := clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.201")} // a replacement that is not HAProxy
	store, err := clientip.NewStore(trusted, clientip.StoreOptions{})
	require.NoError(t, err)
	rejected := make(chan Rejection, 8)
	l, err := NewListener(app, Config{Trust: store, ReadHeaderTimeout: 3 * time.Second, OnReject: func(r Rejection) { rejected <- r }})
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go serveEach(l, func(c net.Conn) {
		accepted <- c
		io.Copy(io.Discard, c)
	})
	ports := e2e.StartHAProxy(t, 1, func(p []int) string {
		return haproxyDefaults + fmt.Sprintf(`
frontend fe
    bind 127.0.0.1:%d
    default_backend be

backend be
    server app 127.0.0.1:%d send-proxy-v2 source %s
`, p[0], app.Addr().(*net.TCPAddr).Port, haproxyAddr)
	})
	frontend := fmt.Sprintf("127.0.0.1:%d", ports[0])

	// through opens a client connection through HAProxy from src and
	// returns the server side of it, or nil when the server refused it.
	through := func(src string) (net.Conn, net.Conn) {
		c := dial(t, src, frontend)
		fmt.Fprintln(c, "hello")
		select {
		case sc := <-accepted:
			return c, sc
		case r := <-rejected:
			assert.Equal(t, ReasonUntrusted, r.Reason)
			assert.Equal(t, haproxyAddr, r.Peer.Addr().String())
			return c, nil
		case <-time.After(5 * time.Second):
			require.FailNow(t, "HAProxy's connection neither accepted nor refused")
			return nil, nil
		}
	}
	clientOf := func(sc net.Conn) string {
		f, _ := FactsFromConn(sc)
		res, err := ResolverFromConn(sc, store).Resolve(f.Transport(), nil)
		require.NoError(t, err)
		return res.Client.String() + " from " + res.Source.String()
	}

	_, early := through("127.0.0.21")
	require.NotNil(t, early, "HAProxy's connection refused while it is trusted")
	assert.Equal(t, "127.0.0.21 from proxy-protocol", clientOf(early))

	_, err = store.Swap(other)
	require.NoError(t, err)
	c, sc := through("127.0.0.22")
	assert.Nil(t, sc, "HAProxy's connection served after the swap that removed it")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = bufio.NewReader(c).ReadString('\n')
	assert.Error(t, err, "the client's connection through HAProxy stays open")
	assert.Equal(t, "127.0.0.21 from proxy-protocol", clientOf(early), "the connection accepted before the swap lost its resolution")

	_, err = store.Swap(trusted)
	require.NoError(t, err)
	_, sc = through("127.0.0.23")
	require.NotNil(t, sc, "HAProxy's connection refused after it was trusted again")
	assert.Equal(t, "127.0.0.23 from proxy-protocol", clientOf(sc))
	assert.True(t, strings.HasPrefix(sc.RemoteAddr().String(), "127.0.0.23:"), "RemoteAddr %s", sc.RemoteAddr())
}
