package middleware

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
	"github.com/sourceip/sourceip/proxyproto"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRangesRefresherFeedsStore runs a range refresher against a local HTTPS
// server that stands in for the provider, wired to a Store with one line
// (OnUpdate: store.SetRangesFunc("edge")), and checks that what each refresh
// installs is what the next connection through a real PROXY listener and
// the next request through the middleware are judged by. The edge proxies
// are 127.0.0.2 and later 127.0.0.3; 127.0.0.10 is an ingress configured by
// hand, which the refreshes never touch.
func TestRangesRefresherFeedsStore(t *testing.T) {
	var mu sync.Mutex
	list := "127.0.0.2/32\n"
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		io.WriteString(w, list)
	}))
	t.Cleanup(provider.Close)
	publish := func(s string) { mu.Lock(); list = s; mu.Unlock() }

	var logs syncBuffer
	store, err := clientip.NewStore(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.10"), // the ingress, by hand
		Header:         "X-Forwarded-For",
	}, clientip.StoreOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)

	src, err := ranges.NewSource(ranges.SourceConfig{Provider: ranges.ProviderCIDRList, Locations: []string{provider.URL + "/edge.txt"}})
	require.NoError(t, err)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	refresher, err := ranges.NewRefresher(ranges.RefresherConfig{
		Source:       src,
		Client:       provider.Client(),
		Clock:        func() time.Time { return now },
		AllowPrivate: true, // loopback stands in for the edge
		MaxShrink:    1,    // the test replaces the whole list
		MaxGrowth:    math.Inf(1),
		OnUpdate:     store.SetRangesFunc("edge"),
	})
	require.NoError(t, err)

	// The connection chain: a PROXY listener and the resolving wrapper.
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: store, Untrusted: proxyproto.UntrustedIgnore})
	require.NoError(t, err)
	t.Cleanup(func() { pl.Close() })
	conns := NewListener(pl, store)
	connClient := func(from string) clientip.Result {
		t.Helper()
		dialFrom(t, from, conns.Addr().String(), "203.0.113.7:5555")
		res, err := ResultFromConn(accept(t, conns))
		require.NoError(t, err)
		return res
	}

	// The request chain: the middleware on a real HTTP server.
	mw, err := New(Config{Trust: store})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(echo))
	t.Cleanup(srv.Close)
	requestClient := func(from string) string {
		t.Helper()
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequest("GET", srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", "198.51.100.9")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}

	// Before any refresh the edge is not trusted: its PROXY header is
	// ignored and its X-Forwarded-For is not read.
	assert.Equal(t, addr("127.0.0.2"), connClient("127.0.0.2").Client)
	assert.Equal(t, "127.0.0.2", requestClient("127.0.0.2"))

	require.NoError(t, refresher.Refresh(context.Background()))
	assert.Equal(t, "127.0.0.2/32,127.0.0.10/32", store.Resolver().Config().TrustedProxies.String())
	res := connClient("127.0.0.2")
	assert.Equal(t, addr("203.0.113.7"), res.Client, "the next connection did not see the refresh")
	assert.Equal(t, clientip.SourceProxyProtocol, res.Source)
	assert.Equal(t, "198.51.100.9", requestClient("127.0.0.2"), "the next request did not see the refresh")
	assert.Equal(t, "198.51.100.9", requestClient("127.0.0.10"), "the ingress configured by hand")

	// The provider moves its edge; an hour later the refresh follows.
	publish("127.0.0.3/32\n")
	now = now.Add(time.Hour)
	require.NoError(t, refresher.Refresh(context.Background()))
	assert.Equal(t, addr("127.0.0.2"), connClient("127.0.0.2").Client, "the edge that left is still trusted")
	assert.Equal(t, addr("203.0.113.7"), connClient("127.0.0.3").Client, "the edge that came is not trusted")
	assert.Equal(t, "127.0.0.2", requestClient("127.0.0.2"))
	assert.Equal(t, "198.51.100.9", requestClient("127.0.0.3"))

	// A list the refresher cannot read changes nothing.
	publish("not a list\n")
	now = now.Add(time.Hour)
	require.Error(t, refresher.Refresh(context.Background()))
	assert.Equal(t, "127.0.0.3/32,127.0.0.10/32", store.Resolver().Config().TrustedProxies.String())

	text := logs.String()
	assert.Contains(t, text, `msg="trust changed" change.ranges=edge change.trusted_proxies_added=127.0.0.2/32`)
	assert.Contains(t, text, `msg="trust changed" change.ranges=edge change.trusted_proxies_added=127.0.0.3/32 change.trusted_proxies_removed=127.0.0.2/32`)
	assert.Equal(t, clientip.StoreStats{Changes: 2}, store.Stats())
}
