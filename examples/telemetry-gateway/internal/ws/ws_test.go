package ws

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fixture struct {
	l        *Listener
	addr     string
	refusals chan Refusal
}

// listen runs a Listener on loopback whose chain trusts loopback (the
// "ingress") to write X-Forwarded-For, with cfg adjusted by mutate.
func listen(t *testing.T, proxy bool, mutate func(*Config)) *fixture {
	t.Helper()
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback(), Header: "X-Forwarded-For"})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var inner net.Listener = tcp
	if proxy {
		inner, err = proxyproto.NewListener(tcp, proxyproto.Config{Trust: trust})
		require.NoError(t, err)
	}
	f := &fixture{addr: tcp.Addr().String(), refusals: make(chan Refusal, 8)}
	cfg := Config{Inner: inner, Trust: trust, OnRefuse: func(r Refusal) { f.refusals <- r }}
	if mutate != nil {
		mutate(&cfg)
	}
	f.l, err = New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { f.l.Close() })
	return f
}

// dial opens a WebSocket to the fixture with header h (and, when proxy is
// set, a PROXY v2 header claiming src first), offering the mqtt
// subprotocol unless h says otherwise.
func (f *fixture) dial(t *testing.T, path string, h http.Header, src string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{Subprotocol}}
	if h.Get("Sec-WebSocket-Protocol") != "" {
		d.Subprotocols = nil
	}
	if src != "" {
		d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return proxyproto.DialContext(ctx, nil, network, addr, proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy,
				Source: netip.MustParseAddrPort(src)})
		}
	}
	c, resp, err := d.Dial("ws://"+f.addr+path, h)
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, resp, err
}

func (f *fixture) accept(t *testing.T) net.Conn {
	t.Helper()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() { c, err := f.l.Accept(); ch <- accepted{c, err} }()
	select {
	case a := <-ch:
		require.NoError(t, a.err)
		t.Cleanup(func() { a.c.Close() })
		return a.c
	case <-time.After(5 * time.Second):
		require.FailNow(t, "nothing accepted")
		return nil
	}
}

// TestResolvedAtUpgrade: the client is resolved from the upgrade request
// under the chain's trust, with the PROXY layer when there is one, and the
// connection carries the Result; a forged leftmost X-Forwarded-For entry is
// never read.
func TestResolvedAtUpgrade(t *testing.T) {
	tests := []struct {
		name   string
		proxy  string // PROXY source, "" for none
		xff    string
		client string
		source clientip.Source
	}{
		{"ingress appended the client", "", "198.51.100.1, 203.0.113.7", "203.0.113.7", clientip.SourceXForwardedFor},
		{"no header: the socket peer is trusted, so every hop is", "", "", "", clientip.SourceNone},
		{"behind a PROXY load balancer, the ingress's entry", "127.0.0.9:4000", "198.51.100.1, 203.0.113.7", "203.0.113.7", clientip.SourceXForwardedFor},
		{"behind a PROXY load balancer, no header", "192.0.2.7:4000", "", "192.0.2.7", clientip.SourceProxyProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := listen(t, tt.proxy != "", nil)
			h := http.Header{}
			if tt.xff != "" {
				h.Set("X-Forwarded-For", tt.xff)
			}
			ws, resp, err := f.dial(t, "/mqtt", h, tt.proxy)
			require.NoError(t, err)
			assert.Equal(t, Subprotocol, resp.Header.Get("Sec-WebSocket-Protocol"), "[MQTT-6.0.0-4]")
			c := f.accept(t)
			res, rerr := middleware.ResultFromConn(c)
			if tt.client == "" {
				assert.ErrorIs(t, rerr, clientip.ErrAllTrusted)
			} else {
				require.NoError(t, rerr)
				assert.Equal(t, tt.client, res.Client.String())
			}
			assert.Equal(t, tt.source, res.Source)
			assert.Equal(t, "127.0.0.1", res.Peer.Addr().String(), "the socket peer")
			if tt.proxy != "" {
				f, ok := proxyproto.FactsFromConn(c)
				assert.True(t, ok, "the PROXY layer under the WebSocket")
				assert.Equal(t, tt.proxy, f.Source.String())
			}
			// Bytes flow both ways, whatever the message boundaries.
			require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, []byte("\x10\x02ab")))
			require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, []byte("cd")))
			got := make([]byte, 6)
			_, err = io.ReadFull(c, got)
			require.NoError(t, err)
			assert.Equal(t, "\x10\x02abcd", string(got))
			_, err = c.Write([]byte("\x20\x02\x00\x00"))
			require.NoError(t, err)
			typ, msg, err := ws.ReadMessage()
			require.NoError(t, err)
			assert.Equal(t, websocket.BinaryMessage, typ)
			assert.Equal(t, "\x20\x02\x00\x00", string(msg))
		})
	}
}

// TestTextMessageRefused: MQTT is sent in binary messages only
// ([MQTT-6.0.0-1]).
func TestTextMessageRefused(t *testing.T) {
	f := listen(t, false, nil)
	ws, _, err := f.dial(t, "/mqtt", nil, "")
	require.NoError(t, err)
	c := f.accept(t)
	require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("hello")))
	_, err = c.Read(make([]byte, 8))
	assert.ErrorIs(t, err, ErrTextMessage)
}

// TestOriginAndHost: a browser's upgrade (it carries an Origin) is accepted
// from the request's own origin, as the trusted ingress reports it, or from
// an allowed one; a cross-site one is refused, as is a request for a host
// the gateway does not answer to. Devices send no Origin.
func TestOriginAndHost(t *testing.T) {
	dash := clientip.Origin{Scheme: "https", Host: "dashboard.example"}
	f := listen(t, false, func(c *Config) {
		c.Origin = clientip.MustNewOriginReader(clientip.OriginConfig{Proto: "X-Forwarded-Proto", AllowedHosts: []string{"iot.example", "127.0.0.1"}})
		c.AllowedOrigins = []clientip.Origin{dash}
	})
	tests := []struct {
		name    string
		header  map[string]string
		path    string
		status  int // 101 accepted
		wantErr error
	}{
		{"a device: no Origin", map[string]string{"X-Forwarded-For": "203.0.113.7"}, "/mqtt", 101, nil},
		{"same origin as the ingress reports it", map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https", "Host": "iot.example",
			"Origin": "https://iot.example"}, "/mqtt", 101, nil},
		{"an allowed origin", map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https", "Host": "iot.example",
			"Origin": "https://dashboard.example"}, "/mqtt", 101, nil},
		{"cross-site", map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https", "Host": "iot.example",
			"Origin": "https://evil.example"}, "/mqtt", 403, ErrCrossOrigin},
		{"same host, other scheme", map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https", "Host": "iot.example",
			"Origin": "http://iot.example"}, "/mqtt", 403, ErrCrossOrigin},
		{"opaque origin", map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https", "Host": "iot.example",
			"Origin": "null"}, "/mqtt", 403, ErrCrossOrigin},
		{"a host the gateway does not answer to (DNS rebinding)", map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https",
			"Host": "evil.example"}, "/mqtt", 403, ErrHostNotAllowed},
		{"a host the gateway does not answer to, from a client that cannot be resolved", map[string]string{"Host": "evil.example"}, "/mqtt", 403, ErrHostNotAllowed},
		{"another path", nil, "/", 404, ErrNotUpgrade},
		{"no mqtt subprotocol", map[string]string{"Sec-WebSocket-Protocol": "chat"}, "/mqtt", 400, ErrNoSubprotocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{Subprotocol}}
			if v := h.Get("Sec-WebSocket-Protocol"); v != "" {
				d.Subprotocols = []string{v}
				h.Del("Sec-WebSocket-Protocol")
			}
			host := f.addr
			if v := h.Get("Host"); v != "" {
				// gorilla takes the Host from the URL: dial the fixture under that name.
				host = v
				h.Del("Host")
				d.NetDialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, f.addr)
				}
			}
			c, resp, err := d.Dial("ws://"+host+tt.path, h)
			check(t, f, c, resp, err, tt.status, tt.wantErr)
		})
	}
}

func check(t *testing.T, f *fixture, c *websocket.Conn, resp *http.Response, err error, status int, wantErr error) {
	t.Helper()
	if status == 101 {
		require.NoError(t, err)
		c.Close()
		f.accept(t)
		return
	}
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, status, resp.StatusCode)
	select {
	case r := <-f.refusals:
		assert.ErrorIs(t, r.Err, wantErr)
		assert.Equal(t, status, r.Status)
		assert.NotEqual(t, "error", r.Reason())
	case <-time.After(3 * time.Second):
		assert.Fail(t, "no refusal reported")
	}
}

// TestBadHandshakeReported: an upgrade request that passes the listener's
// own checks but breaks RFC 6455 §4.1 (not GET, another protocol version, no
// valid Sec-WebSocket-Key) is refused with its reason in the answer and in a
// Refusal, not with a bare status nobody logs; a version mismatch is
// answered with the version the server speaks (§4.4).
func TestBadHandshakeReported(t *testing.T) {
	f := listen(t, false, nil)
	tests := []struct {
		name, method, version, key string
		status                     int
		reason                     string
	}{
		{"not GET (§4.1 item 2)", http.MethodPost, "13", "dGhlIHNhbXBsZSBub25jZQ==", 405, "not GET"},
		{"another protocol version (§4.4)", http.MethodGet, "8", "dGhlIHNhbXBsZSBub25jZQ==", 400, "unsupported version"},
		{"no Sec-WebSocket-Key (§4.1 item 7)", http.MethodGet, "13", "", 400, "Sec-WebSocket-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://"+f.addr+"/mqtt", nil)
			require.NoError(t, err)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Protocol", Subprotocol)
			req.Header.Set("Sec-WebSocket-Version", tt.version)
			if tt.key != "" {
				req.Header.Set("Sec-WebSocket-Key", tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Contains(t, string(body), tt.reason, "the answer says why")
			assert.Equal(t, "13", resp.Header.Get("Sec-WebSocket-Version"))
			select {
			case r := <-f.refusals:
				assert.ErrorIs(t, r.Err, ErrBadHandshake)
				assert.ErrorContains(t, r.Err, tt.reason)
				assert.Equal(t, tt.status, r.Status)
				assert.Equal(t, "bad_handshake", r.Reason())
			default: // OnRefuse runs before the answer is written
				assert.Fail(t, "no refusal reported")
			}
		})
	}
}

// TestDeadlinesBesideWrites: a server sets a connection's deadlines on its
// reading goroutine while another goroutine writes (the ingest server
// clears the CONNECT deadline once it has written the CONNACK, while it may
// already be writing a DISCONNECT on another goroutine: for an expired keep
// alive, a client id taken over, or its own Close); run with -race.
func TestDeadlinesBesideWrites(t *testing.T) {
	f := listen(t, false, nil)
	ws, _, err := f.dial(t, "/mqtt", nil, "")
	require.NoError(t, err)
	c := f.accept(t)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if _, err := c.Write([]byte("\x40\x02\x00\x01")); err != nil {
				return
			}
		}
	}()
	for range 200 {
		require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	}
	<-done
}

// TestHostileHTTPConnectionsAreBounded: the listener faces whatever reaches
// the ingress's port, so a connection that is not an upgrade is held no
// longer than ReadHeaderTimeout: one that idles after a refused request
// (keep-alive slot hoarding, slowloris between requests), and one that
// trickles the body of a refused request, which the HTTP server would
// otherwise wait for without a deadline before answering the next.
func TestHostileHTTPConnectionsAreBounded(t *testing.T) {
	tests := []struct{ name, request string }{
		{"idle after a refused request", "GET /health HTTP/1.1\r\nHost: gw\r\n\r\n"},
		{"slow body of a refused request", "POST /mqtt HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\nx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := listen(t, false, func(c *Config) { c.ReadHeaderTimeout = 200 * time.Millisecond })
			c, err := net.Dial("tcp", f.addr)
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Write([]byte(tt.request))
			require.NoError(t, err)
			// The client's own deadline only keeps a failing test from
			// hanging: the listener must close the connection long before.
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err = io.ReadAll(c)
			assert.NoError(t, err, "the listener closes the connection (EOF), not the client's deadline")
		})
	}
}
