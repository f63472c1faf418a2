package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadSizes: sizes no measurement can run with are refused before
// anything starts (the final review found -rounds 0 and -conns -1 panicking
// in the middle of a run).
func TestBadSizes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds 0: want at least 1"},
		{[]string{"-conns", "-1"}, "-conns -1: want at least 1"},
		{[]string{"-inflight", "0"}, "-inflight 0: want at least 1"},
		{[]string{"-inflight", "70000"}, "-inflight 70000: want at most 65535"},
		{[]string{"-conns", "8", "-messages", "5"}, "-messages 5: want at least 8"},
		{[]string{"-devices", "0"}, "-devices 0: want at least 1"},
		{[]string{"-idle", "-3"}, "-idle -3: want at least 1"},
		{[]string{"-mqtt-version", "3"}, "-mqtt-version 3: want 4 (3.1.1) or 5"},
		{[]string{"now"}, `unexpected arguments: ["now"]`},
	} {
		var out bytes.Buffer
		assert.ErrorContains(t, run(t.Context(), tc.args, &out), tc.want)
		assert.Empty(t, out.String(), "nothing measured for %v", tc.args)
	}
}

// TestBenchSmall runs the benchmark command at a small size against the
// gateway and the real mosquitto, so that the command in the README keeps
// working; the figures themselves are not judged.
func TestBenchSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	mosq := e2e.Require(t, "mosquitto")[0]
	var out bytes.Buffer
	err := run(t.Context(), []string{"-rounds", "1", "-targets", "gateway,mosquitto", "-mosquitto", mosq,
		"-conns", "2", "-inflight", "4", "-messages", "400", "-devices", "20", "-device-messages", "200", "-idle", "50"}, &out)
	require.NoError(t, err, "%s", &out)
	t.Logf("\n%s", &out)
	for _, want := range []string{
		`(?m)^window: 2 connections x 4 in flight, 400 readings$`,
		`(?m)^devices: 20 connections x 1 in flight, 200 readings$`,
		`(?m)^idle: 50 TLS connections`,
		`(?m)^  gateway +\d+ +[\d.]+[µm]?s +[\d.]+[µm]?s +[\d.]+µs +[\d.]+µs `,
		`(?m)^  mosquitto +\d+ +[\d.]+[µm]?s +[\d.]+[µm]?s +[\d.]+µs +[\d.]+µs `,
		`(?m)^  gateway +-?[\d.]+ kB +-?[\d.]+ kB +-?[\d.]+ kB`,
	} {
		assert.Regexp(t, regexp.MustCompile(want), out.String())
	}
}
