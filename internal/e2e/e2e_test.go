package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTB records how a helper ended a test: Skipf and Fatalf stop the
// calling goroutine, as testing's do.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "TestFake/case" }
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeTB on a goroutine of its own and returns the
// fakeTB once fn has returned or been stopped.
func run(fn func(tb testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestUnavailable(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	t.Setenv("SOURCEIP_E2E_SKIPS", skips)

	t.Setenv("SOURCEIP_E2E", "")
	f := run(func(tb testing.TB) { Unavailable(tb, "no Unix sockets:\tEPERM\nhere") })
	assert.Equal(t, "no Unix sockets:\tEPERM\nhere; skipping (set SOURCEIP_E2E=require to fail instead)", f.skipped)
	assert.Empty(t, f.failed)
	recorded, err := os.ReadFile(skips)
	require.NoError(t, err)
	wd, _ := os.Getwd()
	assert.Equal(t, wd+"\tTestFake/case\tno Unix sockets: EPERM here\n", string(recorded), "one line per skip")

	t.Setenv("SOURCEIP_E2E", "require")
	f = run(func(tb testing.TB) { Unavailable(tb, "no Unix sockets") })
	assert.Equal(t, "no Unix sockets, and SOURCEIP_E2E=require", f.failed)
	assert.Empty(t, f.skipped)
	again, err := os.ReadFile(skips)
	require.NoError(t, err)
	assert.Equal(t, recorded, again, "a failure is not recorded as a skip")
}

func TestRequire(t *testing.T) {
	t.Setenv("SOURCEIP_E2E_SKIPS", "")
	dir := t.TempDir()
	tool := filepath.Join(dir, "sourceip-e2e-tool")
	require.NoError(t, os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", dir)

	var paths []string
	f := run(func(tb testing.TB) { paths = Require(tb, "sourceip-e2e-tool", "sourceip-e2e-tool") })
	assert.Equal(t, []string{tool, tool}, paths)
	assert.Empty(t, f.skipped+f.failed)

	t.Setenv("SOURCEIP_E2E", "")
	f = run(func(tb testing.TB) { Require(tb, "sourceip-e2e-tool", "sourceip-e2e-missing") })
	assert.True(t, strings.HasPrefix(f.skipped, "sourceip-e2e-missing is not installed; skipping"), f.skipped)

	t.Setenv("SOURCEIP_E2E", "require")
	f = run(func(tb testing.TB) { Require(tb, "sourceip-e2e-missing") })
	assert.Equal(t, "sourceip-e2e-missing is not installed, and SOURCEIP_E2E=require", f.failed)
}

func TestLookPathSbin(t *testing.T) {
	// The precondition is the one LookPath tests, an executable file: a
	// /usr/sbin/ip that exists but cannot be run is a missing ip too.
	if _, err := exec.LookPath("/usr/sbin/ip"); err != nil {
		Unavailable(t, "/usr/sbin/ip is not installed")
	}
	t.Setenv("PATH", t.TempDir())
	path, err := LookPath("ip")
	require.NoError(t, err)
	assert.Equal(t, "/usr/sbin/ip", path)
}

// TestSkipCanary skips through [Unavailable] when SOURCEIP_E2E_CANARY is
// set, and does nothing otherwise: scripts/test runs it so, before the
// tests, to check that its summary of skipped real-peer tests lists such a
// skip (its "none" would otherwise say nothing).
func TestSkipCanary(t *testing.T) {
	if os.Getenv("SOURCEIP_E2E_CANARY") == "" {
		return
	}
	Unavailable(t, "the canary by which scripts/test checks its summary of skips")
}
