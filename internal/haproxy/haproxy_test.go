//go:build unix

package haproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/internal/haproxy"
)

// frontend returns a configuration with one TCP frontend on port that sends
// each connection to backend with a PROXY v1 header.
func frontend(port int, backend string) string {
	return fmt.Sprintf(`global
    nbthread 1
defaults
    mode tcp
    timeout connect 2s
    timeout client 5s
    timeout server 5s
frontend fe
    bind 127.0.0.1:%d
    default_backend be
backend be
    server app %s send-proxy
`, port, backend)
}

// listen returns a loopback listener; it is closed when the test ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// start starts haproxy with cfg; a started haproxy is stopped when the
// test ends, whatever the test does.
func start(t *testing.T, cfg haproxy.Config) (*haproxy.Process, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p, err := haproxy.Start(ctx, cfg)
	if err == nil {
		t.Cleanup(p.Stop)
	}
	return p, err
}

// TestReadyMeansListening: when Start returns, the frontend is bound and
// forwards at once, with no retry; after Stop, haproxy has exited and its
// port and directory are released.
func TestReadyMeansListening(t *testing.T) {
	bin := e2e.Require(t, "haproxy")[0]
	app := listen(t)
	fePort := e2e.FreePorts(t, 1)[0]

	p, err := start(t, haproxy.Config{Path: bin, Text: frontend(fePort, app.Addr().String())})
	require.NoError(t, err)

	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fePort))
	require.NoError(t, err, "frontend not listening when Start returned")
	defer c.Close()
	got := make(chan string, 1)
	go func() {
		s, err := app.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(s).ReadString('\n')
		got <- line
	}()
	assert.Regexp(t, `^PROXY TCP4 127\.0\.0\.1 127\.0\.0\.1 \d+ `+fmt.Sprint(fePort)+"\r\n$", <-got)

	p.Stop()
	select {
	case <-p.Exited():
	default:
		require.FailNow(t, "Stop returned before haproxy exited")
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", fePort))
	require.NoError(t, err, "port still bound after Stop")
	l.Close()
	assert.Contains(t, p.Log(), "Loading success")
	p.Stop() // a second Stop is harmless (the clean-up is a third)
}

// TestWrap: haproxy started through a wrapper command (as the policy lab
// runs it under ip netns exec) still reports readiness.
func TestWrap(t *testing.T) {
	bins := e2e.Require(t, "haproxy", "env")
	app := listen(t)
	fePort := e2e.FreePorts(t, 1)[0]
	_, err := start(t, haproxy.Config{Path: bins[0], Wrap: []string{bins[1]}, Text: frontend(fePort, app.Addr().String())})
	require.NoError(t, err)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fePort))
	require.NoError(t, err)
	c.Close()
}

// TestStartErrors: an early exit of haproxy is an error that says why and
// carries what haproxy printed.
func TestStartErrors(t *testing.T) {
	bin := e2e.Require(t, "haproxy")[0]
	taken := listen(t)

	t.Run("port taken", func(t *testing.T) {
		_, err := start(t, haproxy.Config{Path: bin, Text: frontend(port(taken), "127.0.0.1:9")})
		require.ErrorIs(t, err, haproxy.ErrBind)
		assert.ErrorContains(t, err, "cannot bind socket", "the error carries haproxy's output")
	})
	t.Run("invalid configuration", func(t *testing.T) {
		_, err := start(t, haproxy.Config{Path: bin, Text: "frontend fe\n    no-such-keyword\n"})
		require.ErrorIs(t, err, haproxy.ErrExited)
		assert.ErrorContains(t, err, "no-such-keyword")
	})
	t.Run("context ends first", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		p, err := haproxy.Start(ctx, haproxy.Config{Path: bin, Text: frontend(0, "127.0.0.1:9")})
		if err == nil {
			p.Stop()
		}
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestStartRefusals needs no haproxy.
func TestStartRefusals(t *testing.T) {
	t.Run("no systemd support", func(t *testing.T) {
		// A stand-in for a haproxy built without USE_SYSTEMD, which
		// refuses -Ws with this alert.
		fake := filepath.Join(t.TempDir(), "haproxy")
		require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n"+
			"echo '[ALERT] master-worker mode with systemd support (-Ws) requested, but not compiled. "+
			"Use master-worker mode (-W) if you are not using Type=notify in your unit file or recompile with USE_SYSTEMD=1.' >&2\n"+
			"exit 1\n"), 0o755))
		_, err := start(t, haproxy.Config{Path: fake, Text: "global\n"})
		require.ErrorIs(t, err, haproxy.ErrNoNotify)
	})
	t.Run("missing program", func(t *testing.T) {
		_, err := start(t, haproxy.Config{Path: filepath.Join(t.TempDir(), "none"), Text: "global\n"})
		require.Error(t, err)
	})
	t.Run("empty config", func(t *testing.T) {
		_, err := start(t, haproxy.Config{Path: "haproxy"})
		require.Error(t, err)
	})
}
