package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/internal/e2e"
)

// TestLab builds the lab in network namespaces, runs every scenario and
// requires every verdict to pass: the kernel and trafficpolicy's model must
// agree. It runs as root with ip, iptables and haproxy installed, skips with
// a reason otherwise, and fails instead of skipping under
// SOURCEIP_E2E=require. IPv6 rows run when ip6tables NAT works; the report
// says why when they do not.
func TestLab(t *testing.T) {
	e2e.RequireRoot(t)
	e2e.Require(t, "ip", "iptables", "iptables-restore", "haproxy")
	if err := prerequisites(); err != nil {
		e2e.Unavailable(t, err.Error())
	}
	opt := DefaultOptions()
	opt.Dir = t.TempDir()
	if testing.Verbose() {
		opt.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		// Run removes everything; this only guards against a panic in it.
		left, _ := labNamespaces(context.Background())
		var mine []string
		for name, pid := range left {
			if pid == os.Getpid() {
				mine = append(mine, name)
			}
		}
		if len(mine) > 0 {
			t.Errorf("namespaces left behind: %v", mine)
			deleteNamespaces(context.Background(), mine)
		}
	})

	rep, err := Run(ctx, opt)
	var md strings.Builder
	rep.Markdown(&md)
	if err != nil {
		t.Fatalf("lab: %v\n%s", err, md.String())
	}
	if !rep.Passed() {
		for _, f := range rep.Failures() {
			t.Error(f)
		}
		t.Logf("report:\n%s", md.String())
		return
	}
	if rep.IPv6 != "" {
		t.Logf("IPv6 left out: %s", rep.IPv6)
	}
	if testing.Verbose() {
		t.Logf("report:\n%s", md.String())
	}
	t.Logf("%d rows, skew and %d windows passed in %.1f s", len(rep.Rows), len(rep.Windows), rep.Duration.Seconds())
}
