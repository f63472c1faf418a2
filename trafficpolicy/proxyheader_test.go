package trafficpolicy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/proxyproto"
)

// v2Header builds a PROXY protocol v2 header by hand.
func v2Header(verCmd, fam byte, payload []byte) []byte {
	b := append([]byte("\r\n\r\n\x00\r\nQUIT\n"), verCmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(payload)))
	return append(b, payload...)
}

// awsNLBHealthCheckHeader is what an AWS NLB with proxy protocol v2 sends in
// front of a health check (tcpdump in kubernetes/kubernetes#57250): command
// LOCAL, family TCP over IPv4, 84 bytes of TLVs (CRC32C, then NOOP padding)
// and no address block. The checksum is the captured one, which covers this
// header, and is verified.
func awsNLBHealthCheckHeader() []byte {
	payload := []byte{0x03, 0x00, 0x04, 0xbc, 0xe5, 0x95, 0x1f} // PP2_TYPE_CRC32C
	payload = append(payload, 0x04, 0x00, 74)                   // PP2_TYPE_NOOP, 74 bytes of padding
	payload = append(payload, make([]byte, 74)...)
	return v2Header(0x20, 0x11, payload)
}

func v2ProxyTCP4() []byte {
	return v2Header(0x21, 0x11, []byte{203, 0, 113, 7, 10, 0, 0, 11, 0x9c, 0x41, 0x7b, 0x7b})
}

// serveHealth serves a HealthServer with one ready endpoint on an
// OptionalProxyHeader listener on loopback.
func serveHealth(t *testing.T, timeout time.Duration) *proxyproto.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs, err := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r})
	require.NoError(t, err)
	srv := &http.Server{Handler: hs, ReadHeaderTimeout: 5 * time.Second}
	pl, err := OptionalProxyHeader(ln, timeout)
	require.NoError(t, err)
	go srv.Serve(pl)
	t.Cleanup(func() { srv.Close() })
	return pl
}

// TestOptionalProxyHeaderHealthCheck pins that health checks with a PROXY
// header in front (an AWS NLB v2 LOCAL, HAProxy's v1) and without one get the
// same answer from the same port, that no header is believed, and that a
// malformed header closes the connection without an answer.
func TestOptionalProxyHeaderHealthCheck(t *testing.T) {
	pl := serveHealth(t, 2*time.Second)
	request := []byte("GET /healthz HTTP/1.1\r\nHost: 10.0.0.11:32123\r\nConnection: close\r\n\r\n")
	tests := []struct {
		name    string
		header  []byte
		split   bool // header and request in separate writes
		refused bool
	}{
		{name: "no header"},
		{name: "AWS NLB v2 LOCAL health check", header: awsNLBHealthCheckHeader()},
		{name: "AWS NLB v2 LOCAL, request in a second segment", header: awsNLBHealthCheckHeader(), split: true},
		{name: "v2 PROXY TCP4", header: v2ProxyTCP4()},
		{name: "v1 TCP4 (HAProxy send-proxy check)", header: []byte("PROXY TCP4 10.0.0.2 10.0.0.11 51234 32123\r\n")},
		{name: "v1 UNKNOWN, split", header: []byte("PROXY UNKNOWN\r\n"), split: true},
		{name: "v2 version 3: closed", header: v2Header(0x31, 0x11, nil), refused: true},
		{name: "v2 undefined transport 0x13: closed", header: v2Header(0x21, 0x13, nil), refused: true},
		{name: "v1 without CRLF: closed", header: []byte("PROXY TCP4 10.0.0.2 10.0.0.11 51234 32123\n"), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", pl.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if tt.split {
				_, err = c.Write(tt.header)
				require.NoError(t, err)
				_, err = c.Write(request)
			} else {
				_, err = c.Write(append(append([]byte(nil), tt.header...), request...))
			}
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if tt.refused {
				var ne net.Error
				require.Error(t, err, "an answer to a malformed header")
				require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection left open: %v", err)
				return
			}
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode, "body %q", body)
			assert.Contains(t, string(body), `"localEndpoints": 1`)
		})
	}
	st := pl.Stats()
	assert.Equal(t, uint64(5), st.Ignored, "headers discarded")
	assert.Zero(t, st.Proxied+st.Local, "headers believed")
	assert.Equal(t, uint64(3), st.Rejected[proxyproto.ReasonInvalid])
}

// TestOptionalProxyHeaderSilentClient pins the bounded wait: a connection
// that sends nothing (a plain TCP health check) is closed after the header
// timeout, without an answer.
func TestOptionalProxyHeaderSilentClient(t *testing.T) {
	pl := serveHealth(t, 100*time.Millisecond)
	c, err := net.Dial("tcp", pl.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "want the server to close the connection")
	assert.Equal(t, uint64(1), pl.Stats().Rejected[proxyproto.ReasonTimeout])
}
