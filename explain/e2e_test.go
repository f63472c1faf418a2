package explain

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
)

// clientFrom returns an HTTP client whose connections come from the
// loopback address from.
func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// fetchReport asks url for its explanation from address from, sending the
// given headers, and returns the status and the decoded report.
func fetchReport(t *testing.T, from, url string, headers map[string]string) (int, Report) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := clientFrom(from).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var rep Report
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, &rep), "%s", body)
	}
	return resp.StatusCode, rep
}

// stepsText renders a report's steps compactly.
func stepsText(rep Report) []string {
	var out []string
	for _, s := range rep.Steps {
		what := s.Entry
		if what == "" {
			what = s.Address.String()
		}
		out = append(out, fmt.Sprintf("%d %s %s %s", s.Hop, s.Layer, what, s.Verdict))
	}
	return out
}

// TestBehindNginx serves the explain endpoint behind a real nginx that
// appends X-Forwarded-For (proxy_add_x_forwarded_for), and admits the
// operator at 127.0.0.7 by its resolved address. Clients forge
// X-Forwarded-For through nginx and around it.
func TestBehindNginx(t *testing.T) {
	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"), Header: "X-Forwarded-For"})
	h, err := New(Config{Trust: resolver, Allow: clientip.MustParsePrefixSet("127.0.0.7/32")})
	require.NoError(t, err)
	app := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go app.Serve(ln)
	defer app.Close()

	ports := e2e.StartNginx(t, 1, func(p []int) string {
		return fmt.Sprintf(`	server {
		listen 127.0.0.1:%d;
		location / {
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_pass http://%s;
		}
	}`, p[0], ln.Addr())
	})
	front := fmt.Sprintf("127.0.0.1:%d", ports[0])
	direct := ln.Addr().String()

	t.Run("the operator through nginx, with a forged X-Forwarded-For", func(t *testing.T) {
		code, rep := fetchReport(t, "127.0.0.7", "http://"+front+"/debug/clientip", map[string]string{"X-Forwarded-For": "6.6.6.6"})
		require.Equal(t, 200, code)
		assert.Equal(t, []string{
			"0 socket 127.0.0.1 trusted",
			"1 x-forwarded-for 127.0.0.7 client",
			"2 x-forwarded-for 6.6.6.6 unread",
		}, stepsText(rep))
		assert.Equal(t, netip.MustParseAddr("127.0.0.7"), rep.Result.Client)
		assert.True(t, rep.Steps[1].DeliveredBy.Trusted, "nginx delivered the operator's address")
		assert.False(t, rep.Steps[2].DeliveredBy.Trusted, "the forged entry was delivered by the client")
	})
	t.Run("spoof: another client through nginx forges the operator's address", func(t *testing.T) {
		code, _ := fetchReport(t, "127.0.0.8", "http://"+front+"/debug/clientip", map[string]string{"X-Forwarded-For": "127.0.0.7"})
		assert.Equal(t, 404, code)
	})
	t.Run("spoof: another client around nginx forges the operator's address", func(t *testing.T) {
		code, _ := fetchReport(t, "127.0.0.8", "http://"+direct+"/debug/clientip", map[string]string{"X-Forwarded-For": "127.0.0.7"})
		assert.Equal(t, 404, code)
	})
	t.Run("the operator around nginx: its own header is not read", func(t *testing.T) {
		code, rep := fetchReport(t, "127.0.0.7", "http://"+direct+"/debug/clientip", map[string]string{"X-Forwarded-For": "6.6.6.6"})
		require.Equal(t, 200, code)
		assert.Equal(t, []string{"0 socket 127.0.0.7 client", "1 x-forwarded-for 6.6.6.6 unread"}, stepsText(rep))
	})
}

// haproxySource is the address HAProxy connects to the application from.
const haproxySource = "127.0.0.200"

// TestBehindHAProxy serves the explain endpoint on a PROXY protocol
// listener behind a real HAProxy that sends send-proxy-v2 with a CRC32C and
// a unique id, and admits the operator at 127.0.0.21 by its resolved
// address. Clients forge X-Forwarded-For through HAProxy, and a PROXY
// header of their own around it.
func TestBehindHAProxy(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// One trust for the PROXY listener, the walk and the explanation.
	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(haproxySource)})
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: resolver, ReadHeaderTimeout: 3 * time.Second})
	require.NoError(t, err)
	h, err := New(Config{Trust: resolver, Allow: clientip.MustParsePrefixSet("127.0.0.21/32")})
	require.NoError(t, err)
	app := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ConnContext: proxyproto.ConnContext}
	go app.Serve(ln)
	defer app.Close()

	port := inner.Addr().(*net.TCPAddr).Port
	ports := e2e.StartHAProxy(t, 1, func(p []int) string {
		return fmt.Sprintf(`
global
    maxconn 64

defaults
    mode tcp
    timeout connect 2s
    timeout client  10s
    timeout server  10s

frontend fe
    bind 127.0.0.1:%d
    unique-id-format %%{+X}o\ %%ci:%%cp_%%fi:%%fp_%%Ts_%%rt
    default_backend be

backend be
    server app 127.0.0.1:%d send-proxy-v2 proxy-v2-options crc32c,unique-id source %s
`, p[0], port, haproxySource)
	})
	front := fmt.Sprintf("http://127.0.0.1:%d/debug/clientip", ports[0])

	t.Run("the operator through HAProxy, with forged headers", func(t *testing.T) {
		code, rep := fetchReport(t, "127.0.0.21", front, map[string]string{"X-Forwarded-For": "127.0.0.99", "X-Real-IP": "6.6.6.6"})
		require.Equal(t, 200, code)
		assert.Equal(t, []string{"0 socket 127.0.0.200 trusted", "1 proxy-protocol 127.0.0.21 client"}, stepsText(rep))
		require.NotNil(t, rep.Proxy)
		assert.Equal(t, uint8(2), rep.Proxy.Version)
		assert.Equal(t, proxyproto.CommandProxy, rep.Proxy.Command)
		assert.Equal(t, netip.MustParseAddr("127.0.0.21"), rep.Proxy.Source.Addr())
		var tlvs []string
		for _, tlv := range rep.Proxy.TLVs {
			tlvs = append(tlvs, tlv.Type)
		}
		assert.ElementsMatch(t, []string{"unique_id", "crc32c"}, tlvs)
		require.Len(t, rep.Headers, 2)
		for _, hi := range rep.Headers {
			assert.False(t, hi.Read, "%s: the configuration reads no header", hi.Name)
		}
	})
	t.Run("spoof: another client through HAProxy forges the operator's address", func(t *testing.T) {
		code, _ := fetchReport(t, "127.0.0.22", front, map[string]string{"X-Forwarded-For": "127.0.0.21", "X-Real-IP": "127.0.0.21"})
		assert.Equal(t, 404, code)
	})
	t.Run("spoof: another client around HAProxy sends its own PROXY header", func(t *testing.T) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.22")}}
		c, err := proxyproto.DialContext(context.Background(), d, "tcp", inner.Addr().String(), proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy,
			Source: netip.MustParseAddrPort("127.0.0.21:5555"), Destination: netip.MustParseAddrPort("127.0.0.1:80"),
		})
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, "GET /debug/clientip HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			defer resp.Body.Close()
			assert.NotEqual(t, 200, resp.StatusCode, "an untrusted PROXY header admitted its sender")
		}
		// Otherwise the listener closed the connection (UntrustedClose).
	})
}
