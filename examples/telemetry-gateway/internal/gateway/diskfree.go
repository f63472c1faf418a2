package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// diskWatch keeps readiness honest about the sink's file system: it measures
// the free space at start and every interval, and reports an error while it
// is below min, so that the load balancer drains the gateway before a write
// fails rather than after (a failed write stops the sink for good).
type diskWatch struct {
	path string
	min  uint64
	free func(path string) (uint64, error)
	log  *slog.Logger
	low  atomic.Pointer[error] // nil: enough space
	stop chan struct{}
	done chan struct{}
}

func newDiskWatch(path string, min uint64, free func(string) (uint64, error), log *slog.Logger) *diskWatch {
	if free == nil {
		free = freeSpace
	}
	return &diskWatch{path: path, min: min, free: free, log: log, stop: make(chan struct{}), done: make(chan struct{})}
}

// check measures once and records the result, logging every change.
func (w *diskWatch) check() {
	n, err := w.free(w.path)
	var problem error
	switch {
	case err != nil:
		problem = fmt.Errorf("cannot measure the free space of the sink's file system: %w", err)
	case n < w.min:
		problem = fmt.Errorf("the sink's file system has %d bytes free, less than the %d the gateway keeps free", n, w.min)
	}
	was := w.low.Load()
	switch {
	case problem != nil:
		w.low.Store(&problem)
		if was == nil {
			w.log.Warn("sink: not ready: low on disk space", "path", w.path, "free", n, "min_free", w.min, "error", problem.Error())
		}
	case was != nil:
		w.low.Store(nil)
		w.log.Info("sink: disk space recovered; ready again", "path", w.path, "free", n, "min_free", w.min)
	}
}

// err returns why the gateway is not ready, or nil.
func (w *diskWatch) err() error {
	if p := w.low.Load(); p != nil {
		return *p
	}
	return nil
}

// run checks every interval until close.
func (w *diskWatch) run(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.check()
		case <-w.stop:
			return
		}
	}
}

func (w *diskWatch) close() {
	close(w.stop)
	<-w.done
}

// errNoStatfs is freeSpace's answer where statfs is unavailable.
var errNoStatfs = errors.ErrUnsupported
