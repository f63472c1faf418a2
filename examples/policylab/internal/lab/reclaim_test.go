package lab

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lab whose process has the pid of a run killed outright finds that
// run's namespaces under its own names: the sweep spares them (the pid is
// alive, it is this process) and "ip netns add" failed on the first one
// with "File exists". Pids are reused (pid_max is 32768 by default), so
// setup deletes what carries its own prefix before it creates anything.
func TestSetupReclaimsNamesOfADeadRunWithThisPid(t *testing.T) {
	requireLab(t)
	left := netns.Prefix(os.Getpid(), modeTag(kubeproxy.ModeIPTables)) + "sw"
	out, err := exec.Command("ip", "netns", "add", left).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { netns.Delete(context.Background(), []string{left}) })

	l := &Lab{opt: DefaultOptions(), mode: kubeproxy.ModeIPTables, res: &report.Mode{}}
	err = l.setup(context.Background())
	assert.NoError(t, l.cleanup())
	require.NoError(t, err)
}
