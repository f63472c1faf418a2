//go:build unix

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoCleansUpWhenItsOutputCloses: `telemetry-gateway -demo -v 2>&1 |
// head` left a telemetry-gateway-demo* directory in the temporary directory
// every time (a newcomer's finding): head exits after ten lines, the next log
// line ended the demo with SIGPIPE before it removed its files. Now the
// demo stops at the first write that fails, cleans up, and exits with 141
// as a process ended by SIGPIPE does.
func TestDemoCleansUpWhenItsOutputCloses(t *testing.T) {
	tmp := t.TempDir()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-demo", "-v")
	cmd.Env = append(os.Environ(), execEnv+"=1", "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = w, w // -demo -v 2>&1
	require.NoError(t, cmd.Start())
	w.Close()
	// Read the first line, as head -1 would, and go away.
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	t.Logf("first line: %s", line)
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		require.FailNow(t, "the demo did not stop after its output closed")
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "exit: %v", err)
	assert.Equal(t, exitBrokenPipe, ee.ExitCode(), "exit code (%v)", ee)
	left, err := filepath.Glob(filepath.Join(tmp, "telemetry-gateway-demo*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the demo left its files in the temporary directory")
}
