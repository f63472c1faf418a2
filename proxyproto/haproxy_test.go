package proxyproto

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// haproxyAddr is the source address HAProxy uses towards the test server, so
// the socket layer is distinguishable from every client.
const haproxyAddr = "127.0.0.200"

// haproxyDefaults opens every HAProxy configuration of these tests.
const haproxyDefaults = `
global
    maxconn 256

defaults
    mode tcp
    timeout connect 2s
    timeout client  10s
    timeout server  10s
    timeout check   1s
`

var haproxyConfig = template.Must(template.New("cfg").Parse(haproxyDefaults + `
frontend fe_v1
    bind 127.0.0.1:{{.V1}}
    default_backend be_v1

frontend fe_v2
    bind 127.0.0.1:{{.V2}}
    unique-id-format %{+X}o\ %ci:%cp_%fi:%fp_%Ts_%rt
    default_backend be_v2

# An IPv6 socket bound to an IPv4-mapped address: HAProxy sees IPv4 clients
# as ::ffff:a.b.c.d and sends a TCP6 header (family 0x21) with IPv4-mapped
# source and destination (checked with a packet capture of HAProxy 2.6.12).
frontend fe_mapped
    bind ipv6@::ffff:127.0.0.1:{{.Mapped}}
    default_backend be_v2

backend be_v1
    server app 127.0.0.1:{{.App}} send-proxy source ` + haproxyAddr + `

backend be_v2
    # Health checks carry a LOCAL header (HAProxy >= 2.2 with send-proxy-v2).
    server app 127.0.0.1:{{.App}} send-proxy-v2 proxy-v2-options crc32c,unique-id check inter 200ms source ` + haproxyAddr + `
`))

// startHAProxy runs haproxy with the configuration above in front of the
// server on port app and returns its frontends' addresses; it is stopped
// when the test ends.
func startHAProxy(t *testing.T, app int) (v1, v2, mapped string) {
	t.Helper()
	p := e2e.StartHAProxy(t, 3, func(p []int) string {
		var cfg strings.Builder
		require.NoError(t, haproxyConfig.Execute(&cfg, struct{ V1, V2, Mapped, App int }{p[0], p[1], p[2], app}))
		return cfg.String()
	})
	return fmt.Sprintf("127.0.0.1:%d", p[0]), fmt.Sprintf("127.0.0.1:%d", p[1]), fmt.Sprintf("127.0.0.1:%d", p[2])
}

// TestHAProxy sends real send-proxy and send-proxy-v2 traffic through HAProxy
// 2.6 on loopback: the server must report each client's own address as the
// PROXY source, HAProxy's as the socket peer, verify HAProxy's CRC32C, read
// its UNIQUE_ID, and accept its LOCAL health checks.
func TestHAProxy(t *testing.T) {
	app, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l, err := NewListener(app, Config{
		Trust:             trustOf(haproxyAddr),
		ReadHeaderTimeout: 3 * time.Second,
		OnReject:          func(r Rejection) { assert.Fail(t, "rejected", "%+v", r) },
	})
	require.NoError(t, err)
	defer l.Close()
	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(haproxyAddr)})
	go serveEach(l, func(c net.Conn) {
		f, _ := FactsFromConn(c)
		res, err := resolver.Resolve(f.Transport(), nil)
		uid, hasUID := f.TLVs.UniqueID()
		_, hasCRC := f.TLVs.CRC32C()
		fmt.Fprintf(c, "v=%d cmd=%s peer=%s source=%s dest=%s client=%s from=%s err=%v uid=%t/%d crc=%t\n",
			f.Version, f.Command, f.Peer.Addr(), f.Source, f.Destination, res.Client, res.Source, err, hasUID, len(uid), hasCRC)
		io.Copy(io.Discard, c)
	})

	v1, v2, mapped := startHAProxy(t, app.Addr().(*net.TCPAddr).Port)
	tests := []struct {
		name     string
		frontend string
		client   string
		want     []string
	}{
		{"send-proxy (v1)", v1, "127.0.0.11", []string{"v=1 cmd=proxy", "uid=false", "crc=false"}},
		{"send-proxy-v2 with crc32c and unique-id", v2, "127.0.0.12", []string{"v=2 cmd=proxy", "uid=true/", "crc=true"}},
		{"send-proxy-v2 TCP6 with IPv4-mapped addresses", mapped, "127.0.0.13", []string{"v=2 cmd=proxy", "crc=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, tt.client, tt.frontend)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err, "no answer through haproxy")
			me := c.LocalAddr().(*net.TCPAddr).AddrPort()
			want := append([]string{
				"peer=" + haproxyAddr + " ",
				"source=" + me.String() + " ",
				"dest=" + tt.frontend + " ",
				"client=" + tt.client + " from=proxy-protocol err=<nil>",
			}, tt.want...)
			for _, w := range want {
				assert.Contains(t, line, w, "what the server saw")
			}
		})
	}
	waitFor(t, "a LOCAL health check from haproxy", func() bool { return l.Stats().Local > 0 })
	st := l.Stats()
	assert.Zero(t, st.TotalRejected(), "Stats = %+v", st)
}
