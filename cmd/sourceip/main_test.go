package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(nil, &out, &errb), errb.String())
	for _, want := range []string{
		"result: 203.0.113.7 from socket (peer 203.0.113.7:51000)",
		"result: 198.51.100.20 from x-forwarded-for hop 2 via 10.0.0.3",
		"result: 198.51.100.77 from proxy-protocol hop 1 via 192.0.2.10",
		"result: 2001:db8:cafe::17 from forwarded hop 2 via 10.0.0.9",
		`error:  clientip: malformed address (hop 1 in X-Forwarded-For: "not-an-ip")`,
		"error:  clientip: address is a masquerading node",
	} {
		assert.Contains(t, out.String(), want)
	}
}

func TestRun(t *testing.T) {
	resolve := []string{"-peer", "10.0.0.1:4431", "-trusted", "10.0.0.0/8", "-header", "X-Forwarded-For"}
	with := func(more ...string) []string { return append(append([]string(nil), resolve...), more...) }
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  string // substring of stdout; "" means stdout must be empty
		stderr  string // substring of stderr; "" means stderr must be empty
		noUsage bool   // a usage error prints the usage after it; a config error does not
	}{
		{name: "resolve from flags", args: with("-H", "X-Forwarded-For: 6.6.6.6, 203.0.113.7"),
			stdout: `"client":"203.0.113.7","source":"x-forwarded-for"`},
		{name: "masqueraded from flags", args: with("-H", "X-Forwarded-For: 6.6.6.6, 203.0.113.7", "-masquerade", "203.0.113.0/24"),
			stdout: "error:  clientip: address is a masquerading node"},
		{name: "-h", args: []string{"-h"}, stdout: "usage: sourceip"},
		{name: "-help after flags", args: with("-help"), stdout: "-masquerade prefixes"},
		{name: "-version", args: []string{"-version"}, stdout: "sourceip (devel), go1."},
		{name: "-version with the other flags", args: with("-version", "-H", "X-Forwarded-For: 203.0.113.7"), stdout: "sourceip (devel), go1."},
		{name: "-version and an argument", args: []string{"-version", "foo"}, code: 2, stderr: `unexpected argument "foo"`},

		{name: "positional argument stops parsing", code: 2,
			args:   with("-H", "X-Forwarded-For: 203.0.113.7", "198.51.100.9", "-masquerade", "203.0.113.0/24"),
			stderr: `sourceip: unexpected argument "198.51.100.9"`},
		{name: "positional argument alone", args: []string{"foo"}, code: 2, stderr: `unexpected argument "foo"`},
		{name: "positional argument after --", args: with("--", "-masquerade"), code: 2, stderr: `unexpected argument "-masquerade"`},
		{name: "flags without -peer", args: []string{"-trusted", "10.0.0.0/8", "-header", "X-Forwarded-For"}, code: 2,
			stderr: "-header, -trusted given without -peer (the built-in cases run only with no flags)"},
		{name: "empty -peer with flags", args: []string{"-peer", "", "-hops", "1"}, code: 2, stderr: "-hops given without -peer"},
		{name: "unknown flag", args: []string{"-nope"}, code: 2, stderr: "sourceip: flag provided but not defined: -nope"},
		{name: "bad flag value", args: []string{"-trusted", "10.0.0.1/8"}, code: 2, stderr: "sourceip: invalid value"},

		{name: "bad -peer", args: []string{"-peer", "nope"}, code: 2, stderr: "sourceip: -peer:", noUsage: true},
		{name: "bad config", args: []string{"-peer", "10.0.0.1:1", "-header", "X-Forwarded-For"}, code: 2, stderr: "sourceip: ", noUsage: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			assert.Equal(t, tc.code, code, "exit status\nstdout: %s\nstderr: %s", &out, &errb)
			check := func(name, got, want string) {
				if want == "" {
					assert.Empty(t, got, name)
				} else {
					assert.Contains(t, got, want, name)
				}
			}
			check("stdout", out.String(), tc.stdout)
			check("stderr", errb.String(), tc.stderr)
			if tc.code == 2 {
				assert.Equal(t, 1, strings.Count(errb.String(), "sourceip:"), "stderr names the error once: %s", &errb)
				assert.Equal(t, !tc.noUsage, strings.Contains(errb.String(), "usage: sourceip"), "usage printed: %s", &errb)
			}
		})
	}
}
