package lab

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/internal/e2e"
)

// runEnv makes the test binary run one lab (iptables mode) and exit, for
// the tests of how a run ends when it is signalled.
const runEnv = "POLICYLAB_TEST_RUN"

// TestMain makes the test binary a kube-proxy agent when a lab this
// package's tests build starts it as one (without it, each agent would run
// the tests again and build labs of its own), and a lab when runEnv is set.
func TestMain(m *testing.M) {
	kubeproxy.AgentMain()
	if os.Getenv(runEnv) != "" {
		opt := DefaultOptions()
		opt.Modes = []kubeproxy.Mode{kubeproxy.ModeIPTables}
		opt.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
		_, err := Run(context.Background(), opt)
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// requireLab skips t (fails it under SOURCEIP_E2E=require) unless a lab in
// iptables mode can run here.
func requireLab(t *testing.T) {
	t.Helper()
	if err := Prerequisites([]kubeproxy.Mode{kubeproxy.ModeIPTables}); err != nil {
		e2e.Unavailable(t, err.Error())
	}
}
