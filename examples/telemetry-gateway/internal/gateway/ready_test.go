package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/fstest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNotReadyOnLowDisk: readiness checks the sink's free space at start and
// on an interval, so a gateway on a full disk is drained before its first
// write fails, and comes back when space is freed (attack trial: ready on a
// full disk until the first write failed).
func TestNotReadyOnLowDisk(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 20)
	e := start(t, func(c *Config) {
		c.SinkMinFree = 64 << 20
		c.SinkCheckInterval = 5 * time.Millisecond
		c.FreeSpace = func(path string) (uint64, error) {
			assert.True(t, strings.HasSuffix(path, "telemetry.jsonl"), path)
			return free.Load(), nil
		}
	})
	require.ErrorContains(t, e.g.Ready(), "1048576 bytes free, less than the 67108864", "not ready from the start")
	e.logs.wait(t, time.Second, map[string]string{"msg": "sink: not ready: low on disk space", "level": "WARN"})

	free.Store(1 << 30)
	require.Eventually(t, func() bool { return e.g.Ready() == nil }, 5*time.Second, time.Millisecond, "ready once space is freed")
	e.logs.wait(t, time.Second, map[string]string{"msg": "sink: disk space recovered; ready again"})

	free.Store(0)
	require.Eventually(t, func() bool { return e.g.Ready() != nil }, 5*time.Second, time.Millisecond, "not ready when the disk fills")
}

// TestNotReadyOnFullFileSystem is TestNotReadyOnLowDisk on a real file
// system: a small tmpfs filled up.
func TestNotReadyOnFullFileSystem(t *testing.T) {
	dir := fstest.Small(t, 4<<20)
	fstest.Fill(t, dir)
	e := start(t, func(c *Config) {
		c.Sink.Path = filepath.Join(dir, "telemetry.jsonl")
		c.SinkMinFree = 1 << 20
		c.SinkCheckInterval = 5 * time.Millisecond
	})
	require.ErrorContains(t, e.g.Ready(), "bytes free, less than the 1048576")
	require.NoError(t, os.Remove(filepath.Join(dir, fstest.Ballast)))
	require.Eventually(t, func() bool { return e.g.Ready() == nil }, 5*time.Second, time.Millisecond, "ready once space is freed")
}

// TestShutdownReportsSinkFailure: after the sink failed (a full file
// system), Shutdown returns the failure and logs it, so that the command
// exits non-zero (attack trial: shutdown logged "error":null and exited 0).
func TestShutdownReportsSinkFailure(t *testing.T) {
	dir := fstest.Small(t, 1<<20)
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Sink.Path = filepath.Join(dir, "telemetry.jsonl")
	})
	url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
	status, body := post(t, httpFrom("127.0.0.72"), url, "", `{"device":"full","seq":1}`)
	require.Equal(t, 201, status, body)
	fstest.Fill(t, dir)
	// The sink's last page still has room for a few readings.
	for seq := 2; seq < 1000 && status == 201; seq++ {
		status, body = post(t, httpFrom("127.0.0.72"), url, "", fmt.Sprintf(`{"device":"full","seq":%d}`, seq))
	}
	require.Equal(t, 503, status, body)

	err := e.g.Shutdown(t.Context(), 0)
	require.ErrorIs(t, err, sink.ErrFailed)
	require.ErrorContains(t, err, "no space left on device")
	e.logs.wait(t, time.Second, map[string]string{"msg": "gateway stopped with an error", "level": "ERROR", "error": "sink: failed; refusing records*"})
}
