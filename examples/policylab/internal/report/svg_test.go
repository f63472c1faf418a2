package report

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wellFormed fails t unless doc parses as XML to the end.
func wellFormed(t *testing.T, name, doc string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err, "%s", name)
	}
}

// The charts are well-formed SVG for every shape of window, including one
// with nothing measured, and names with characters XML must escape.
func TestSVGs(t *testing.T) {
	w := &Window{Name: "black hole", Event: `n2-a <removed> & "gone"`, Node: "n2", Try: 2,
		Timeline: Timeline{Sync: 100 * time.Millisecond, Decided: 600 * time.Millisecond, Applied: 650 * time.Millisecond, End: time.Second,
			Probes: []ProbeMark{{At: -200 * time.Millisecond, Code: 200}, {At: 300 * time.Millisecond, Code: 503}, {At: 550 * time.Millisecond}},
			Member: []Span{{From: -500 * time.Millisecond, To: 650 * time.Millisecond}},
			Conns:  []ConnMark{{At: -100 * time.Millisecond, Worker: 3, Outcome: "node"}, {At: 200 * time.Millisecond, Outcome: "failed"}}}}
	r := &Report{Modes: []*Mode{
		{Name: "iptables", Windows: []*Window{w, {Name: "empty"}}, Skew: &Skew{Pods: []SkewPod{{Pod: "a", Node: "n1", Share: 0.5, Even: 0.5, Weighted: 0.33}}}},
		{Name: "nftables"},
	}}
	svgs := r.SVGs()
	require.Len(t, svgs, 3)
	for name, doc := range svgs {
		wellFormed(t, name, string(doc))
	}
	require.Contains(t, string(svgs[WindowSVGName("iptables", w)]), "&lt;removed&gt; &amp;")
}

// No duration in the report reads as negative.
func TestMsNeverNegative(t *testing.T) {
	require.Equal(t, "< 0 ms", Ms(-833*time.Millisecond))
	require.Equal(t, "0 ms", Ms(0))
	require.Equal(t, "1250 ms", Ms(1250*time.Millisecond))
}
