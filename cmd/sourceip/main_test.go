package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"result: 203.0.113.7 from socket (peer 203.0.113.7:51000)",
		"result: 198.51.100.20 from x-forwarded-for hop 2 via 10.0.0.3",
		"result: 198.51.100.77 from proxy-protocol hop 1 via 192.0.2.10",
		"result: 2001:db8:cafe::17 from forwarded hop 2 via 10.0.0.9",
		`error:  clientip: malformed address (hop 1 in X-Forwarded-For: "not-an-ip")`,
		"error:  clientip: address is a masquerading node",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-peer", "10.0.0.1:4431", "-trusted", "10.0.0.0/8", "-header", "X-Forwarded-For",
		"-H", "X-Forwarded-For: 6.6.6.6, 203.0.113.7"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"client":"203.0.113.7","source":"x-forwarded-for"`) {
		t.Errorf("output: %s", out.String())
	}
	for _, bad := range [][]string{{"-peer", "nope"}, {"-peer", "10.0.0.1:1", "-header", "X-Forwarded-For"}, {"-trusted", "10.0.0.1/8"}} {
		if err := run(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q) succeeded", bad)
		}
	}
}
