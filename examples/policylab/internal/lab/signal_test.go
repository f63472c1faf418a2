package lab

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A second signal while the lab is being removed leaves no namespace
// behind. timeout(1) signals the command and then its process group, a
// service manager does likewise, and people press Ctrl-C twice: the second
// signal used to kill the lab at once and leave every namespace of the run
// (eleven per mode) until another run swept them.
func TestSecondSignalLeavesNoNamespace(t *testing.T) {
	requireLab(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	var out e2e.Output
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), runEnv+"=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	ctx := context.Background()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if left, _ := netns.OwnedBy(ctx, pid); len(left) > 0 {
			netns.Delete(ctx, left)
		}
	})

	// Wait, for at most a minute, until the lab is up: its namespaces, the
	// kube-proxy agents and the servers in them.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for up := false; !up; {
		select {
		case <-tick.C:
			up = strings.Contains(out.String(), " up: ")
		case <-exited:
			require.FailNow(t, "the lab ended before it was up", "%s", out.String())
		case <-deadline:
			require.FailNow(t, "the lab did not come up within a minute", "%s", out.String())
		}
	}
	// SIGTERM, then again every 10 ms until the process is gone (at most
	// ten seconds): the later ones land while the lab is being removed.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	stop := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case <-exited:
			done = true
		case <-tick.C:
			cmd.Process.Signal(syscall.SIGTERM)
		case <-stop:
			require.FailNow(t, "the lab did not end within ten seconds of SIGTERM", "%s", out.String())
		}
	}
	left, err := netns.OwnedBy(ctx, pid)
	require.NoError(t, err)
	assert.Empty(t, left, "namespaces left behind by a lab signalled twice\n%s", out.String())
}
