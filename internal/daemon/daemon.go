// Package daemon runs a real daemon (HAProxy, redis-server) for the
// project's tests and knows when it is ready without polling: the program
// runs in the foreground with NOTIFY_SOCKET set, and Start returns once it
// sends READY=1 by the systemd notify protocol (haproxy -Ws, redis-server
// --supervised systemd).
//
// It is internal: tests reach it through internal/e2e, which adds the
// skip-or-require rule, free ports and clean-up.
package daemon

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

// ErrExited means the program exited before it was ready; it is wrapped by
// an [*ExitError].
var ErrExited = errors.New("daemon: exited before it was ready")

// stopGrace is how long Stop waits after SIGTERM before it kills the program.
const stopGrace = 5 * time.Second

// ExitError reports a program that exited before it was ready.
type ExitError struct {
	// State is the exit status, as os.ProcessState prints it.
	State string
	// Log is what the program printed.
	Log string
}

func (e *ExitError) Error() string { return fmt.Sprintf("%v (%s):\n%s", ErrExited, e.State, e.Log) }

func (e *ExitError) Unwrap() error { return ErrExited }

// Config says how to run one program.
type Config struct {
	// Args are the program and its arguments (a wrapper such as ip netns
	// exec first, which must exec the program with the environment it was
	// given). Required.
	Args []string
	// Dir is a directory for the notify socket, whose path must fit in a
	// Unix socket address (see [ShortTempDir]). Required.
	Dir string
}

// Process is a running program started by [Start]. Its methods are safe
// for concurrent use.
type Process struct {
	cmd    *exec.Cmd
	log    Output
	exited chan struct{}
	stop   sync.Once
}

// Start starts the program in the foreground with NOTIFY_SOCKET naming a
// socket in cfg.Dir and returns once the program reports READY=1. The
// process is killed if the calling process dies (on Linux). When the
// program exits first the error is an [*ExitError]; when ctx ends first,
// the program is stopped and ctx's error returned. The caller stops a
// started Process with [Process.Stop] or [Process.Kill].
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if len(cfg.Args) == 0 || cfg.Dir == "" {
		return nil, errors.New("daemon: Config needs Args and Dir")
	}
	sockPath := filepath.Join(cfg.Dir, "notify")
	os.Remove(sockPath) // left by an earlier run in the same directory
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("daemon: notify socket: %w", err)
	}
	// Once the wait is over nobody reads the socket: close and remove it,
	// so the program's later notifications (STOPPING=1) fail at once
	// instead of filling a queue.
	defer func() {
		sock.Close()
		os.Remove(sockPath)
	}()
	ready := make(chan struct{})
	go readNotify(sock, ready)

	p := &Process{exited: make(chan struct{})}
	p.cmd = exec.Command(cfg.Args[0], cfg.Args[1:]...)
	p.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	p.cmd.SysProcAttr = dieWithParent()
	// The kernel sends the parent-death signal when the thread that
	// started the child ends, not the process: the starting goroutine
	// keeps its thread locked, so the runtime cannot end or hand over that
	// thread, until the program has exited.
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
		return nil, fmt.Errorf("daemon: %w", err)
	}
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		p.Stop()
		return nil, &ExitError{State: fmt.Sprint(p.cmd.ProcessState), Log: p.Log()}
	case <-ctx.Done():
		p.Stop()
		return nil, fmt.Errorf("daemon: %s not ready: %w:\n%s", filepath.Base(cfg.Args[0]), ctx.Err(), p.Log())
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

// ShortTempDir makes a private directory whose paths fit in a Unix socket
// address (108 bytes), which a long TMPDIR may not allow.
func ShortTempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err == nil && len(dir) <= 80 {
		return dir, nil
	}
	if err == nil {
		os.RemoveAll(dir)
	}
	return os.MkdirTemp("/tmp", pattern)
}

// Stop stops the program (SIGTERM, then SIGKILL after a grace period) and
// waits for it to exit. It may be called more than once, and after Kill.
func (p *Process) Stop() { p.end(syscall.SIGTERM) }

// Kill kills the program at once (SIGKILL), as a crash would, and waits
// for it to exit. It may be called more than once, and after Stop.
func (p *Process) Kill() { p.end(syscall.SIGKILL) }

func (p *Process) end(sig syscall.Signal) {
	p.stop.Do(func() {
		p.cmd.Process.Signal(sig)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Signal sends sig to the program (SIGSTOP freezes it: its listening
// socket still completes connections, but it answers nothing, like a host
// behind a network partition; SIGCONT thaws it).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed when the program has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Log returns what the program has printed on its standard output and error.
func (p *Process) Log() string { return p.log.String() }

// Output collects what a program prints, written by its output goroutine
// while others read it: the first 4 MiB, so that a chatty program cannot
// take a test's memory. Its zero value is ready to use.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// maxOutput is how much of a program's output an Output keeps.
const maxOutput = 4 << 20

// Write keeps p while the Output holds less than 4 MiB; it never fails.
func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < maxOutput {
		b.buf.Write(p)
	}
	return len(p), nil
}

// String returns what was kept.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
