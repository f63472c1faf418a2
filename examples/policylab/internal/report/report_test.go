package report

import (
	"strings"
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/judge"
	"github.com/stretchr/testify/assert"
)

func passingMode(name string, windows ...*Window) *Mode {
	return &Mode{Name: name, Skew: &Skew{}, Windows: windows, Compare: []Comparison{{Equal: true}}}
}

// A window whose first try failed passes when its second try passes, and
// both tries stay in the report; a failed last try fails the run.
func TestWindowRetry(t *testing.T) {
	failed := &Window{Name: "drain", Try: 1, Problems: []string{"1 connections failed (dropped)"}}
	retried := &Window{Name: "drain", Try: 2}
	other := &Window{Name: "rejoin", Try: 1}
	r := &Report{Modes: []*Mode{passingMode("iptables", failed, retried, other)}}
	assert.True(t, r.Passed(), "%v", r.Failures())
	var md strings.Builder
	r.Markdown(&md, nil)
	assert.Contains(t, md.String(), "| iptables | drain | 1 |")
	assert.Contains(t, md.String(), "| iptables | drain | 2 |")

	r = &Report{Modes: []*Mode{passingMode("iptables", retried, other, failed)}}
	assert.False(t, r.Passed())
	assert.Equal(t, []string{"iptables: scenario 5 (drain): 1 connections failed (dropped)"}, r.Failures())
}

// Every kind of failed verdict fails the run, and a mode that did not run
// to the end does too.
func TestFailures(t *testing.T) {
	ok := func() *Mode { return passingMode("nftables", &Window{Name: "drain"}) }
	assert.True(t, (&Report{Modes: []*Mode{ok()}}).Passed())
	for name, spoil := range map[string]func(m *Mode){
		"row":        func(m *Mode) { m.Rows = []*Row{{Scenario: 1, Title: "x", Problems: []string{"p"}}} },
		"skew":       func(m *Mode) { m.Skew.Problems = []string{"p"} },
		"drain":      func(m *Mode) { m.Drains = []*Drain{{Problems: []string{"p"}}} },
		"comparison": func(m *Mode) { m.Compare = append(m.Compare, Comparison{Diff: "status 200 vs 503"}) },
		"no skew":    func(m *Mode) { m.Skew = nil },
		"no windows": func(m *Mode) { m.Windows = nil },
	} {
		m := ok()
		spoil(m)
		assert.False(t, (&Report{Modes: []*Mode{m}}).Passed(), name)
	}
}

// A mode's cell names the layers where the kernel and the model differ.
func TestModeCell(t *testing.T) {
	want := judge.Layers{Outcome: "delivered", Peer: "client", Proxy: "none", Survives: "socket", ClientIP: "client (socket)"}
	got := want
	got.Peer, got.Survives = "node", "lost"
	row := &Row{Judged: judge.Judgement{Observed: got, Expected: want}, Problems: []string{"x"}}
	assert.Equal(t, "✗ peer: **node**; survives: **lost**", modeCell(row))
	assert.Equal(t, "✓", modeCell(&Row{Judged: judge.Judgement{Observed: want, Expected: want}}))
	assert.Equal(t, "not run", modeCell(nil))
}
