package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/explain"
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
			stdout: `"msg":"resolved","clientip":{"client":"203.0.113.7","source":"x-forwarded-for"`},
		{name: "the walk shows a forged entry unread", args: with("-H", "X-Forwarded-For: 6.6.6.6, 203.0.113.7"),
			stdout: "X-Forwarded-For  6.6.6.6      6.6.6.6        unread"},
		{name: "masqueraded from flags exits 1", args: with("-H", "X-Forwarded-For: 6.6.6.6, 203.0.113.7", "-masquerade", "203.0.113.0/24"),
			code: 1, stdout: `"msg":"unresolved","reason":"masqueraded","error":"clientip: address is a masquerading node"`},

		// Issue 16 §3: command lines that gave wrong answers quietly.
		{name: "-H without -header is refused, not silently ignored", code: 2,
			args:   []string{"-peer", "10.0.0.1:4431", "-trusted", "10.0.0.0/8", "-H", "X-Forwarded-For: 6.6.6.6, 203.0.113.7"},
			stderr: "-H X-Forwarded-For would not be read: no -header is set"},
		{name: "-H naming another header than -header says it was not read", args: with("-H", "X-Forwarded-For: 203.0.113.7", "-H", "X-Real-IP: 198.51.100.1"),
			stdout: "X-Real-IP: \"198.51.100.1\"\n        not read: the configuration reads X-Forwarded-For only"},
		{name: "-H naming a header that is no forwarding header says it was not read", args: with("-H", "X-Forwarded-For: 203.0.113.7", "-H", "Foo: 198.51.100.1"),
			stdout: "other headers:\n    Foo: \"198.51.100.1\"\n        not read: the configuration reads X-Forwarded-For only"},
		{name: "-H with an empty header name is refused", args: with("-H", ": 198.51.100.1"), code: 2,
			stderr: `"" is not a header name`},
		{name: "-H with a space in the header name is refused", args: with("-H", "X Forwarded For: 198.51.100.1"), code: 2,
			stderr: `"X Forwarded For" is not a header name`},
		{name: "an empty -peer is refused, not taken for no flags (which runs the built-in cases)", args: []string{"-peer", ""}, code: 2,
			stderr: `-peer is empty: want addr:port or "unix"`},
		{name: "an empty -proxy is refused", args: with("-proxy", ""), code: 2, stderr: "-proxy is empty: want addr:port"},
		{name: "an unresolved chain exits 1 and the JSON names the error kind", code: 1,
			args:   with("-H", "X-Forwarded-For: 203.0.113.7, not-an-ip"),
			stdout: `"msg":"unresolved","reason":"malformed","error":"clientip: malformed address (hop 1 in X-Forwarded-For: \"not-an-ip\")"`},
		{name: "every hop trusted exits 1 with its kind", code: 1, args: with("-H", "X-Forwarded-For: 10.0.0.7"),
			stdout: "  reason: all_trusted\n"},
		{name: "a trusted peer without the header exits 1", code: 1, args: resolve,
			stdout: `"reason":"all_trusted"`},
		{name: "-fetch with resolver flags", args: []string{"-fetch", "http://127.0.0.1:1/", "-trusted", "10.0.0.0/8"}, code: 2,
			stderr: "-trusted cannot be combined with -fetch"},
		{name: "-advice without -fetch", args: with("-advice"), code: 2, stderr: "-advice need -fetch"},
		{name: "-fetch of something that is not an http URL", args: []string{"-fetch", "ftp://x/"}, code: 2, stderr: "want an http:// or https:// URL"},
		{name: "-fetch with a timeout that has already passed", args: []string{"-fetch", "http://127.0.0.1:1/", "-timeout", "-1s"}, code: 2, stderr: "-timeout -1s: want a duration > 0"},
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
			stderr: "-header, -trusted given without -peer or -fetch (the built-in cases run only with no flags)"},
		{name: "empty -peer with flags", args: []string{"-peer", "", "-hops", "1"}, code: 2, stderr: "-peer is empty"},
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
			if tc.code == 2 || tc.code == 3 {
				assert.Equal(t, 1, strings.Count(errb.String(), "sourceip:"), "stderr names the error once: %s", &errb)
				assert.Equal(t, !tc.noUsage, strings.Contains(errb.String(), "usage: sourceip"), "usage printed: %s", &errb)
			}
		})
	}
}

// TestFetch runs the real explain handler behind a real HTTP server and
// fetches it as an operator on the same host would.
func TestFetch(t *testing.T) {
	loopback := clientip.MustParsePrefixSet("127.0.0.0/8")
	handler := func(cfg explain.Config) string {
		h, err := explain.New(cfg)
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL + "/debug/clientip"
	}
	plain := handler(explain.Config{Trust: clientip.MustNew(clientip.Config{}), AllowPeers: loopback})
	masq := handler(explain.Config{Trust: clientip.MustNew(clientip.Config{Masquerade: loopback}), AllowPeers: loopback})
	refusing := handler(explain.Config{Trust: clientip.MustNew(clientip.Config{})})
	advisor, err := explain.NewAdvisor(explain.AdvisorConfig{Trust: clientip.MustNew(clientip.Config{})})
	require.NoError(t, err)
	advisor.Observe(clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:1")}, http.Header{"X-Forwarded-For": {"203.0.113.7"}})
	advising := handler(explain.Config{Trust: clientip.MustNew(clientip.Config{}), AllowPeers: loopback, Advisor: advisor})

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			fmt.Fprint(w, `{"schema":"something/v9"}`)
		case "/fail":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/slow":
			<-r.Context().Done() // answers when the client gives up
		default:
			fmt.Fprint(w, "<html>hello</html>")
		}
	}))
	defer other.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "a resolved explanation", args: []string{"-fetch", plain}, code: 0,
			stdout: "answer:  127.0.0.1 from socket"},
		{name: "the walk is printed", args: []string{"-fetch", plain}, code: 0,
			stdout: "not in TrustedProxies: the client; nothing it sent is read"},
		{name: "an unresolved explanation exits 1", args: []string{"-fetch", masq}, code: 1,
			stdout: "answer:  unresolved (masqueraded)"},
		{name: "-json prints the document", args: []string{"-fetch", plain, "-json"}, code: 0,
			stdout: `"schema": "sourceip.explain/v1"`},
		{name: "-advice", args: []string{"-fetch", advising, "-advice"}, code: 0,
			stdout: "sourceip advice: 1 requests sampled"},
		{name: "not admitted", args: []string{"-fetch", refusing}, code: 3,
			stderr: "answered 404 Not Found: no explain endpoint there, or it does not admit this host"},
		{name: "no advisor there", args: []string{"-fetch", plain, "-advice"}, code: 3, stderr: "404"},
		{name: "another JSON document", args: []string{"-fetch", other.URL + "/json"}, code: 3, stderr: `schema "something/v9"`},
		{name: "not JSON", args: []string{"-fetch", other.URL + "/"}, code: 3, stderr: "did not answer with JSON"},
		{name: "a server error", args: []string{"-fetch", other.URL + "/fail"}, code: 3, stderr: `answered 500 Internal Server Error: "boom"`},
		{name: "unreachable", args: []string{"-fetch", closed.URL}, code: 3, stderr: "connect"},
		{name: "too slow", args: []string{"-fetch", other.URL + "/slow", "-timeout", "100ms"}, code: 3, stderr: "deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			assert.Equal(t, tc.code, code, "exit status\nstdout: %s\nstderr: %s", &out, &errb)
			if tc.stdout != "" {
				assert.Contains(t, out.String(), tc.stdout)
			}
			if tc.stderr != "" {
				assert.Contains(t, errb.String(), tc.stderr)
			} else {
				assert.Empty(t, errb.String())
			}
		})
	}
}

// TestFetchHostileEndpoint: the endpoint -fetch reads may be hostile or
// compromised, and chose every byte of its answer. Terminal control
// characters in it (an OSC title and a CSI clear screen, C1 controls in
// UTF-8 and as bare bytes, DEL, a carriage return that rewrites the line,
// a bidirectional override) must reach the terminal as escapes, with -json
// and without.
func TestFetchHostileEndpoint(t *testing.T) {
	doc := "{\"schema\":\"sourceip.explain/v1\",\r\"kind\":\"chain\"," +
		`"summary":"\u001b]0;owned\u0007\u001b[2J203.0.113.7",` +
		"\"notes\":[\"C1 CSI \u009b2J\",\"bare byte \x9b2J\",\"DEL \x7f\",\"bidi \u202eevil\",\"tag \U000E0001\",\"ok\\r\\nforged\"]}"
	var want any
	require.NoError(t, json.Unmarshal([]byte(doc), &want))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, doc)
	}))
	defer srv.Close()
	hostile := []string{"\x1b", "\x07", "\x9b", "\x7f", "\r", "\u202e", "\U000E0001"}

	t.Run("-json", func(t *testing.T) {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run([]string{"-fetch", srv.URL, "-json"}, &out, &errb), "stderr: %s", &errb)
		for _, s := range hostile {
			assert.NotContains(t, out.String(), s)
		}
		assert.Contains(t, out.String(), `C1 CSI \u009b2J`)
		assert.Contains(t, out.String(), `bare byte \ufffd2J`)
		assert.Contains(t, out.String(), `bidi \u202eevil`)
		assert.Contains(t, out.String(), `tag \udb40\udc01`)
		var got any
		require.NoError(t, json.Unmarshal(out.Bytes(), &got), "the escaped document is JSON")
		assert.Equal(t, want, got, "the escaped document decodes to the fetched one")
	})
	t.Run("the status line's reason phrase", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			c.Read(make([]byte, 4096))
			io.WriteString(c, "HTTP/1.1 500 \x1b]0;owned\x07\x9b2J\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}()
		var out, errb bytes.Buffer
		require.Equal(t, 3, run([]string{"-fetch", "http://" + ln.Addr().String()}, &out, &errb), "stderr: %s", &errb)
		for _, s := range hostile {
			assert.NotContains(t, errb.String(), s)
		}
		assert.Contains(t, errb.String(), `answered 500 \x1b]0;owned\a\x9b2J`)
	})
	t.Run("text", func(t *testing.T) {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run([]string{"-fetch", srv.URL}, &out, &errb), "stderr: %s", &errb)
		for _, s := range hostile {
			assert.NotContains(t, out.String(), s)
		}
		assert.Contains(t, out.String(), `answer:  \x1b]0;owned\a\x1b[2J203.0.113.7`)
		assert.Contains(t, out.String(), "bare byte \ufffd2J", "decoded as U+FFFD, which is inert")
		assert.Contains(t, out.String(), `ok\r\nforged`, "explain's printer escapes a line break inside a field too")
	})
}

// An endpoint (or whoever sits between it and the operator on plain
// http://) may answer a document whose fields hold terminal escapes:
// -fetch prints none of them.
func TestFetchHostileDocumentIsEscaped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"schema":"sourceip.explain/v1","kind":"request","summary":"\u001b[2J\u001b]0;owned\u0007",`+
			`"notes":["\r\u001b[31mall good\u001b[0m"],"steps":[{"hop":0,"layer":"socket","verdict":"client","note":"\u001b[8m"}]}`)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	run([]string{"-fetch", srv.URL}, &out, &errb)
	require.Contains(t, out.String(), "answer:")
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\r")
	assert.NotContains(t, out.String(), "\x07")
}
