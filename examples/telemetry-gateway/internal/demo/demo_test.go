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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemo runs the demo as `go run ./telemetry-gateway -demo` does and checks
// its table row by row, including the words that say why a device was
// refused.
func TestDemo(t *testing.T) {
	var out, logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, Run(ctx, &out, &logs, testing.Verbose()), "demo\n%s\n%s", &out, &logs)
	t.Log("\n" + out.String())
	aliases := lb.CheckSource(netip.MustParseAddr("127.0.0.200")) == nil
	ap := `127\.0\.0\.\d+:\d+`
	rows := map[string]string{
		"d1": `^d1 mqtt 3\.1\.1 127\.0\.0\.11:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.11:(\d+) gateway\.demo - d1 127\.0\.0\.11 proxy-protocol no allowed 3/3 acked$`,
		"d2": `^d2 mqtt 5 127\.0\.0\.12:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.12:(\d+) gateway\.demo - d2 127\.0\.0\.12 proxy-protocol no allowed 3/3 acked$`,
		"d3": `^d3 mqtt 5 127\.0\.0\.13:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.13:(\d+) gateway\.demo CN=d3 d3 127\.0\.0\.13 proxy-protocol no allowed 3/3 acked$`,
		"d4": `^d4 mqtt 3\.1\.1 127\.0\.0\.14:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.14:(\d+) gateway\.demo - d4 127\.0\.0\.14 proxy-protocol no allowed 3/3 acked$`,
		"d5": `^d5 mqtt 5 127\.0\.0\.99:(\d+) 127\.0\.0\.200:\d+ 127\.0\.0\.99:(\d+) gateway\.demo - d5 127\.0\.0\.99 proxy-protocol no denied refused: 127\.0\.0\.99 is not in the allowlist 127\.0\.0\.0/28 \(CONNACK 0x87\)$`,
		"h6": `^h6 http 127\.0\.0\.15:\d+ 127\.0\.0\.60:\d+ - - - - 127\.0\.0\.15 x-forwarded-for no allowed 3/3 stored$`,
		"h7": `^h7 http 127\.0\.0\.98:\d+ 127\.0\.0\.60:\d+ - - - - 127\.0\.0\.98 x-forwarded-for no denied refused: 127\.0\.0\.98 is not in the allowlist 127\.0\.0\.0/28 \(HTTP 403\)$`,
	}
	if !aliases {
		t.Log("no loopback aliases: checking the reduced table")
		rows = map[string]string{}
		for _, d := range []string{"d1", "d2", "d3", "d4"} {
			rows[d] = `^` + d + ` mqtt .* (` + ap + `) 127\.0\.0\.1:\d+ (` + ap + `) gateway\.demo .* 127\.0\.0\.1 proxy-protocol no - 3/3 acked$`
		}
	}
	space := regexp.MustCompile(`\s{2,}`)
	found := map[string]bool{}
	header := false
	for _, line := range strings.Split(out.String(), "\n") {
		norm := space.ReplaceAllString(strings.TrimSpace(line), " ")
		header = header || norm == "DEVICE PROTOCOL DEVICE ADDR SOCKET PEER PROXY SOURCE TLS SNI TLS SUBJECT CLIENT ID RESOLVED CLIENT SOURCE MASQ ALLOWLIST RESULT"
		name, _, _ := strings.Cut(norm, " ")
		re, ok := rows[name]
		if !ok {
			continue
		}
		m := regexp.MustCompile(re).FindStringSubmatch(norm)
		if !assert.NotNil(t, m, "row %s:\n  %s\nwant %s", name, norm, re) {
			continue
		}
		if len(m) == 3 {
			assert.Equal(t, m[1], m[2], "row %s: the PROXY source port is the device's port", name)
		}
		found[name] = true
	}
	assert.True(t, header, "table header")
	for name := range rows {
		assert.True(t, found[name], "no row for %s", name)
	}
	if aliases {
		assert.Contains(t, out.String(), "sink: 15 records (15 distinct ids, 0 duplicates)")
	}
	assert.Contains(t, out.String(), "\nOK: ")
}
