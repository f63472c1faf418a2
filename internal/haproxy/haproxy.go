// Package haproxy runs the real HAProxy program for the project's tests and
// its policy lab, and knows when it is ready without polling: it starts
// haproxy in master-worker mode with systemd notification (-Ws) and waits for
// READY=1 on a notify socket of its own, which HAProxy sends once its
// listeners are bound and its worker runs.
//
// It is internal: the tests reach it through internal/e2e, which adds the
// skip-or-require rule, free ports and clean-up.
package haproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
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

// stopGrace is how long Stop waits after SIGTERM before it kills haproxy.
const stopGrace = 5 * time.Second

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
	cmd    *exec.Cmd
	dir    string // the configuration file and the notify socket
	log    lockedBuffer
	exited chan struct{}
	stop   sync.Once
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
	dir, err := shortTempDir()
	if err != nil {
		return nil, err
	}
	p := &Process{dir: dir, exited: make(chan struct{})}
	file := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg.Text), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sockPath := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("haproxy: notify socket: %w", err)
	}
	// Once the wait is over nobody reads the socket: close and remove it,
	// so HAProxy's later notifications (STOPPING=1) fail at once instead
	// of filling a queue.
	defer func() {
		sock.Close()
		os.Remove(sockPath)
	}()
	ready := make(chan struct{})
	go readNotify(sock, ready)

	args := append(append([]string(nil), cfg.Wrap...), cfg.Path, "-Ws", "-f", file)
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	p.cmd.SysProcAttr = dieWithParent()
	// The kernel sends the parent-death signal when the thread that
	// started the child ends, not the process: the starting goroutine
	// keeps its thread locked, so the runtime cannot end or hand over that
	// thread, until haproxy has exited.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := p.cmd.Start()
		started <- err
		if err == nil {
			p.cmd.Wait()
		}
		close(p.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		p.Stop()
		log := p.Log()
		cause := ErrExited
		switch {
		case strings.Contains(log, "USE_SYSTEMD"):
			cause = ErrNoNotify
		case strings.Contains(log, "cannot bind socket"):
			cause = ErrBind
		}
		return nil, fmt.Errorf("%w (%v):\n%s", cause, p.cmd.ProcessState, log)
	case <-ctx.Done():
		p.Stop()
		return nil, fmt.Errorf("haproxy: not ready: %w:\n%s", ctx.Err(), p.Log())
	}
}

// readNotify closes ready when a datagram on sock carries READY=1, and
// returns when sock is closed.
func readNotify(sock *net.UnixConn, ready chan<- struct{}) {
	buf := make([]byte, 4096)
	for {
		n, err := sock.Read(buf)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line == "READY=1" {
				close(ready)
				return
			}
		}
	}
}

// shortTempDir makes a private directory whose paths fit in a Unix socket
// address (108 bytes), which a long TMPDIR may not allow.
func shortTempDir() (string, error) {
	dir, err := os.MkdirTemp("", "haproxy")
	if err == nil && len(dir) <= 80 {
		return dir, nil
	}
	if err == nil {
		os.RemoveAll(dir)
	}
	return os.MkdirTemp("/tmp", "haproxy")
}

// Stop stops HAProxy (SIGTERM, then SIGKILL after a grace period), waits
// for it to exit, and removes its directory. It may be called more than
// once.
func (p *Process) Stop() {
	p.stop.Do(func() {
		defer os.RemoveAll(p.dir)
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Exited is closed when the haproxy process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Log returns what haproxy has printed on its standard output and error.
func (p *Process) Log() string { return p.log.String() }

// lockedBuffer is a bytes.Buffer that haproxy's output goroutine writes to
// while others read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
