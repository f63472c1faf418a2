package middleware

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
)

// TestDialForwardHAProxy relays TCP connections to a real HAProxy that
// accepts PROXY headers (bind … accept-proxy) and hands the client it read
// to an HTTP application as X-Forwarded-For:
//
//	client ──► relay (PROXY listener trusting 127.0.0.1, NewListener, DialForward) ──► HAProxy ──► application
//
// The application must see the client the relay verified, and the relay
// must not dial for a client it could not verify.
func TestDialForwardHAProxy(t *testing.T) {
	got := make(chan string, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Forwarded-For") + " to " + r.Header.Get("X-Dst")
	}))
	defer app.Close()
	ports := e2e.StartHAProxy(t, 1, func(p []int) string {
		return fmt.Sprintf(`defaults
    mode http
    timeout connect 5s
    timeout client 10s
    timeout server 10s
frontend fe
    bind 127.0.0.1:%d accept-proxy
    option forwardfor
    http-request set-header X-Dst %%[dst]:%%[dst_port]
    default_backend app
backend app
    server app %s
`, p[0], app.Listener.Addr())
	})
	upstream := fmt.Sprintf("127.0.0.1:%d", ports[0])

	// The relay.
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32")})
	pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: trust, ReadHeaderTimeout: 5 * time.Second})
	require.NoError(t, err)
	ln := NewListener(pl, trust)
	refused := make(chan error, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := DialForward(context.Background(), c, nil, "tcp", upstream)
				if err != nil {
					refused <- err
					return
				}
				defer up.Close()
				go func() {
					io.Copy(up, c)
					if cw, ok := up.(interface{ CloseWrite() error }); ok {
						cw.CloseWrite()
					}
				}()
				io.Copy(c, up)
			}()
		}
	}()

	relay := ln.Addr().String()
	tests := []struct {
		name    string
		from    string
		header  *proxyproto.Header // sent to the relay
		want    string             // what the application saw, or "" when the relay must refuse
		wantErr error
	}{
		{name: "a direct client: its socket address, the relay's address as the destination", from: "127.0.0.7",
			want: "127.0.0.7 to " + relay},
		{name: "a client the trusted balancer named in a PROXY header, with the balancer's destination", from: "127.0.0.1",
			header: &proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort("198.51.100.7:5555"),
				Destination: netip.MustParseAddrPort("192.0.2.10:8443")},
			want: "198.51.100.7 to 192.0.2.10:8443"},
		{name: "the balancer naming a trusted address: nothing verified, nothing dialled", from: "127.0.0.1",
			header: &proxyproto.Header{Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort("127.0.0.1:5555"),
				Destination: netip.MustParseAddrPort("192.0.2.10:8443")},
			wantErr: clientip.ErrAllTrusted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}}
			dial := d.DialContext
			if tc.header != nil {
				dial = func(ctx context.Context, network, address string) (net.Conn, error) {
					return proxyproto.DialContext(ctx, d, network, address, *tc.header)
				}
			}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
			resp, err := client.Get("http://" + relay + "/")
			if tc.wantErr != nil {
				assert.Error(t, err, "the relay closes the connection")
				assert.ErrorIs(t, <-refused, tc.wantErr)
				return
			}
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.want, <-got)
		})
	}
}

func TestDialForwardRefuses(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_, err := DialForward(context.Background(), a, nil, "tcp", "127.0.0.1:1")
	assert.ErrorIs(t, err, ErrNoResult, "a connection that did not come from NewListener")
}
