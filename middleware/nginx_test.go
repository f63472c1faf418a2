package middleware

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// TestNginx puts a real nginx in front of the middleware on loopback, with
// the configuration most deployments use (proxy_add_x_forwarded_for), and
// checks that a client's forged X-Forwarded-For does not name the client,
// neither through nginx nor when the client reaches the server directly.
func TestNginx(t *testing.T) {
	nginx := e2e.Require(t, "nginx")[0]

	// The server trusts only nginx's address.
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"),
		Header:         "X-Forwarded-For",
	})
	mw, err := New(Config{Trust: r})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		fmt.Fprintf(w, "%s %s hop %d via %v; xff %q", res.Client, res.Source, res.Hop, res.Via, r.Header.Get("X-Forwarded-For"))
	})))
	defer srv.Close()

	front := startNginx(t, nginx, srv.Listener.Addr().String())

	tests := []struct {
		name   string
		from   string // client's source address
		target string
		want   string
	}{
		{name: "through nginx", from: "127.0.0.7", target: front,
			want: `127.0.0.7 x-forwarded-for hop 1 via 127.0.0.1; xff "6.6.6.6, 127.0.0.7"`},
		{name: "direct", from: "127.0.0.8", target: srv.Listener.Addr().String(),
			want: `127.0.0.8 socket hop 0 via invalid IP; xff "6.6.6.6"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}}
			c := &http.Client{
				Timeout:   10 * time.Second,
				Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
			}
			req, _ := http.NewRequest("GET", "http://"+tc.target+"/", nil)
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			resp, err := c.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, tc.want, string(body))
		})
	}
}

// startNginx runs nginx in the foreground as a reverse proxy to upstream and
// returns its address once it accepts connections. It is killed when the test
// ends.
func startNginx(t *testing.T, nginx, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	// A port the kernel just handed out is free unless another process takes
	// it in between; nginx then exits and the next port is tried.
	for range 3 {
		addr := freePort(t)
		if startNginxOn(t, nginx, dir, addr, upstream) {
			return addr
		}
	}
	require.FailNow(t, "nginx did not start")
	return ""
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// startNginxOn starts nginx on addr and reports whether it came up.
func startNginxOn(t *testing.T, nginx, dir, addr, upstream string) bool {
	t.Helper()
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen %[2]s;
		location / {
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_pass http://%[3]s;
		}
	}
}
`, dir, addr, upstream)
	path := filepath.Join(dir, "nginx.conf")
	logPath := filepath.Join(dir, "error.log")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	var out bytes.Buffer
	cmd := exec.Command(nginx, "-p", dir, "-c", path, "-e", logPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}

	// Poll with connects until nginx accepts, exits, or runs out of time.
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					log, _ := os.ReadFile(logPath)
					t.Logf("nginx output:\n%s%s", out.Bytes(), log)
				}
			})
			return true
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			t.Logf("nginx exited on %s: %s%s", addr, out.Bytes(), log)
			return false
		case <-deadline.C:
			stop()
			log, _ := os.ReadFile(logPath)
			require.FailNowf(t, "nginx did not accept", "on %s within 10s: %s%s", addr, out.Bytes(), log)
		case <-tick.C:
		}
	}
}
