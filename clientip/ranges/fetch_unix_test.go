//go:build unix

package ranges

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

// TestRefresherFileLocationNamedPipe: a location that is a named pipe (a
// mistaken path, or a list fed by a process that stalls) is refused like a
// directory. Opening it for reading blocked until a writer came, outside
// Timeout and with the refresher's lock held, so Refresh, Run and
// AcceptPending hung for good.
func TestRefresherFileLocationNamedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ips.txt")
	must.NoError(t, syscall.Mkfifo(path, 0o644))
	src, err := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{path}})
	must.NoError(t, err)
	r, err := NewRefresher(RefresherConfig{Source: src, Timeout: time.Second})
	must.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Refresh(context.Background()) }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrMalformed)
	case <-time.After(10 * time.Second):
		// Free the blocked reader before failing: a writer that opens and
		// closes the pipe gives it an empty read.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Refresh of a named pipe still blocked 10s after a 1s Timeout")
	}
}

// TestRefresherDiskCopyNamedPipe: a CacheFile that is a named pipe is an
// unusable disk copy, not a NewRefresher that never returns: the open
// blocked until a writer came.
func TestRefresherDiskCopyNamedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.json")
	must.NoError(t, syscall.Mkfifo(path, 0o644))
	done := make(chan *Refresher, 1)
	go func() {
		r, err := NewRefresher(RefresherConfig{Source: Cloudflare(), CacheFile: path})
		assert.NoError(t, err)
		done <- r
	}()
	select {
	case r := <-done:
		assert.ErrorIs(t, r.Status().CacheError, ErrCache)
		assert.Equal(t, ProvenanceSnapshot, r.Status().Provenance)
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("NewRefresher with a named pipe as CacheFile still blocked after 10s")
	}
}
