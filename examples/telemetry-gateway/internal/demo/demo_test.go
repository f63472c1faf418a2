package demo

import (
	"bytes"
	"context"
	"net/netip"
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
	if err := Run(ctx, &out, &logs, testing.Verbose()); err != nil {
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
