package lab

import (
	"os"
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
)

// TestMain makes the test binary a kube-proxy agent when a lab this
// package's tests build starts it as one (without it, each agent would run
// the tests again and build labs of its own).
func TestMain(m *testing.M) {
	kubeproxy.AgentMain()
	os.Exit(m.Run())
}
