package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMQTTEveryLayer connects real paho clients (MQTT 3.1.1 and 5) over TLS
// through a PROXY v1 and v2 front and checks that the connection's log line
// names the device as the client (from the PROXY header) and the load
// balancer as the socket peer, and that every reading reaches the sink with
// that provenance.
func TestMQTTEveryLayer(t *testing.T) {
	e := start(t, nil)
	i := 0
	for _, version := range []byte{4, 5} {
		for _, proxy := range []uint8{1, 2} {
			i++
			name := fmt.Sprintf("mqtt%d-proxy-v%d", version, proxy)
			t.Run(name, func(t *testing.T) {
				id := fmt.Sprintf("dev%d", i)
				src := fmt.Sprintf("127.0.0.%d:%d", 10+i, 40000+i)
				cfg := e.device(id, version, proxy, src)
				if i == 4 { // one device presents a client certificate
					cert, err := e.ca.Client(id)
					require.NoError(t, err)
					cfg.TLS.Certificates = []tls.Certificate{cert}
				}
				c, err := device.Connect(t.Context(), cfg)
				require.NoError(t, err)
				for seq := range 3 {
					require.NoError(t, c.Publish(t.Context(), "telemetry/"+id, 1, device.Reading(id, uint64(seq), 20)), "publish %d", seq)
				}
				c.Close()
				line := e.logs.wait(t, 5*time.Second, map[string]string{"msg": "mqtt connection", "client_id": id})
				want := map[string]string{
					"outcome": "accepted", "clientip.client": netip.MustParseAddrPort(src).Addr().String(), "clientip.source": "proxy-protocol",
					"clientip.peer": lbAddr.String() + ":*", "clientip.proxy": src, "proxy_destination": e.g.MQTTAddr(),
					"proxy_header": fmt.Sprintf("v%d proxy", proxy), "tls_sni": "gateway.test",
					"mqtt_version": fmt.Sprint(version), "decision": "resolved", "level": "INFO",
				}
				if i == 4 {
					want["tls_subject"] = "CN=" + id
				}
				assert.True(t, match(line, want), "connection line %v\nwant %v", line, want)
			})
		}
	}
	recs := e.records(t)
	require.Len(t, recs, 12)
	for _, r := range recs {
		p := r.Provenance
		assert.Equal(t, "proxy-protocol", p.Source, r.ID)
		assert.Equal(t, r.Device, p.ClientID, r.ID)
		assert.Equal(t, p.Client, netip.MustParseAddrPort(p.ProxySource).Addr().String(), r.ID)
		assert.Equal(t, lbAddr, netip.MustParseAddrPort(p.Peer).Addr(), r.ID)
		assert.Equal(t, "gateway.test", p.TLSServerName, r.ID)
		assert.Equal(t, "telemetry/"+r.Device, r.Topic, r.ID)
	}
}

// TestForbiddenRangeRefused: with an allowlist, a device outside it is
// refused at CONNECT with "not authorized" in either protocol version.
func TestForbiddenRangeRefused(t *testing.T) {
	e := start(t, func(c *Config) { c.Allow = clientip.MustParsePrefixSet("127.0.0.0/28") })
	for _, tc := range []struct {
		version byte
		code    byte
	}{{4, 0x05}, {5, 0x87}} {
		id := fmt.Sprintf("intruder%d", tc.version)
		_, err := device.Connect(t.Context(), e.device(id, tc.version, 2, "127.0.0.99:5555"))
		var ce *device.ConnectError
		if assert.ErrorAs(t, err, &ce, "MQTT %d", tc.version) {
			assert.Equal(t, tc.code, ce.Code, "MQTT %d: CONNACK code", tc.version)
		}
		e.logs.wait(t, 5*time.Second, map[string]string{"msg": "mqtt connection", "client_id": id, "outcome": "refused",
			"clientip.client": "127.0.0.99", "decision": "not_allowed", "connack": fmt.Sprintf("0x%02x", tc.code), "clientip.peer": "127.0.0.200:*"})
		// An allowed device still gets in.
		ok := fmt.Sprintf("allowed%d", tc.version)
		c, err := device.Connect(t.Context(), e.device(ok, tc.version, 2, "127.0.0.12:5555"))
		require.NoError(t, err, "allowed device")
		c.Close()
	}
}

// TestHalfOpenClosedAtDeadline: a connection that sends its PROXY header and
// then nothing is closed at the TLS handshake deadline, and one that
// completes TLS but never sends CONNECT at the CONNECT deadline; both are
// logged with their layers.
func TestHalfOpenClosedAtDeadline(t *testing.T) {
	// A second rather than less: the test's own TLS handshake has to finish
	// inside HandshakeTimeout, on a runner that may be busy with other tests.
	const deadline = time.Second
	e := start(t, func(c *Config) { c.HandshakeTimeout, c.ConnectTimeout = deadline, deadline })
	hdr := func(src string) proxyproto.Header {
		return proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort(src)}
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: lbAddr.AsSlice()}}

	silent, err := proxyproto.DialContext(t.Context(), d, "tcp", e.g.MQTTAddr(), hdr("127.0.0.21:1111"))
	require.NoError(t, err)
	defer silent.Close()
	tlsOnly, err := proxyproto.DialContext(t.Context(), d, "tcp", e.g.MQTTAddr(), hdr("127.0.0.22:2222"))
	require.NoError(t, err)
	defer tlsOnly.Close()
	tc := tls.Client(tlsOnly, &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"})
	require.NoError(t, tc.HandshakeContext(t.Context()))

	for _, tc := range []struct {
		conn  net.Conn
		stage string
		want  map[string]string
	}{
		{silent, "tls", map[string]string{"clientip.proxy": "127.0.0.21:1111", "clientip.client": "127.0.0.21", "tls_sni": ""}},
		{tc, "connect", map[string]string{"clientip.proxy": "127.0.0.22:2222", "clientip.client": "127.0.0.22", "tls_sni": "gateway.test"}},
	} {
		want := map[string]string{"msg": "mqtt connection failed", "stage": tc.stage, "timeout": "true", "clientip.peer": "127.0.0.200:*", "failure": "no *"}
		for k, v := range tc.want {
			want[k] = v
		}
		line := e.logs.wait(t, 5*time.Second, want)
		after := time.Duration(line["after"].(float64))
		assert.GreaterOrEqual(t, after, deadline, "%s: closed after", tc.stage)
		assert.LessOrEqual(t, after, 3*deadline, "%s: closed after", tc.stage)
		tc.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := tc.conn.Read(make([]byte, 64))
		assert.Error(t, err, "%s: the gateway did not close the connection", tc.stage)
		assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "%s: the gateway did not close the connection", tc.stage)
	}
}

// TestProxyRefusals: a PROXY header from a peer outside the load-balancer
// ranges is refused, and so is a load balancer's connection without one.
func TestProxyRefusals(t *testing.T) {
	obs := &countingObserver{}
	e := start(t, func(c *Config) { c.Observer = obs })
	// 127.0.0.1 is not a trusted load balancer.
	c, err := proxyproto.DialContext(t.Context(), nil, "tcp", e.g.MQTTAddr(), proxyproto.Header{
		Version: 1, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort("198.51.100.1:1234")})
	require.NoError(t, err)
	defer c.Close()
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "proxy", "rejection.reason": "untrusted_header",
		"rejection.peer": "127.0.0.1:*", "rejection.trusted": "false"})
	// The load balancer without a header.
	_, err = device.Connect(t.Context(), device.Config{ID: "x", Version: 4, Addr: e.g.MQTTAddr(), Local: lbAddr,
		TLS: &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"}, Timeout: 2 * time.Second})
	assert.Error(t, err, "headerless connection from the load balancer was served")
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection failed", "stage": "proxy", "rejection.reason": "no_header",
		"rejection.peer": "127.0.0.200:*", "rejection.trusted": "true"})
	// A direct client (not a load balancer, no header) is served as itself.
	dc, err := device.Connect(t.Context(), device.Config{ID: "direct", Version: 5, Addr: e.g.MQTTAddr(), Local: netip.MustParseAddr("127.0.0.33"),
		TLS: &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"}, Timeout: 2 * time.Second})
	require.NoError(t, err)
	dc.Close()
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": "direct", "clientip.client": "127.0.0.33",
		"clientip.source": "socket", "proxy_header": "none", "clientip.peer": "127.0.0.33:*"})
	assert.EqualValues(t, 1, obs.resolves.Load(), "resolutions the observer saw")
	assert.EqualValues(t, 2, obs.rejections.Load(), "PROXY refusals the observer saw")
}

// countingObserver is a middleware.Observer with the optional
// ObserveProxyRejection method.
type countingObserver struct {
	resolves, denies, rejections atomic.Int64
}

func (o *countingObserver) ObserveResolve(context.Context, clientip.Result, error) { o.resolves.Add(1) }
func (o *countingObserver) ObserveDeny(context.Context, clientip.Result, error)    { o.denies.Add(1) }
func (o *countingObserver) ObserveProxyRejection(proxyproto.Rejection)             { o.rejections.Add(1) }
