package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/lb"
)

// TestDemo runs the demo as `go run ./telemetry-gateway -demo` does and checks
// its table row by row.
func TestDemo(t *testing.T) {
	var out, logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := runDemo(ctx, &out, &logs, testing.Verbose()); err != nil {
		t.Fatalf("demo failed: %v\n%s\n%s", err, out.String(), logs.String())
	}
	t.Log("\n" + out.String())
	aliases := lb.CheckSource(netip.MustParseAddr("127.0.0.200")) == nil
	ap := `127\.0\.0\.\d+:\d+`
	rows := map[string]string{
		"d1": `^d1 mqtt 3\.1\.1 127\.0\.0\.11:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.11:(\d+) gateway\.demo - d1 127\.0\.0\.11 proxy-protocol no 3/3 acked$`,
		"d2": `^d2 mqtt 5 127\.0\.0\.12:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.12:(\d+) gateway\.demo - d2 127\.0\.0\.12 proxy-protocol no 3/3 acked$`,
		"d3": `^d3 mqtt 5 127\.0\.0\.13:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.13:(\d+) gateway\.demo CN=d3 d3 127\.0\.0\.13 proxy-protocol no 3/3 acked$`,
		"d4": `^d4 mqtt 3\.1\.1 127\.0\.0\.14:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.14:(\d+) gateway\.demo - d4 127\.0\.0\.14 proxy-protocol no 3/3 acked$`,
		"d5": `^d5 mqtt 5 127\.0\.0\.99:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.99:(\d+) gateway\.demo - d5 127\.0\.0\.99 proxy-protocol no refused: CONNACK 0x87$`,
		"h6": `^h6 http 127\.0\.0\.15:\d+ 127\.0\.0\.60:\d+ - - - - 127\.0\.0\.15 x-forwarded-for no 3/3 stored$`,
	}
	if !aliases {
		t.Log("no loopback aliases: checking the reduced table")
		rows = map[string]string{}
		for _, d := range []string{"d1", "d2", "d3", "d4"} {
			rows[d] = `^` + d + ` mqtt .* (` + ap + `) 127\.0\.0\.1:\d+ (` + ap + `) gateway\.demo .* 127\.0\.0\.1 proxy-protocol no 3/3 acked$`
		}
	}
	lines := strings.Split(out.String(), "\n")
	space := regexp.MustCompile(`\s{2,}`)
	found := map[string]bool{}
	header := false
	for _, line := range lines {
		norm := space.ReplaceAllString(strings.TrimSpace(line), " ")
		if strings.HasPrefix(norm, "DEVICE PROTOCOL DEVICE ADDR SOCKET PEER PROXY SOURCE TLS SNI TLS SUBJECT CLIENT ID RESOLVED CLIENT SOURCE MASQ RESULT") {
			header = true
		}
		name, _, _ := strings.Cut(norm, " ")
		re, ok := rows[name]
		if !ok {
			continue
		}
		m := regexp.MustCompile(re).FindStringSubmatch(norm)
		if m == nil {
			t.Errorf("row %s:\n  %s\nwant %s", name, norm, re)
			continue
		}
		if len(m) == 3 && m[1] != m[2] {
			t.Errorf("row %s: the PROXY source port %s is not the device's port %s", name, m[2], m[1])
		}
		found[name] = true
	}
	if !header {
		t.Error("no table header")
	}
	for name := range rows {
		if !found[name] {
			t.Errorf("no row for %s", name)
		}
	}
	if aliases && !strings.Contains(out.String(), "sink: 15 records (15 distinct ids, 0 duplicates)") {
		t.Error("sink summary line missing or wrong")
	}
	if !strings.Contains(out.String(), "\nOK: ") {
		t.Error("no OK line")
	}
}

func TestHelpNamesEveryEnvironmentVariable(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-help"}, func(string) string { return "" }, io.Discard, &stderr); code != 0 {
		t.Fatalf("-help exit code %d", code)
	}
	for _, want := range []string{"-mqtt-addr", "[$GATEWAY_MQTT_ADDR]", "[$GATEWAY_PROXY_TRUSTED]", "[$GATEWAY_SINK_SYNC]", "-demo", "GATEWAY_"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-help lacks %q", want)
		}
	}
}

func TestOptionsFromFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{
		"GATEWAY_MQTT_ADDR":        ":1883",
		"GATEWAY_HTTP_ADDR":        ":1080",
		"GATEWAY_PROXY_TRUSTED":    "10.0.0.0/8, 192.0.2.7",
		"GATEWAY_SINK_SYNC":        "write",
		"GATEWAY_RATE":             "2.5",
		"GATEWAY_PROXY_HEADERLESS": "allow",
	}
	o, err := parseOptions([]string{"-mqtt-addr", ":2883", "-allow", "loopback", "-allow", "198.51.100.0/24"},
		func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.mqttAddr != ":2883" {
		t.Errorf("flag should win over the environment: %q", o.mqttAddr)
	}
	if o.httpAddr != ":1080" || o.rate != 2.5 || o.sinkSync.String() != "write" || o.proxyHeaderless.String() != "allow" {
		t.Errorf("environment not applied: %+v", o)
	}
	if got := o.proxyTrusted.String(); got != "10.0.0.0/8,192.0.2.7/32" {
		t.Errorf("proxy-trusted %q", got)
	}
	if got := o.allow.String(); got != "127.0.0.0/8,198.51.100.0/24,::1/128" {
		t.Errorf("repeated -allow %q", got)
	}
	if _, err := parseOptions(nil, func(k string) string {
		if k == "GATEWAY_PROXY_TRUSTED" {
			return "10.0.0.1/8"
		}
		return ""
	}, io.Discard); err == nil || !strings.Contains(err.Error(), "$GATEWAY_PROXY_TRUSTED") {
		t.Errorf("bad environment value: %v", err)
	}
	if _, err := parseOptions([]string{"-nope"}, func(string) string { return "" }, io.Discard); err == nil || err == flag.ErrHelp {
		t.Errorf("unknown flag: %v", err)
	}
}

// TestServeWiring builds the gateway as the command does and checks that
// /metrics carries both the gateway's and otelsourceip's instruments.
func TestServeWiring(t *testing.T) {
	dir := t.TempDir()
	o, err := parseOptions([]string{"-mqtt-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-sink", dir + "/t.jsonl", "-tls-self-signed-out", dir + "/cert.pem", "-log-level", "error"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g, _, cleanup, err := build(o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(context.Background(), 0)
	resp, err := http.Post("http://"+g.HTTPAddr()+"/v1/telemetry", "application/json", strings.NewReader(`{"device":"w1","seq":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("ingest: %s", resp.Status)
	}
	resp, err = http.Get("http://" + g.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"sourceip_resolutions_total{", `sourceip_outcome="resolved"`, `sourceip_source="socket"`,
		`gateway_messages_total{`, `outcome="accepted",protocol="http"`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, err := os.Stat(dir + "/cert.pem"); err != nil {
		t.Errorf("-tls-self-signed-out: %v", err)
	}
}
