package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/proxyproto"
)

// with returns the log lines with msg so far.
func (l *logLines) with(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// waitLines waits until there are n lines with msg and returns them.
func (l *logLines) waitLines(t *testing.T, msg string, n int) []map[string]any {
	t.Helper()
	require.Eventually(t, func() bool { return len(l.with(msg)) >= n }, 10*time.Second, 5*time.Millisecond,
		"fewer than %d %q lines in:\n%s", n, msg, &l.raw)
	return l.with(msg)
}

// TestProxyTrustedFileReload runs the command with -proxy-trusted-file and
// changes the file under it: the load balancers it lists are trusted from
// the start, a SIGHUP installs the new list and logs the diff, the load
// balancer that left has its next PROXY header refused, and a file that
// does not parse changes nothing.
func TestProxyTrustedFileReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lbs.txt")
	require.NoError(t, os.WriteFile(file, []byte("# the MQTT load balancers\n127.0.0.200\n"), 0o644))
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-http-addr", "", "-proxy-trusted-file", file)
	mqttAddr := logs.field(t, "gateway started", "mqtt")

	changed := logs.waitLines(t, "trust changed", 1)
	assert.Equal(t, map[string]any{"ranges": "proxy-trusted-file", "trusted_proxies_added": "127.0.0.200/32"}, changed[0]["change"])
	assert.Equal(t, "mqtt", changed[0]["chain"])

	// proxyRejections counts the connections from src whose PROXY header
	// the gateway refused as untrusted.
	proxyRejections := func(src string) int {
		n := 0
		for _, m := range logs.with("mqtt connection failed") {
			r, _ := m["rejection"].(map[string]any)
			if m["stage"] == "proxy" && r["reason"] == "untrusted_header" {
				if ap, err := netip.ParseAddrPort(fmt.Sprint(r["peer"])); err == nil && ap.Addr().String() == src {
					n++
				}
			}
		}
		return n
	}
	// connect sends a PROXY header from src, then closes; the gateway
	// either refuses the header or waits for a TLS handshake that never
	// comes.
	connect := func(src string) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := proxyproto.DialContext(t.Context(), d, "tcp", mqttAddr, proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy,
			Source:      netip.MustParseAddrPort("203.0.113.7:5555"),
			Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
		})
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		io.Copy(io.Discard, c) // until the gateway closes it, or the deadline
		c.Close()
	}

	refused := func(src, why string) {
		t.Helper()
		require.Eventually(t, func() bool { return proxyRejections(src) == 1 }, 10*time.Second, 5*time.Millisecond,
			"%s (%s) was not refused:\n%s", src, why, &logs.raw)
	}
	connect("127.0.0.201")
	refused("127.0.0.201", "a load balancer not in the file")
	connect("127.0.0.200")

	// The load balancers change: .200 leaves, .201 joins.
	require.NoError(t, os.WriteFile(file, []byte("127.0.0.201\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	changed = logs.waitLines(t, "trust changed", 2)
	assert.Equal(t, map[string]any{"ranges": "proxy-trusted-file", "trusted_proxies_added": "127.0.0.201/32", "trusted_proxies_removed": "127.0.0.200/32"}, changed[1]["change"])

	connect("127.0.0.200")
	refused("127.0.0.200", "the load balancer that left the file")
	connect("127.0.0.201")

	// A file that does not parse is logged; the trust in force stays.
	require.NoError(t, os.WriteFile(file, []byte("127.0.0.202/8\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	failed := logs.waitLines(t, "-proxy-trusted-file not reloaded; the load balancers in force stay", 1)
	assert.Contains(t, failed[0]["error"], "host bits are set")

	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
	assert.Len(t, logs.with("trust changed"), 2, "a failed reload changed the trust")
	assert.Equal(t, 1, proxyRejections("127.0.0.200"), "the load balancer in the file was refused before it left")
	assert.Equal(t, 1, proxyRejections("127.0.0.201"), "the load balancer that joined was refused")
}

// An unreadable -proxy-trusted-file stops the command before it starts.
func TestProxyTrustedFileMissing(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"-mqtt-addr", "127.0.0.1:0", "-http-addr", "", "-admin-addr", "",
		"-sink", filepath.Join(dir, "t.jsonl"), "-proxy-trusted-file", filepath.Join(dir, "missing.txt")}, noEnv, io.Discard, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "-proxy-trusted-file: open ")
	assert.NoFileExists(t, filepath.Join(dir, "t.jsonl"), "the gateway started")
}

// TestProxyTrustedFileSIGHUPWhileStarting: a SIGHUP that arrives while the
// gateway starts, after it began reading -proxy-trusted-file, reloads the
// file once the gateway has started. It ended the process (SIGHUP's default
// action: SIGHUP was caught only once the gateway had started), so a
// ConfigMap change during a slow start restarted the gateway (found by the
// command review, 2026-12-03). A FIFO holds the start in the file's first
// read.
func TestProxyTrustedFileSIGHUPWhileStarting(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "lbs.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// write opens the FIFO, which returns once the gateway opened it to
	// read, and writes the load balancers.
	write := func(lbs string) {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString(lbs)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-http-addr", "", "-proxy-trusted-file", fifo)

	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the gateway is reading the file: it has not started
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	_, err = f.WriteString("127.0.0.200\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	logs.field(t, "gateway started", "mqtt")
	write("127.0.0.201\n") // the reload the SIGHUP asked for
	changed := logs.waitLines(t, "trust changed", 2)
	assert.Equal(t, map[string]any{"ranges": "proxy-trusted-file", "trusted_proxies_added": "127.0.0.201/32", "trusted_proxies_removed": "127.0.0.200/32"}, changed[1]["change"])
	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
}

// TestSIGHUPWithoutTrustFile: a SIGHUP to a gateway without
// -proxy-trusted-file is logged and the gateway serves on. It ended the
// process (SIGHUP's default action: the signal was caught only with a file
// to reload), so a reload hook sent to every container, or a config-reloader
// sidecar's signal, restarted the gateway and dropped its devices (left
// alone by the command review, 2026-12-03). Without the handler the signal
// ends this test binary.
func TestSIGHUPWithoutTrustFile(t *testing.T) {
	dir := t.TempDir()
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-http-addr", "")
	logs.field(t, "gateway started", "mqtt")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	logs.waitLines(t, "SIGHUP: nothing to reload (no -proxy-trusted-file); serving on", 1)
	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
	assert.Len(t, logs.with("signal received; shutting down"), 1, "the gateway shut down once, when the test stopped it")
}

// TestProxyTrustedFileThatBlocksDoesNotHoldShutdown: a -proxy-trusted-file
// that is a pipe with no writer (a named pipe, or <(…) whose command
// hangs) holds its read; SIGTERM stops the gateway all the same, during a
// reload (it waited for the read, so the drain never began and the
// orchestrator's SIGKILL ended the process) and during the start (the
// command exits 1: the gateway did not start).
func TestProxyTrustedFileThatBlocksDoesNotHoldShutdown(t *testing.T) {
	t.Run("reload", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "lbs.txt")
		require.NoError(t, os.WriteFile(file, []byte("127.0.0.200\n"), 0o644))
		logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-http-addr", "", "-proxy-trusted-file", file)
		logs.field(t, "gateway started", "mqtt")
		require.NoError(t, os.Remove(file))
		require.NoError(t, syscall.Mkfifo(file, 0o600))
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
		logs.waitLines(t, "SIGHUP: reloading -proxy-trusted-file", 1)
		require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
		assert.Len(t, logs.with("gateway stopped"), 1, "the gateway drained:\n%s", &logs.raw)
		unblockFIFO(t, file)
	})
	t.Run("start", func(t *testing.T) {
		dir := t.TempDir()
		fifo := filepath.Join(dir, "lbs.fifo")
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))
		logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-http-addr", "", "-proxy-trusted-file", fifo)
		require.Equal(t, 1, stop(), "exit code; log:\n%s", &logs.raw)
		assert.Contains(t, logs.raw.String(), "not read before the gateway was stopped")
		assert.NoFileExists(t, filepath.Join(dir, "t.jsonl"), "the gateway started")
		unblockFIFO(t, fifo)
	})
}

// unblockFIFO opens the named pipe for writing and closes it, so that the
// read the gateway left behind ends instead of outliving the test.
func unblockFIFO(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestWideTrustWarns: a trusted range wider than any load balancer needs
// (shorter than /8, or an IPv6 prefix that carries every IPv4 address, as
// ranges.CheckSet judges) is logged as a warning naming its flag, at start
// and when -proxy-trusted-file brings one on SIGHUP: every client inside it
// can claim any address. The gateway accepted such ranges without a word
// (left alone by the command review, 2026-12-03). Private load-balancer
// ranges give no warning.
func TestWideTrustWarns(t *testing.T) {
	const warning = "a trusted range is wider than any load balancer needs: every client inside it can claim any address"
	dir := t.TempDir()
	file := filepath.Join(dir, "lbs.txt")
	require.NoError(t, os.WriteFile(file, []byte("10.0.0.0/8\n"), 0o644))
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"),
		"-proxy-trusted", "10.0.0.0/7", "-http-trusted", "64:ff9b::/96", "-proxy-trusted-file", file)
	logs.field(t, "gateway started", "mqtt")
	warned := logs.with(warning)
	require.Len(t, warned, 2, "log:\n%s", &logs.raw)
	assert.Equal(t, "-proxy-trusted", warned[0]["flag"])
	assert.Contains(t, warned[0]["error"], "10.0.0.0/7")
	assert.Equal(t, "-http-trusted", warned[1]["flag"])
	assert.Contains(t, warned[1]["error"], "64:ff9b::/96")

	require.NoError(t, os.WriteFile(file, []byte("2002::/16\n"), 0o644))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	warned = logs.waitLines(t, warning, 3)
	assert.Equal(t, "-proxy-trusted-file", warned[2]["flag"])
	assert.Contains(t, warned[2]["error"], "2002::/16")
	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
}
