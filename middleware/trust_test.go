package middleware

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

func mustStore(t testing.TB, cfg clientip.Config) *clientip.Store {
	t.Helper()
	s, err := clientip.NewStore(cfg, clientip.StoreOptions{})
	require.NoError(t, err)
	return s
}

func lbConfig(s string) clientip.Config {
	return clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(s), Header: "X-Forwarded-For"}
}

// dialFrom connects from the loopback address src with a PROXY header for
// client, writes a byte, and keeps the connection open until the test ends.
func dialFrom(t *testing.T, src, address, client string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := proxyproto.DialContext(t.Context(), d, "tcp", address, proxyHeader(client))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Write([]byte{'x'})
	require.NoError(t, err)
}

// swapAfterAccept is a listener that swaps a Store to cfg after each
// connection its inner listener accepts, before handing it on: between the
// PROXY listener's judgement and NewListener's resolution.
type swapAfterAccept struct {
	net.Listener
	store *clientip.Store
	cfg   clientip.Config
}

func (l swapAfterAccept) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		_, err = l.store.Swap(l.cfg)
	}
	return c, err
}

// A connection finishes on the configuration it started with: NewListener
// resolves a PROXY connection with the resolver the PROXY listener judged it
// with, not with one loaded after a swap.
func TestListenerStoreSwapBetweenLayers(t *testing.T) {
	store := mustStore(t, lbConfig("127.0.0.1"))
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: store})
	require.NoError(t, err)
	t.Cleanup(func() { pl.Close() })
	ln := NewListener(swapAfterAccept{pl, store, lbConfig("127.0.0.9")}, store)

	dialFrom(t, "127.0.0.1", ln.Addr().String(), "203.0.113.7:5555")
	res, err := ResultFromConn(accept(t, ln))
	require.NoError(t, err)
	assert.Equal(t, addr("203.0.113.7"), res.Client, "the connection was resolved under the configuration after the swap")
	assert.Equal(t, clientip.SourceProxyProtocol, res.Source)
	assert.Equal(t, "127.0.0.9/32", store.Resolver().Config().TrustedProxies.String(), "the swap did not happen")

	// Its next connection is judged under the new configuration: the load
	// balancer is gone, so its header is refused.
	rejected := make(chan proxyproto.Rejection, 1)
	pl2, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: store, OnReject: func(r proxyproto.Rejection) { rejected <- r }})
	require.NoError(t, err)
	t.Cleanup(func() { pl2.Close() })
	go pl2.Accept()
	dialFrom(t, "127.0.0.1", pl2.Addr().String(), "203.0.113.8:5555")
	assert.Equal(t, proxyproto.ReasonUntrusted, (<-rejected).Reason)
}

// countingTrust counts the loads of its resolver.
type countingTrust struct {
	r     *clientip.Resolver
	loads atomic.Int64
}

func (c *countingTrust) Resolver() *clientip.Resolver { c.loads.Add(1); return c.r }

// vanishingTrust is a Trust of an application's own whose Resolver turns
// nil while the server runs (a registry emptied by a reload, say).
type vanishingTrust struct {
	r    *clientip.Resolver
	gone atomic.Bool
}

func (v *vanishingTrust) Resolver() *clientip.Resolver {
	if v.gone.Load() {
		return nil
	}
	return v.r
}

// Review finding: a Trust whose Resolver returned nil after New accepted it
// made New's handler (and a Policy's Serve and CheckRequest, with a Trust
// of their own) call a method on a nil *Resolver and panic. Every entry
// point fails closed instead: the request is refused with an error wrapping
// clientip.ErrNoTrust, answered 500 by default, the server's fault and not
// the client's.
func TestTrustResolverTurnsNilWhileServing(t *testing.T) {
	vt := &vanishingTrust{r: testResolver(t)}
	var onErr error
	resolve, err := New(Config{Trust: vt})
	require.NoError(t, err)
	resolveOwn, err := New(Config{Trust: vt, OnError: func(w http.ResponseWriter, _ *http.Request, _ clientip.Result, err error) {
		onErr = err
		w.WriteHeader(http.StatusServiceUnavailable)
	}})
	require.NoError(t, err)
	requireClient, err := RequireClient(Config{Trust: vt})
	require.NoError(t, err)
	policy, err := NewPolicy(PolicyConfig{Default: Rule{Allow: everyone}, Trust: vt})
	require.NoError(t, err)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") })
	served := func(w http.ResponseWriter, r *http.Request, _ clientip.Result, _ error) { ok(w, r) }
	handlers := map[string]http.Handler{
		"New":            resolve(ok),
		"RequireClient":  requireClient(ok),
		"Policy.Handler": policy.Handler(ok),
		"Policy.Serve":   policy.Serve(served),
	}
	for name, h := range handlers {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request("10.0.0.1:5000", "203.0.113.7"))
		assert.Equal(t, http.StatusOK, rec.Code, "%s before the Trust turned nil", name)
	}
	vt.gone.Store(true)
	for name, h := range handlers {
		rec := httptest.NewRecorder()
		assert.NotPanics(t, func() { h.ServeHTTP(rec, request("10.0.0.1:5000", "203.0.113.7")) }, name)
		assert.Equal(t, http.StatusInternalServerError, rec.Code, name)
		assert.Equal(t, "internal server error: the server cannot resolve client addresses\n", rec.Body.String(), name)
	}
	rec := httptest.NewRecorder()
	resolveOwn(ok).ServeHTTP(rec, request("10.0.0.1:5000", "203.0.113.7"))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.ErrorIs(t, onErr, clientip.ErrNoTrust, "OnError's error")
	var cerr error
	assert.NotPanics(t, func() { cerr = policy.CheckRequest(request("10.0.0.1:5000", "203.0.113.7")) })
	assert.ErrorIs(t, cerr, clientip.ErrNoTrust, "CheckRequest")
	assert.ErrorIs(t, cerr, ErrUnresolved, "CheckRequest")
}

// One request, one load; one connection, one load.
func TestTrustLoadedOncePerRequestAndConnection(t *testing.T) {
	ct := &countingTrust{r: testResolver(t)}
	mw, err := New(Config{Trust: ct})
	require.NoError(t, err)
	ct.loads.Store(0)
	h := mw(echo)
	for range 3 {
		h.ServeHTTP(discard{}, request("10.0.0.1:40000", "203.0.113.7"))
	}
	assert.Equal(t, int64(3), ct.loads.Load(), "loads for three requests")

	ct.loads.Store(0)
	ln := NewListener(loopback(t), ct)
	dial(t, "tcp", ln.Addr().String(), nil)
	accept(t, ln)
	assert.Equal(t, int64(1), ct.loads.Load(), "loads for one connection")
}

func TestResolveStoreSwap(t *testing.T) {
	store := mustStore(t, lbConfig("10.0.0.0/8"))
	mw, err := New(Config{Trust: store})
	require.NoError(t, err)
	h := mw(echo)
	get := func() string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request("10.0.0.1:40000", "203.0.113.7"))
		return w.Body.String()
	}
	assert.Equal(t, "203.0.113.7", get())
	_, err = store.Swap(lbConfig("192.168.0.0/16")) // the proxy is no longer trusted
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", get(), "the next request did not see the swap")
	_, err = store.Swap(clientip.Config{Header: "Forwarded"}) // refused
	require.Error(t, err)
	assert.Equal(t, "10.0.0.1", get(), "a refused swap changed the trust")
}

func TestNewTrustRequired(t *testing.T) {
	for _, trust := range []clientip.Trust{nil, (*clientip.Resolver)(nil)} {
		mw, err := New(Config{Trust: trust})
		assert.ErrorIs(t, err, ErrInvalidConfig, "Trust %#v", trust)
		assert.Nil(t, mw)
	}
	ln := NewListener(loopback(t), (*clientip.Resolver)(nil))
	dial(t, "tcp", ln.Addr().String(), nil)
	_, err := ResultFromConn(accept(t, ln))
	assert.ErrorIs(t, err, ErrInvalidConfig, "a nil *Resolver as Trust")
}

// Swaps concurrent with connections and requests (run with -race): each is
// judged and resolved under exactly one configuration. Under A the load
// balancer is 127.0.0.1, under B it is 127.0.0.2; connections come from
// both, and each one's Result must agree with what the PROXY listener did
// with its header.
func TestStoreRaceConnectionsAndRequests(t *testing.T) {
	cfgA, cfgB := lbConfig("127.0.0.1"), lbConfig("127.0.0.2")
	store := mustStore(t, cfgA)
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{
		Trust: store, Untrusted: proxyproto.UntrustedIgnore, Headerless: proxyproto.HeaderlessAllow,
	})
	require.NoError(t, err)
	t.Cleanup(func() { pl.Close() })
	ln := NewListener(pl, store)
	mw, err := New(Config{Trust: store})
	require.NoError(t, err)
	h := mw(echo)

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			cfg := cfgA
			if i%2 == 0 {
				cfg = cfgB
			}
			_, err := store.Swap(cfg)
			assert.NoError(t, err)
		}
	})
	wg.Go(func() {
		// Under A the peer is trusted and the X-Forwarded-For entry is the
		// client; under B the peer is.
		for range 2000 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, request("127.0.0.1:40000", "203.0.113.9"))
			if got := w.Body.String(); got != "203.0.113.9" && got != "127.0.0.1" {
				assert.Fail(t, "a request under neither configuration", got)
				return
			}
		}
	})
	for i := range 200 {
		from := fmt.Sprintf("127.0.0.%d", 1+i%2)
		dialFrom(t, from, ln.Addr().String(), "203.0.113.7:5555")
		c := accept(t, ln)
		f, _ := proxyproto.FactsFromConn(c)
		res, err := ResultFromConn(c)
		if f.Command == proxyproto.CommandProxy {
			require.NoError(t, err, "conn %d from %s", i, from)
			assert.Equal(t, addr("203.0.113.7"), res.Client, "conn %d from %s: header believed, client not from it", i, from)
		} else {
			// The header was ignored: the peer was not the load balancer of
			// the configuration it was judged under, so it is the client.
			require.NoError(t, err, "conn %d from %s: header ignored, yet resolved as a trusted hop", i, from)
			assert.Equal(t, addr(from), res.Client, "conn %d", i)
		}
		c.Close()
	}
	close(done)
	wg.Wait()
}

// A trust change never turns what a client wrote on a connection that is
// already open into a trusted proxy's report. The PROXY listener's judgement
// of the socket peer, made when the connection arrived, holds for the
// connection's lifetime (proxyproto.Facts.PeerUntrusted): a load balancer
// that was not trusted then, whose PROXY header was discarded under
// UntrustedIgnore, is not stepped over on that connection after the Store
// starts to trust it, so the X-Forwarded-For its client forged is never read.
// The same holds for a direct client whose address becomes trusted.
func TestTrustChangeOnOpenConnection(t *testing.T) {
	tests := []struct {
		name      string
		withProxy bool // the peer sends a PROXY header first
	}{
		{"discarded PROXY header under UntrustedIgnore", true},
		{"direct client whose address becomes trusted", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := mustStore(t, lbConfig("127.0.0.9"))
			pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: store, Untrusted: proxyproto.UntrustedIgnore})
			require.NoError(t, err)
			mw, err := New(Config{Trust: store})
			require.NoError(t, err)
			srv := &http.Server{
				ConnContext: proxyproto.ConnContext,
				Handler: mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					res, _ := clientip.FromContext(r.Context())
					io.WriteString(w, res.Client.String())
				})),
			}
			go srv.Serve(pl)
			t.Cleanup(func() { srv.Close() })

			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
			var c net.Conn
			if tt.withProxy {
				c, err = proxyproto.DialContext(t.Context(), d, "tcp", pl.Addr().String(), proxyHeader("203.0.113.7:5555"))
			} else {
				c, err = d.DialContext(t.Context(), "tcp", pl.Addr().String())
			}
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			br := bufio.NewReader(c)
			get := func() string {
				t.Helper()
				_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n")
				require.NoError(t, err)
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
				return string(body)
			}
			assert.Equal(t, "127.0.0.1", get(), "before the change: the untrusted peer is the client")
			_, err = store.Swap(lbConfig("127.0.0.1"))
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1", get(), "after the change, on the same connection: the forged X-Forwarded-For was read")
		})
	}
}
