package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sourceip/sourceip/internal/daemon"
)

// RedisConfig says how to run a redis-server for a test.
type RedisConfig struct {
	// Persist keeps the data across restarts: an append-only file written
	// and fsynced on every write (appendfsync always), so that even a
	// killed server loses nothing acknowledged. False runs with no
	// persistence at all: a restart starts empty.
	Persist bool
}

// Redis is a real redis-server started for a test by [StartRedis], on a
// loopback port and a private directory of its own (never the system's
// service). Its methods are safe for concurrent use.
type Redis struct {
	tb   testing.TB
	args []string
	dir  string
	addr string

	mu   sync.Mutex
	proc *daemon.Process
}

// StartRedis runs redis-server for tb on a free loopback port and returns
// once it accepts connections (it reports READY=1 under --supervised
// systemd). It is killed when tb ends, and what it printed is logged when
// tb has failed. A missing redis-server skips tb, or fails it when
// [Required] is true.
func StartRedis(tb testing.TB, cfg RedisConfig) *Redis {
	tb.Helper()
	bin := Require(tb, "redis-server")[0]
	dir, err := daemon.ShortTempDir("redis")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	aof := "no"
	if cfg.Persist {
		aof = "yes"
	}
	for attempt := 1; ; attempt++ {
		port := FreePorts(tb, 1)[0]
		r := &Redis{tb: tb, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		r.args = []string{bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--supervised", "systemd", "--daemonize", "no", "--logfile", "",
			"--save", "", "--appendonly", aof, "--appendfsync", "always",
		}
		err := r.start()
		if err == nil {
			tb.Cleanup(func() {
				r.Kill()
				if tb.Failed() {
					tb.Logf("redis-server output:\n%s", r.log())
				}
			})
			return r
		}
		var ee *daemon.ExitError
		if errors.As(err, &ee) && strings.Contains(ee.Log, "Address already in use") && attempt < 3 {
			continue
		}
		tb.Fatalf("redis-server: %v", err)
	}
}

func (r *Redis) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), haproxyReady)
	defer cancel()
	p, err := daemon.Start(ctx, daemon.Config{Args: r.args, Dir: r.dir})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	return nil
}

// Addr returns the server's address, "127.0.0.1:port".
func (r *Redis) Addr() string { return r.addr }

// Kill kills the server at once (SIGKILL), as a crash would: without
// persistence its data is gone; with it, everything acknowledged is on disk.
func (r *Redis) Kill() { r.current().Kill() }

// Stop stops the server gracefully (SIGTERM).
func (r *Redis) Stop() { r.current().Stop() }

// Freeze stops the server without ending it (SIGSTOP): the kernel still
// completes connections to its port, but nothing answers, as behind a
// network partition. Thaw (SIGCONT) lets it go on. A frozen server is
// thawed when the test ends.
func (r *Redis) Freeze() {
	r.tb.Helper()
	if err := r.current().Signal(syscall.SIGSTOP); err != nil {
		r.tb.Fatalf("redis-server freeze: %v", err)
	}
	r.tb.Cleanup(r.Thaw)
}

// Thaw lets a frozen server go on.
func (r *Redis) Thaw() { r.current().Signal(syscall.SIGCONT) }

// Restart starts the server again, after Kill or Stop, on the same port and
// directory, and returns once it accepts connections. It fails the test
// when the server cannot start (another process took the port, say).
func (r *Redis) Restart() {
	r.tb.Helper()
	if err := r.start(); err != nil {
		r.tb.Fatalf("redis-server restart: %v", err)
	}
}

func (r *Redis) current() *daemon.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *Redis) log() string {
	if p := r.current(); p != nil {
		return p.Log()
	}
	return ""
}
