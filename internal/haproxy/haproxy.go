// Package haproxy runs the real HAProxy program for the project's tests and
// its policy lab, and knows when it is ready without polling: it starts
// haproxy in master-worker mode with systemd notification (-Ws) and waits for
// READY=1 (see internal/daemon), which HAProxy sends once its listeners are
// bound and its worker runs.
//
// It is internal: the tests reach it through internal/e2e, which adds the
// skip-or-require rule, free ports and clean-up.
package haproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sourceip/sourceip/internal/daemon"
)

var (
	// ErrNoNotify means haproxy was built without systemd support, so it
	// cannot say when it is ready.
	ErrNoNotify = errors.New("haproxy: built without systemd support (USE_SYSTEMD), so it cannot report readiness with -Ws")
	// ErrBind means haproxy could not bind one of its listeners, for
	// example because another process took the port.
	ErrBind = errors.New("haproxy: cannot bind a listener")
	// ErrExited means haproxy exited before it was ready.
	ErrExited = errors.New("haproxy: exited before it was ready")
)

// Config says how to run one HAProxy.
type Config struct {
	// Path is the haproxy program: a path, or a name looked up in PATH
	// (by Wrap's program when Wrap is set). Required.
	Path string
	// Text is the configuration. Required.
	Text string
	// Wrap, when set, is the command haproxy runs under, such as
	// {"ip", "netns", "exec", "lab-lb"}; it must exec haproxy with the
	// environment it was given.
	Wrap []string
}

// Process is a running HAProxy started by [Start]. Its methods are safe for
// concurrent use.
type Process struct {
	*daemon.Process
	dir string // the configuration file and the notify socket
}

// Start writes cfg.Text to a file in a private temporary directory, starts
// haproxy in the foreground with it (-Ws -f file) and returns once haproxy
// reports READY=1. The process is killed if the calling process dies (on
// Linux). When haproxy exits first, the error wraps [ErrBind],
// [ErrNoNotify] or [ErrExited] and carries what haproxy printed; when ctx
// ends first, haproxy is stopped and ctx's error returned. The caller
// stops a started Process with [Process.Stop].
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Path == "" || cfg.Text == "" {
		return nil, errors.New("haproxy: Config needs Path and Text")
	}
	dir, err := daemon.ShortTempDir("haproxy")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg.Text), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := append(append([]string(nil), cfg.Wrap...), cfg.Path, "-Ws", "-f", file)
	p, err := daemon.Start(ctx, daemon.Config{Args: args, Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		var ee *daemon.ExitError
		if !errors.As(err, &ee) {
			return nil, fmt.Errorf("haproxy: %w", err)
		}
		cause := ErrExited
		switch {
		case strings.Contains(ee.Log, "USE_SYSTEMD"):
			cause = ErrNoNotify
		case strings.Contains(ee.Log, "cannot bind socket"):
			cause = ErrBind
		}
		return nil, fmt.Errorf("%w (%s):\n%s", cause, ee.State, ee.Log)
	}
	return &Process{Process: p, dir: dir}, nil
}

// Stop stops HAProxy (SIGTERM, then SIGKILL after a grace period), waits
// for it to exit, and removes its directory. It may be called more than
// once.
func (p *Process) Stop() {
	p.Process.Stop()
	os.RemoveAll(p.dir)
}
