package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/gorilla/websocket"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/fstest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ws"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func noEnv(string) string { return "" }

func TestHelpNamesEveryEnvironmentVariable(t *testing.T) {
	var stderr bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"-help"}, noEnv, io.Discard, &stderr), "-help exit code")
	for _, want := range []string{"-mqtt-addr", "[$GATEWAY_MQTT_ADDR]", "[$GATEWAY_PROXY_TRUSTED]", "[$GATEWAY_SINK_SYNC]", "-demo", "-version", "GATEWAY_"} {
		assert.Contains(t, stderr.String(), want)
	}
	// Flags whose zero value is not their default say what it is (a
	// newcomer's finding: -sink-sync showed none).
	for _, want := range []string{"[$GATEWAY_SINK_SYNC] (default fsync)", "[$GATEWAY_PROXY_HEADERLESS] (default refuse)", "[$GATEWAY_SINK_MIN_FREE] (default 64MiB)"} {
		assert.Contains(t, stderr.String(), want)
	}
}

func TestOptionsFromFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{
		"GATEWAY_MQTT_ADDR":        ":1883",
		"GATEWAY_HTTP_ADDR":        ":1080",
		"GATEWAY_PROXY_TRUSTED":    "10.0.0.0/8, 192.0.2.7",
		"GATEWAY_SINK_SYNC":        "write",
		"GATEWAY_SINK_MIN_FREE":    "16MiB",
		"GATEWAY_RATE":             "2.5",
		"GATEWAY_PROXY_HEADERLESS": "allow",
	}
	o, err := parseOptions([]string{"-mqtt-addr", ":2883", "-allow", "loopback", "-allow", "198.51.100.0/24"},
		func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ":2883", o.mqttAddr, "a flag wins over the environment")
	assert.Equal(t, ":1080", o.httpAddr)
	assert.Equal(t, 2.5, o.rate)
	assert.Equal(t, "write", o.sinkSync.String())
	assert.Equal(t, "allow", o.proxyHeaderless.String())
	assert.Equal(t, byteSize(16<<20), o.sinkMinFree)
	assert.Equal(t, "10.0.0.0/8,192.0.2.7/32", o.proxyTrusted.String())
	assert.Equal(t, "127.0.0.0/8,198.51.100.0/24,::1/128", o.allow.String(), "repeated -allow")

	_, err = parseOptions(nil, func(k string) string {
		return map[string]string{"GATEWAY_PROXY_TRUSTED": "10.0.0.1/8"}[k]
	}, io.Discard)
	assert.ErrorContains(t, err, "$GATEWAY_PROXY_TRUSTED")
	_, err = parseOptions([]string{"-nope"}, noEnv, io.Discard)
	assert.ErrorIs(t, err, errUsage, "unknown flag")
}

// TestFormerFlagName: -mochi-log-level, the former name of -mqtt-log-level,
// and its variable still work; a flag on the command line wins over any
// variable, and the present name over the former at the same level (a
// leftover GATEWAY_MOCHI_LOG_LEVEL overrode -mqtt-log-level given on the
// command line; a review found the former flag winning when written after
// the present one).
func TestFormerFlagName(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"the former flag", []string{"-mochi-log-level", "debug"}, nil, "debug"},
		{"the former variable", nil, map[string]string{"GATEWAY_MOCHI_LOG_LEVEL": "error"}, "error"},
		{"the present flag over the former variable", []string{"-mqtt-log-level", "debug"}, map[string]string{"GATEWAY_MOCHI_LOG_LEVEL": "error"}, "debug"},
		{"the present variable over the former one", nil, map[string]string{"GATEWAY_MOCHI_LOG_LEVEL": "error", "GATEWAY_MQTT_LOG_LEVEL": "info"}, "info"},
		// Both on the command line: the later one used to win, so the former
		// overrode the present one when written after it.
		{"the present flag over the former flag after it", []string{"-mqtt-log-level", "debug", "-mochi-log-level", "error"}, nil, "debug"},
		{"the present flag over the former flag before it", []string{"-mochi-log-level", "error", "-mqtt-log-level", "debug"}, nil, "debug"},
		// A flag on the command line wins over any variable, as -help says.
		{"the former flag over the present variable", []string{"-mochi-log-level", "error"}, map[string]string{"GATEWAY_MQTT_LOG_LEVEL": "info"}, "error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			require.NoError(t, err)
			assert.Equal(t, tt.want, o.mqttLogLevel)
		})
	}
}

// TestUsageErrors: values that parse but make no sense are usage errors
// (exit code 2) with a message naming the flag, or the environment variable
// the value came from (attack trial: each of the first ones was accepted
// without a word).
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"negative rate", []string{"-rate", "-1"}, nil, "-rate -1: want readings per second, a finite number ≥ 0"},
		{"NaN rate", []string{"-rate", "NaN"}, nil, "-rate NaN: want readings per second"},
		{"infinite rate", []string{"-rate", "+Inf"}, nil, "-rate +Inf: want readings per second"},
		{"negative rate from the environment", nil, map[string]string{"GATEWAY_RATE": "-3"}, "$GATEWAY_RATE -3: want readings per second"},
		{"negative burst", []string{"-rate-burst", "-1"}, nil, "-rate-burst -1: want at least 1 reading"},
		{"zero burst with a rate", []string{"-rate", "5", "-rate-burst", "0"}, nil, "-rate-burst 0: want at least 1 reading"},
		{"zero payload", []string{"-max-payload", "0"}, nil, "-max-payload 0: want 1 to"},
		{"negative payload", []string{"-max-payload", "-5"}, nil, "-max-payload -5: want 1 to"},
		{"negative shutdown timeout", []string{"-shutdown-timeout", "-1s"}, nil, "-shutdown-timeout -1s: want a duration > 0"},
		{"zero handshake timeout", []string{"-tls-handshake-timeout", "0"}, nil, "-tls-handshake-timeout 0s: want a duration > 0"},
		{"negative drain delay", []string{"-drain-delay", "-2s"}, nil, "-drain-delay -2s: want a duration ≥ 0"},
		{"wildcard topic prefix #", []string{"-topic-prefix", "#"}, nil, `-topic-prefix "#": contains an MQTT wildcard`},
		{"wildcard topic prefix +", []string{"-topic-prefix", "telemetry/+/"}, nil, `-topic-prefix "telemetry/+/": contains an MQTT wildcard`},
		{"server topic prefix", []string{"-topic-prefix", "$SYS/"}, nil, `-topic-prefix "$SYS/": starts with $`},
		{"empty topic prefix", []string{"-topic-prefix", ""}, nil, `-topic-prefix "": empty`},
		{"NUL in topic prefix", []string{"-topic-prefix", "a\x00"}, nil, "-topic-prefix \"a\\x00\": not valid UTF-8 without U+0000"},
		{"blank proxy-trusted", []string{"-proxy-trusted", " "}, nil, `invalid value " " for flag -proxy-trusted: " " names no address`},
		{"blank allow", []string{"-allow", ","}, nil, `invalid value "," for flag -allow: "," names no address`},
		{"blank proxy-trusted from the environment", nil, map[string]string{"GATEWAY_PROXY_TRUSTED": " "}, `$GATEWAY_PROXY_TRUSTED: " " names no address`},
		{"unknown client auth", []string{"-tls-client-auth", "bogus"}, nil, `-tls-client-auth "bogus": want none, optional or require`},
		{"required client certificates without a CA", []string{"-tls-client-auth", "require"}, nil, "-tls-client-auth require: needs -tls-client-ca"},
		{"optional client certificates without a CA", []string{"-tls-client-auth", "optional"}, nil, "-tls-client-auth optional: needs -tls-client-ca"},
		{"a CA for certificates never asked for", []string{"-tls-client-auth", "none", "-tls-client-ca", "ca.pem"}, nil, "-tls-client-auth none: contradicts -tls-client-ca"},
		{"bad log level", []string{"-log-level", "loud"}, nil, `-log-level "loud": want debug, info, warn or error`},
		{"bad MQTT log level, under the flag's former name", []string{"-mochi-log-level", "loud"}, nil, `-mochi-log-level "loud": want debug, info, warn, error or off`},
		{"bad sink-min-free", []string{"-sink-min-free", "lots"}, nil, `invalid value "lots" for flag -sink-min-free`},
		{"zero sink-max-devices", []string{"-sink-max-devices", "0"}, nil, "-sink-max-devices 0: want at least 1 device"},
		{"kube health without a service", []string{"-kube-health-addr", ":10254"}, nil, `-kube-service "": want namespace/name`},
		{"stray argument", []string{"serve"}, nil, `unexpected arguments: ["serve"]`},
		{"TLS at the load balancer without one", []string{"-tls-at-lb"}, nil, "-tls-at-lb true: needs -proxy-trusted or -proxy-trusted-file"},
		{"TLS at the load balancer and a certificate of the gateway's", []string{"-tls-at-lb", "-proxy-trusted", "10.0.0.1", "-tls-cert", "c.pem", "-tls-key", "k.pem"}, nil,
			"-tls-cert c.pem: contradicts -tls-at-lb"},
		{"TLS at the load balancer and client certificates asked by the gateway", []string{"-tls-at-lb", "-proxy-trusted", "10.0.0.1", "-tls-client-ca", "ca.pem", "-tls-client-auth", "require"}, nil,
			"-tls-client-auth require: contradicts -tls-at-lb"},
		{"TLS at the load balancer beside WebSocket", []string{"-tls-at-lb", "-proxy-trusted", "10.0.0.1", "-ws-addr", ":8081"}, nil,
			"-ws-addr :8081: contradicts -tls-at-lb"},
		{"an allowed origin with a path", []string{"-ws-origins", "https://dash.example/app"}, nil, `-ws-origins "https://dash.example/app": "https://dash.example/app": want scheme://host[:port]`},
		{"a WebSocket host that is no host", []string{"-ws-hosts", "iot.example,a b/c"}, nil, `-ws-hosts "iot.example,a b/c":`},
		{"a scheme header nobody trusted writes", []string{"-ws-proto-header", "X-Forwarded-Proto"}, nil, `-ws-proto-header "X-Forwarded-Proto": want one header name, written by the proxies of -ws-trusted`},
		{"proxy required without a load balancer", []string{"-proxy-required"}, nil, "-proxy-required true: needs -proxy-trusted or -proxy-trusted-file"},
		// A flag that does something only beside another is refused without it
		// (the final review found each of these accepted and ignored).
		{"a duplicate window that ends before a redelivery", []string{"-nats-url", "nats://127.0.0.1:4222", "-nats-replicas", "3", "-nats-duplicates", "2s", "-nats-ack-timeout", "5s"}, nil,
			"-nats-duplicates 2s: want longer than -nats-ack-timeout 5s"},
		{"JetStream replicas without JetStream", []string{"-nats-replicas", "3"}, nil, `-nats-replicas "3": needs -nats-url, without which it does nothing`},
		{"a JetStream stream from the environment without JetStream", nil, map[string]string{"GATEWAY_NATS_STREAM": "T"}, `$GATEWAY_NATS_STREAM "T": needs -nats-url`},
		{"WebSocket proxies without a WebSocket listener", []string{"-ws-trusted", "10.0.0.0/8"}, nil, `-ws-trusted "10.0.0.0/8": needs -ws-addr`},
		{"an HTTP header nobody trusted writes", []string{"-http-header", "X-Real-IP"}, nil, `-http-header "X-Real-IP": needs -http-trusted`},
		{"a Service without the health check", []string{"-kube-service", "default/gw"}, nil, `-kube-service "default/gw": needs -kube-health-addr`},
		// A review found each of these accepted and ignored too.
		{"a burst without a rate", []string{"-rate-burst", "5"}, nil, `-rate-burst "5": needs -rate`},
		{"a rate wait from the environment without a rate", nil, map[string]string{"GATEWAY_RATE_MAX_WAIT": "5s"}, `$GATEWAY_RATE_MAX_WAIT "5s": needs -rate`},
		{"headerless load balancers without any", []string{"-proxy-headerless", "allow"}, nil, `-proxy-headerless "allow": needs -proxy-trusted, -proxy-trusted-file or -ws-proxy-trusted`},
		{"a PROXY header timeout without PROXY protocol", []string{"-proxy-header-timeout", "1s"}, nil, `-proxy-header-timeout "1s": needs -proxy-trusted`},
		{"verbose without the demo", []string{"-v"}, nil, `-v "true": needs -demo`},
		{"an empty MQTT address", []string{"-mqtt-addr", ""}, nil, `-mqtt-addr "": want the MQTT listener's host:port`},
		{"an empty sink path", []string{"-sink", ""}, nil, `-sink "": want the file readings are appended to, or -nats-url`},
		{"an HTTP header that is no field name", []string{"-http-trusted", "10.0.0.0/8", "-http-header", "X Real IP"}, nil, `-http-header "X Real IP": clientip: invalid configuration`},
		{"a WebSocket header that is no field name", []string{"-ws-addr", ":8081", "-ws-trusted", "10.0.0.0/8", "-ws-header", "X:F"}, nil, `-ws-header "X:F": clientip: invalid configuration`},
		{"HTTP proxies with HTTP ingest disabled", []string{"-http-addr", "", "-http-trusted", "10.0.0.0/8"}, nil, `-http-trusted "10.0.0.0/8": needs -http-addr`},
		{"explain operators without the admin listener", []string{"-admin-addr", "", "-explain-allow", "10.0.0.0/8"}, nil, `-explain-allow "10.0.0.0/8": needs -admin-addr`},
		{"a free-space interval with the check off", []string{"-sink-min-free", "0", "-sink-check-interval", "5s"}, nil, `-sink-check-interval "5s": needs -sink-min-free above 0`},
		{"a drain delay as long as the whole shutdown", []string{"-drain-delay", "30s"}, nil, "-drain-delay 30s: want less than -shutdown-timeout 30s"},
		{"a duplicate window for a stream never created", []string{"-nats-url", "nats://127.0.0.1:4222", "-nats-duplicates", "5m"}, nil, `-nats-duplicates "5m0s": needs -nats-replicas above 0`},
		{"blank WebSocket hosts, which would answer to any", []string{"-ws-addr", ":8081", "-ws-hosts", " , "}, nil, `-ws-hosts " , ": names no host`},
		{"blank WebSocket hosts from the environment", []string{"-ws-addr", ":8081"}, map[string]string{"GATEWAY_WS_HOSTS": ","}, `$GATEWAY_WS_HOSTS ",": names no host`},
		{"no name for the generated certificate", []string{"-tls-hosts", ","}, nil, `-tls-hosts ",": want at least one name or address`},
		{"a flag beside the demo", []string{"-demo", "-mqtt-addr", ":1"}, nil, `-mqtt-addr ":1": contradicts -demo`},
		{"a file sink's fsync mode beside JetStream", []string{"-nats-url", "nats://127.0.0.1:4222", "-sink-sync", "write"}, nil, "-sink-sync write: contradicts -nats-url"},
		{"a file sink's device index beside JetStream", []string{"-nats-url", "nats://127.0.0.1:4222"}, map[string]string{"GATEWAY_SINK_MAX_DEVICES": "10"}, "$GATEWAY_SINK_MAX_DEVICES 10: contradicts -nats-url"},
		{"a key without its certificate", []string{"-tls-key", "k.pem"}, nil, `-tls-cert "": needs -tls-key "k.pem"`},
		{"a certificate without its key", []string{"-tls-cert", "c.pem"}, nil, `-tls-cert "c.pem": needs -tls-key ""`},
		{"self-signed names beside a certificate", []string{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-hosts", "gw.example"}, nil, `-tls-hosts "gw.example": contradicts -tls-cert`},
		{"a self-signed output beside a certificate", []string{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-self-signed-out", "pin.pem"}, nil, `-tls-self-signed-out "pin.pem": contradicts -tls-cert`},
		{"self-signed names with TLS at the load balancer", []string{"-tls-at-lb", "-proxy-trusted", "10.0.0.1", "-tls-hosts", "gw.example"}, nil, `-tls-hosts "gw.example": contradicts -tls-at-lb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A configuration that is wrongly accepted starts a gateway:
			// in a directory of its own, and stopped at once by the
			// canceled context, so that the test fails instead of serving.
			t.Chdir(t.TempDir())
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, tt.args, func(k string) string { return tt.env[k] }, &stdout, &stderr)
			assert.Equal(t, 2, code, "exit code; stderr:\n%s", stderr.String())
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String(), "nothing started")
		})
	}
}

// TestVersion: -version prints the module version from the build
// information and exits 0.
func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"-version"}, noEnv, &stdout, io.Discard))
	assert.Regexp(t, `^telemetry-gateway github\.com/sourceip/sourceip/examples \S+, .*go1\.\d+`, stdout.String())
}

// logLines collects the JSON log lines the command writes and lets a test
// wait for one.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raw.Write(p)
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			l.lines = append(l.lines, m)
		}
	}
	return len(p), nil
}

// field waits for the first line with msg and returns its field key.
func (l *logLines) field(t *testing.T, msg, key string) string {
	t.Helper()
	var v string
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, m := range l.lines {
			if m["msg"] == msg {
				v = fmt.Sprint(m[key])
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "no %q line in:\n%s", msg, &l.raw)
	return v
}

// serveCommand runs the command with args (and loopback listeners on port 0)
// until the returned stop is called, which returns the exit code.
func serveCommand(t *testing.T, args ...string) (logs *logLines, stop func() int) {
	t.Helper()
	logs = new(logLines)
	ctx, cancel := context.WithCancel(t.Context())
	code := make(chan int, 1)
	args = append([]string{"-mqtt-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-shutdown-timeout", "10s"}, args...)
	go func() { code <- run(ctx, args, noEnv, logs, logs) }()
	t.Cleanup(cancel)
	return logs, func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(15 * time.Second):
			require.FailNow(t, "the command did not stop")
			return -1
		}
	}
}

// TestMTLSFailsClosed reproduces the attack trial's mTLS finding with the
// real mosquitto_pub: -tls-client-auth require without -tls-client-ca
// started a gateway that checked no client certificate, and a device
// without one published. Now that configuration does not start, and with the
// CA a device without a certificate is refused while one with a certificate
// the CA issued publishes.
func TestMTLSFailsClosed(t *testing.T) {
	mosq := e2e.Require(t, "mosquitto_pub")[0]
	dir := t.TempDir()
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"-mqtt-addr", "127.0.0.1:0", "-http-addr", "", "-admin-addr", "", "-sink", filepath.Join(dir, "open.jsonl"),
		"-tls-client-auth", "require", "-tls-self-signed-out", filepath.Join(dir, "srv.pem")}, noEnv, io.Discard, &stderr)
	require.Equal(t, 2, code, "-tls-client-auth require without -tls-client-ca; stderr:\n%s", stderr.String())
	assert.Contains(t, stderr.String(), "needs -tls-client-ca")
	assert.NoFileExists(t, filepath.Join(dir, "open.jsonl"), "nothing started")

	ca, err := pki.NewCA("devices")
	require.NoError(t, err)
	srv, err := ca.Server("127.0.0.1")
	require.NoError(t, err)
	x1, err := ca.Client("x1")
	require.NoError(t, err)
	files := map[string]string{}
	for _, name := range []string{"ca.crt", "srv.crt", "srv.key", "x1.crt", "x1.key"} {
		files[name] = filepath.Join(dir, name)
	}
	require.NoError(t, os.WriteFile(files["ca.crt"], ca.PEM(), 0o644))
	require.NoError(t, pki.WriteFiles(srv, files["srv.crt"], files["srv.key"]))
	require.NoError(t, pki.WriteFiles(x1, files["x1.crt"], files["x1.key"]))
	sinkPath := filepath.Join(dir, "t.jsonl")
	logs, stop := serveCommand(t, "-sink", sinkPath, "-tls-cert", files["srv.crt"], "-tls-key", files["srv.key"],
		"-tls-client-ca", files["ca.crt"], "-tls-client-auth", "require")
	mqttAddr := logs.field(t, "gateway started", "mqtt")
	_, port, _ := strings.Cut(mqttAddr, ":")
	publish := func(seq int, cert ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		args := append([]string{"-h", "127.0.0.1", "-p", port, "--cafile", files["ca.crt"], "-q", "1", "-t", "telemetry/x1", "-i", "x1", "-d",
			"-m", fmt.Sprintf(`{"device":"x1","seq":%d}`, seq)}, cert...)
		return exec.CommandContext(ctx, mosq, args...).CombinedOutput()
	}
	out, err := publish(1)
	assert.Error(t, err, "a device without a client certificate published:\n%s", out)
	assert.NotContains(t, string(out), "received PUBACK")
	out, err = publish(2, "--cert", files["x1.crt"], "--key", files["x1.key"])
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "received PUBACK")

	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
	sum, err := sink.SummarizeFile(sinkPath)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"x1/2": 1}, sum.Count, "only the device with a certificate is in the sink")
}

// TestSinkFailureExitsNonZero: when the sink failed while the gateway
// served (its file system filled up), the command logs the failure at
// shutdown and exits 1 (attack trial: it logged "error":null and exited 0).
func TestSinkFailureExitsNonZero(t *testing.T) {
	dir := fstest.Small(t, 1<<20)
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-sink-min-free", "0", "-sink-sync", "write")
	url := "http://" + logs.field(t, "gateway started", "http") + "/v1/telemetry"
	fstest.Fill(t, dir)
	status := 0
	for seq := 0; seq < 1000 && status != http.StatusServiceUnavailable; seq++ { // the last page may have room for a few
		resp, err := http.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"device":"f1","seq":%d}`, seq)))
		require.NoError(t, err)
		resp.Body.Close()
		status = resp.StatusCode
	}
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, 1, stop(), "exit code; log:\n%s", &logs.raw)
	assert.Contains(t, logs.field(t, "gateway stopped with an error", "error"), "no space left on device")
	assert.Contains(t, logs.raw.String(), "telemetry-gateway: sink: failed; refusing records")
}

// TestServeWiring builds the gateway as the command does and checks that
// /metrics carries both the gateway's and otelsourceip's instruments.
func TestServeWiring(t *testing.T) {
	dir := t.TempDir()
	o, err := parseOptions([]string{"-mqtt-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-sink", dir + "/t.jsonl", "-tls-self-signed-out", dir + "/cert.pem", "-log-level", "error"}, noEnv, io.Discard)
	require.NoError(t, err)
	g, _, cleanup, err := build(o, io.Discard)
	require.NoError(t, err)
	defer cleanup()
	require.NoError(t, g.Start())
	defer g.Shutdown(context.Background(), 0)
	resp, err := http.Post("http://"+g.HTTPAddr()+"/v1/telemetry", "application/json", strings.NewReader(`{"device":"w1","seq":1}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "ingest")
	resp, err = http.Get("http://" + g.AdminAddr() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"sourceip_resolutions_total{", `sourceip_outcome="resolved"`, `sourceip_source="socket"`,
		`gateway_messages_total{`, `outcome="accepted",protocol="http"`, "go_goroutines"} {
		assert.Contains(t, string(body), want)
	}
	// Both scopes name their version from the build information, "(devel)"
	// from a checkout (a newcomer's finding: otelsourceip's said
	// "v0.0.0-00010101000000-000000000000", the placeholder of a replaced
	// module, and the gateway's said nothing).
	for _, sc := range []string{"github.com/sourceip/sourceip/middleware/otelsourceip", "github.com/sourceip/sourceip/examples/telemetry-gateway"} {
		assert.Contains(t, string(body), `otel_scope_name="`+sc+`",otel_scope_schema_url=`, "scope %s", sc)
		assert.Regexp(t, `otel_scope_name="`+sc+`",otel_scope_schema_url="[^"]*",otel_scope_version="\(devel\)"`, string(body), "scope %s", sc)
	}
	assert.NotContains(t, string(body), `otel_scope_version="v0.0.0-`)
	assert.FileExists(t, dir+"/cert.pem", "-tls-self-signed-out")
}

// TestTLSAtLBCommand: -tls-at-lb serves plain MQTT behind the load balancers
// of -proxy-trusted, and -tls-client-ca verifies again the certificate one
// forwards in the SSL TLV.
func TestTLSAtLBCommand(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("devices")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM(), 0o644))
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-tls-at-lb", "-proxy-trusted", "127.0.0.200",
		"-tls-client-ca", filepath.Join(dir, "ca.crt"))
	addr := logs.field(t, "gateway started", "mqtt")
	assert.Equal(t, "load balancer", logs.field(t, "gateway started", "tls_terminated_by"))
	cert, err := ca.Client("lb1")
	require.NoError(t, err)
	ssl := proxyproto.SSL{Client: proxyproto.SSLClientTLS | proxyproto.SSLClientCertConn, Version: "TLSv1.3", CN: "lb1", CertDER: string(cert.Certificate[0])}
	tlvs, err := proxyproto.NewTLVs(ssl.TLV())
	require.NoError(t, err)
	c, err := device.Connect(t.Context(), device.Config{ID: "lb1", Version: 5, Addr: addr, Local: netip.MustParseAddr("127.0.0.200"),
		Proxy: 2, Claim: netip.MustParseAddrPort("192.0.2.7:7000"), TLVs: tlvs, Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, c.Publish(t.Context(), "telemetry/lb1", 1, device.Reading("lb1", 1, 1)))
	c.Close()
	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
	assert.Contains(t, logs.raw.String(), `"lb_tls":{"reported":{"tls":true,"version":"TLSv1.3","cert":"verified","cn":"lb1","cert_sha256":`)
	assert.Contains(t, logs.raw.String(), `"identity":"certificate"},"tls_sni":"","tls_subject":"CN=lb1"`)
}

// TestWebSocketCommand: the -ws-* flags reach the WebSocket listener: its
// chain trusts -ws-trusted's header, -ws-origins and -ws-hosts hold
// browsers to their origins.
func TestWebSocketCommand(t *testing.T) {
	dir := t.TempDir()
	logs, stop := serveCommand(t, "-sink", filepath.Join(dir, "t.jsonl"), "-tls-self-signed-out", filepath.Join(dir, "cert.pem"),
		"-ws-addr", "127.0.0.1:0", "-ws-trusted", "127.0.0.1", "-ws-proto-header", "X-Forwarded-Proto",
		"-ws-hosts", "iot.example", "-ws-origins", "https://dashboard.example")
	addr := logs.field(t, "gateway started", "ws")
	dial := func(host string, h http.Header) (*websocket.Conn, *http.Response, error) {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{"mqtt"},
			NetDialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}
		return d.Dial("ws://"+host+"/mqtt", h)
	}
	c, _, err := dial("iot.example", http.Header{"X-Forwarded-For": {"192.0.2.9"}, "X-Forwarded-Proto": {"https"}, "Origin": {"https://dashboard.example"}})
	require.NoError(t, err, "an allowed origin")
	conn := ws.NewConn(c)
	pc := paho.NewClient(paho.ClientConfig{Conn: packets.NewThreadSafeConn(conn), PacketTimeout: 5 * time.Second})
	_, err = pc.Connect(t.Context(), &paho.Connect{ClientID: "wsc1", CleanStart: true, KeepAlive: 30})
	require.NoError(t, err)
	_, err = pc.Publish(t.Context(), &paho.Publish{Topic: "telemetry/wsc1", QoS: 1, Payload: device.Reading("wsc1", 1, 1)})
	require.NoError(t, err)
	_ = pc.Disconnect(&paho.Disconnect{})
	for _, tt := range []struct {
		host, origin string
	}{{"iot.example", "https://evil.example"}, {"evil.example", ""}} {
		h := http.Header{"X-Forwarded-Proto": {"https"}}
		if tt.origin != "" {
			h.Set("Origin", tt.origin)
		}
		_, resp, err := dial(tt.host, h)
		require.Error(t, err)
		if assert.NotNil(t, resp) {
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s", tt.host, tt.origin)
		}
	}
	require.Equal(t, 0, stop(), "exit code; log:\n%s", &logs.raw)
	assert.Contains(t, logs.raw.String(), `"clientip":{"client":"192.0.2.9","source":"x-forwarded-for"`)
	sum, err := sink.SummarizeFile(filepath.Join(dir, "t.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Count["wsc1/1"])
}
