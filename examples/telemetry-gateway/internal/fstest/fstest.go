// Package fstest gives the gateway's tests a real file system that fills
// up: a small tmpfs mounted for one test. It needs root (CAP_SYS_ADMIN);
// without it the test skips, or fails under SOURCEIP_E2E=require.
package fstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Small mounts a tmpfs of size bytes on a fresh directory for t, unmounts it
// when t ends, and returns the directory.
func Small(t *testing.T, size int) string {
	t.Helper()
	e2e.RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		e2e.Unavailable(t, fmt.Sprintf("cannot mount a tmpfs: %v: %s", err, bytes.TrimSpace(out)))
	}
	t.Cleanup(func() {
		out, err := exec.Command("umount", dir).CombinedOutput()
		assert.NoError(t, err, "umount %s: %s", dir, out)
	})
	return dir
}

// Ballast is the file Fill writes.
const Ballast = "ballast"

// Fill writes dir/Ballast until dir's file system has no room left.
func Fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, Ballast))
	require.NoError(t, err)
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return
		}
	}
}
