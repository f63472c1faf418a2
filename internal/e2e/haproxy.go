package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sourceip/sourceip/internal/haproxy"
)

// haproxyReady bounds how long StartHAProxy waits for haproxy to report
// that it is ready (it takes about 0.2 s).
const haproxyReady = 10 * time.Second

// StartHAProxy runs the real haproxy for tb with the configuration that
// config renders for n free loopback TCP ports, and returns those ports
// once haproxy reports that it is ready: every listener is bound, so a
// test may connect at once. haproxy runs in the foreground (master-worker
// mode, -Ws); it is stopped when tb ends, and what it printed is logged,
// with its configuration, when tb has failed. A port that another process
// takes between being chosen here and bound by haproxy makes haproxy exit;
// StartHAProxy then tries fresh ports, three times in all.
//
// A missing haproxy, or one built without systemd support (which it needs
// to report readiness), skips tb, or fails it when [Required] is true.
func StartHAProxy(tb testing.TB, n int, config func(ports []int) string) []int {
	tb.Helper()
	bin := Require(tb, "haproxy")[0]
	for attempt := 1; ; attempt++ {
		ports := FreePorts(tb, n)
		text := config(ports)
		ctx, cancel := context.WithTimeout(context.Background(), haproxyReady)
		p, err := haproxy.Start(ctx, haproxy.Config{Path: bin, Text: text})
		cancel()
		switch {
		case err == nil:
			tb.Cleanup(func() {
				p.Stop()
				if tb.Failed() {
					tb.Logf("haproxy configuration:\n%s\nhaproxy output:\n%s", text, p.Log())
				}
			})
			return ports
		case errors.Is(err, haproxy.ErrNoNotify):
			Unavailable(tb, "haproxy was built without systemd support, which it needs to report readiness (-Ws)")
		case errors.Is(err, haproxy.ErrBind) && attempt < 3:
			continue
		}
		tb.Fatalf("%v\nconfiguration:\n%s", err, text)
	}
}
