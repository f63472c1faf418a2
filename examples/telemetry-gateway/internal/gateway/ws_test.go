package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"
	"github.com/gorilla/websocket"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ws"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ingressAddr is the address the test's nginx connects to the gateway
// from (proxy_bind): the WebSocket chain's trusted ingress.
const ingressAddr = "127.0.0.61"

// startNginxWS runs a real nginx in front of the gateway's WebSocket
// listener as ingress controllers are configured for WebSockets: HTTP/1.1
// upstream, Upgrade and Connection passed on, $proxy_add_x_forwarded_for,
// the Host and scheme reported. It returns nginx's address.
func startNginxWS(t *testing.T, backend string) string {
	t.Helper()
	port := e2e.StartNginx(t, 1, func(p []int) string {
		return fmt.Sprintf(`
	server {
		listen 127.0.0.1:%d;
		location /mqtt {
			proxy_pass http://%s;
			proxy_http_version 1.1;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection "upgrade";
			proxy_set_header Host $http_host;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_bind %s;
		}
	}`, p[0], backend, ingressAddr)
	})[0]
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// wsDial opens a WebSocket (subprotocol mqtt) from local to u with header
// h, for paho.golang, which takes any net.Conn.
func wsDial(t *testing.T, u, local string, h http.Header) (net.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{ws.Subprotocol},
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).DialContext}
	c, resp, err := d.Dial(u, h)
	if err != nil {
		return nil, resp, err
	}
	return ws.NewConn(c), resp, nil
}

// connect5 sends CONNECT as id over conn with paho.golang (MQTT 5).
func connect5(t *testing.T, conn net.Conn, id string) (*paho.Client, *paho.Connack, error) {
	t.Helper()
	c := paho.NewClient(paho.ClientConfig{Conn: packets.NewThreadSafeConn(conn), PacketTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ack, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
	return c, ack, err
}

// TestWebSocketBehindNginx: MQTT over WebSocket through a real nginx, with
// real MQTT clients: paho.mqtt.golang's own WebSocket transport (MQTT
// 3.1.1) and paho.golang (MQTT 5). Each device writes a forged leftmost
// X-Forwarded-For entry; the gateway names the device as nginx saw it, and
// its CONNECT goes through the same hook as on the TCP listener: the
// allowlist refuses a device that bypasses nginx and claims an allowed
// address in its own X-Forwarded-For, and the log line and the sink record
// carry the forwarding layer and the transport. A browser's cross-site
// upgrade is refused; its own origin and an allowed one are not.
func TestWebSocketBehindNginx(t *testing.T) {
	e := start(t, func(c *Config) {
		c.WSAddr = "127.0.0.1:0"
		c.WSTrusted = clientip.MustParsePrefixSet(ingressAddr)
		c.WSHeader = "X-Forwarded-For"
		c.WSOrigin = clientip.OriginConfig{Proto: "X-Forwarded-Proto", AllowedHosts: []string{"127.0.0.1"}}
		c.WSAllowedOrigins = []clientip.Origin{{Scheme: "https", Host: "dashboard.example"}}
		c.Allow = clientip.MustParsePrefixSet("127.0.0.1, 127.0.0.72")
	})
	front := startNginxWS(t, e.g.WSAddr())
	forged := http.Header{"X-Forwarded-For": {"203.0.113.9"}}

	t.Run("MQTT 3.1.1, paho's WebSocket transport", func(t *testing.T) {
		opts := pahov3.NewClientOptions().AddBroker("ws://" + front + "/mqtt").SetClientID("ws311").SetProtocolVersion(4).
			SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second).SetHTTPHeaders(forged).
			SetWebsocketOptions(&pahov3.WebsocketOptions{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
		c := pahov3.NewClient(opts)
		tok := c.Connect()
		require.True(t, tok.WaitTimeout(5*time.Second), "CONNECT")
		require.NoError(t, tok.Error())
		tok = c.Publish("telemetry/ws311", 1, false, device.Reading("ws311", 1, 20))
		require.True(t, tok.WaitTimeout(5*time.Second), "PUBACK")
		require.NoError(t, tok.Error())
		c.Disconnect(100)
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "ws311", "outcome": "accepted", "mqtt_version": "4",
			"transport": "websocket", "clientip.client": "127.0.0.1", "clientip.source": "x-forwarded-for", "clientip.header": "X-Forwarded-For",
			"clientip.via": ingressAddr, "clientip.peer": ingressAddr + ":*", "proxy_header": "none"})
	})
	t.Run("MQTT 5, paho.golang", func(t *testing.T) {
		conn, _, err := wsDial(t, "ws://"+front+"/mqtt", "127.0.0.72", forged)
		require.NoError(t, err)
		c, _, err := connect5(t, conn, "ws5")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err = c.Publish(ctx, &paho.Publish{Topic: "telemetry/ws5", QoS: 1, Payload: device.Reading("ws5", 1, 21)})
		require.NoError(t, err)
		_ = c.Disconnect(&paho.Disconnect{})
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "ws5", "outcome": "accepted", "mqtt_version": "5",
			"transport": "websocket", "clientip.client": "127.0.0.72", "clientip.source": "x-forwarded-for", "clientip.via": ingressAddr})
	})
	t.Run("bypassing nginx with a forged X-Forwarded-For", func(t *testing.T) {
		conn, _, err := wsDial(t, "ws://"+e.g.WSAddr()+"/mqtt", "127.0.0.73", http.Header{"X-Forwarded-For": {"127.0.0.1"}})
		require.NoError(t, err)
		_, ack, err := connect5(t, conn, "bypass")
		require.Error(t, err)
		if assert.NotNil(t, ack) {
			assert.EqualValues(t, 0x87, ack.ReasonCode, "CONNACK not authorized")
		}
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "bypass", "outcome": "refused", "decision": "not_allowed",
			"transport": "websocket", "clientip.client": "127.0.0.73", "clientip.source": "socket"})
	})
	t.Run("origins", func(t *testing.T) {
		for _, tt := range []struct {
			origin string
			ok     bool
		}{
			{"https://evil.example", false},
			{"http://" + front, true}, // the page's own origin, as nginx reports scheme and host
			{"https://dashboard.example", true},
			{"https://" + front, false}, // same host, other scheme
		} {
			conn, resp, err := wsDial(t, "ws://"+front+"/mqtt", "127.0.0.74", http.Header{"Origin": {tt.origin}})
			if tt.ok {
				require.NoError(t, err, tt.origin)
				conn.Close()
				continue
			}
			require.Error(t, err, tt.origin)
			if assert.NotNil(t, resp, tt.origin) {
				assert.Equal(t, http.StatusForbidden, resp.StatusCode, tt.origin)
			}
			e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "websocket", "origin": tt.origin,
				"status": "403", "failure": "ws: cross-origin WebSocket from an origin that is not allowed*", "clientip.client": "127.0.0.74"})
		}
	})

	recs := e.records(t)
	require.Len(t, recs, 2)
	for _, r := range recs {
		p := r.Provenance
		assert.Equal(t, map[string]string{"ws311": "127.0.0.1", "ws5": "127.0.0.72"}[r.Device], p.Client, r.ID)
		assert.Equal(t, "x-forwarded-for", p.Source, r.ID)
		assert.Equal(t, "X-Forwarded-For", p.Header, r.ID)
		assert.Equal(t, "websocket", p.Transport, r.ID)
		assert.Equal(t, ingressAddr, p.Via, r.ID)
		assert.True(t, strings.HasPrefix(p.Peer, ingressAddr+":"), r.ID)
		assert.NotContains(t, fmt.Sprint(p), "203.0.113.9", r.ID)
	}
}

// TestWebSocketBehindPROXY: a load balancer in front of the WebSocket
// listener that sends PROXY headers (WSProxyTrusted) is a trusted hop of
// the same chain: the client is the PROXY source (an X-Forwarded-For that
// no trusted ingress wrote is not read), and a peer that is not such a load
// balancer cannot send a header.
func TestWebSocketBehindPROXY(t *testing.T) {
	e := start(t, func(c *Config) {
		c.WSAddr = "127.0.0.1:0"
		c.WSProxyTrusted = clientip.MustParsePrefixSet(lbAddr.String())
	})
	dial := func(t *testing.T, local netip.Addr, src string, h http.Header) (net.Conn, error) {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{ws.Subprotocol},
			NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return proxyproto.DialContext(ctx, &net.Dialer{LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}, network, addr,
					proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort(src)})
			}}
		c, _, err := d.Dial("ws://"+e.g.WSAddr()+"/mqtt", h)
		if err != nil {
			return nil, err
		}
		return ws.NewConn(c), nil
	}
	conn, err := dial(t, lbAddr, "192.0.2.7:7000", http.Header{"X-Forwarded-For": {"203.0.113.9"}})
	require.NoError(t, err)
	c, _, err := connect5(t, conn, "wsp1")
	require.NoError(t, err)
	_ = c.Disconnect(&paho.Disconnect{})
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "wsp1", "outcome": "accepted", "transport": "websocket",
		"clientip.client": "192.0.2.7", "clientip.source": "proxy-protocol", "clientip.peer": lbAddr.String() + ":*", "proxy_header": "v2 proxy"})

	_, err = dial(t, netip.MustParseAddr("127.0.0.66"), "192.0.2.8:7000", nil)
	require.Error(t, err, "a PROXY header from a peer that is not a trusted load balancer")
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "proxy", "rejection.reason": "untrusted_header"})
}

// TestWebSocketHeaderlessLoadBalancerIsNoIngress: spoofing trick. With an
// ingress (WSTrusted, whose X-Forwarded-For is read) and load balancers that
// send PROXY headers (WSProxyTrusted) on one chain, and headerless
// connections from those load balancers allowed (their health checks, or
// pods that kube-proxy short-circuits past the load balancer, arriving from
// a node address), such a connection must not be read as if an ingress had
// written its X-Forwarded-For: a load balancer passes the client's bytes
// on, so the header is the client's own claim (PROXY protocol spec §2: a
// receiver must not guess whether a header is present).
func TestWebSocketHeaderlessLoadBalancerIsNoIngress(t *testing.T) {
	e := start(t, func(c *Config) {
		c.WSAddr = "127.0.0.1:0"
		c.WSTrusted = clientip.MustParsePrefixSet(ingressAddr)
		c.WSProxyTrusted = clientip.MustParsePrefixSet(lbAddr.String())
		c.ProxyHeaderless = proxyproto.HeaderlessAllow
	})
	conn, _, err := wsDial(t, "ws://"+e.g.WSAddr()+"/mqtt", lbAddr.String(), http.Header{"X-Forwarded-For": {"203.0.113.9"}})
	if err != nil {
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "proxy"})
		return
	}
	_, _, _ = connect5(t, conn, "wsh1")
	line := e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "wsh1"})
	got, _ := field(line, "clientip.client")
	assert.NotEqual(t, "203.0.113.9", got, "the client's own X-Forwarded-For was believed: %v", line)
}

// TestWebSocketLocalHeaderIsNoIngress: a v2 LOCAL header from the load
// balancer (its own connection, a health check) names no client either, so
// an X-Forwarded-For in the request behind it is not read (PROXY protocol
// §2.2: with LOCAL the receiver must use the real connection endpoints).
func TestWebSocketLocalHeaderIsNoIngress(t *testing.T) {
	e := start(t, func(c *Config) {
		c.WSAddr = "127.0.0.1:0"
		c.WSTrusted = clientip.MustParsePrefixSet(ingressAddr)
		c.WSProxyTrusted = clientip.MustParsePrefixSet(lbAddr.String())
	})
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{ws.Subprotocol},
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nd := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IP(lbAddr.AsSlice())}}
			return proxyproto.DialContext(ctx, nd, network, addr, proxyproto.Header{Version: 2, Command: proxyproto.CommandLocal})
		}}
	c, _, err := d.Dial("ws://"+e.g.WSAddr()+"/mqtt", http.Header{"X-Forwarded-For": {"203.0.113.9"}})
	if err != nil {
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "proxy"})
		return
	}
	_, _, _ = connect5(t, ws.NewConn(c), "wsl1")
	line := e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "wsl1"})
	got, _ := field(line, "clientip.client")
	assert.NotEqual(t, "203.0.113.9", got, "the client's own X-Forwarded-For was believed behind a LOCAL header: %v", line)
}
