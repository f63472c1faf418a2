// Package netns creates, enters and removes the lab's network namespaces:
// named namespaces (ip netns), code run on an OS thread switched into one,
// programs run inside one, and the sweep of namespaces left by runs that
// were killed.
package netns

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Namespaces are named plab<pid><tag>-<role> (tag: a lowercase letter or
// nothing), so that parallel runs never collide and leftovers of a run that
// was killed can be told from live ones: a namespace whose pid is gone is
// stale.
const nsPrefix = "plab"

var nsNameRE = regexp.MustCompile(`^` + nsPrefix + `([0-9]+)[a-z]?-[a-z0-9]+$`)

// Prefix returns the name prefix of the namespaces of process pid, with a
// tag of one lowercase letter or "" that tells apart several labs of one
// process.
func Prefix(pid int, tag string) string { return fmt.Sprintf("%s%d%s-", nsPrefix, pid, tag) }

// NS is a named network namespace created by ip netns add.
type NS string

// Path is the namespace's file under /run/netns.
func (n NS) Path() string { return "/run/netns/" + string(n) }

// Do runs f on an OS thread switched into the namespace, so that the sockets
// f creates (listeners, dialled connections) belong to it; they keep their
// namespace wherever they are used afterwards. f runs on a goroutine of its
// own; if the thread cannot be switched back it is never reused (the
// goroutine exits with the thread locked, and the runtime ends the thread).
func (n NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := syscall.Open("/proc/thread-self/ns/net", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: open own namespace: %w", err)
			return
		}
		defer syscall.Close(self)
		target, err := syscall.Open(n.Path(), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns %s: %w", n, err)
			return
		}
		defer syscall.Close(target)
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns %s: setns: %w", n, err)
			return
		}
		ferr := f()
		if err := setns(self); err != nil {
			errc <- fmt.Errorf("netns %s: switching back: %w", n, err) // the thread stays locked and dies with this goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(fd int) error { return unix.Setns(fd, unix.CLONE_NEWNET) }

// Sysctl writes the given net.* keys inside the namespace.
func (n NS) Sysctl(kv ...string) error {
	return n.Do(func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			p := "/proc/sys/" + strings.ReplaceAll(kv[i], ".", "/")
			if err := os.WriteFile(p, []byte(kv[i+1]), 0); err != nil {
				return fmt.Errorf("netns %s: sysctl %s=%s: %w", n, kv[i], kv[i+1], err)
			}
		}
		return nil
	})
}

// Exec runs a program inside the namespace (ip netns exec), with stdin.
func (n NS) Exec(ctx context.Context, stdin string, args ...string) error {
	return Run(ctx, stdin, append([]string{"ip", "netns", "exec", string(n)}, args...)...)
}

// IPBatch runs ip -batch in the namespace ("" for the lab's own, for netns
// add and del), one command a line.
func IPBatch(ctx context.Context, ns NS, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	args := []string{"ip"}
	if ns != "" {
		args = append(args, "-n", string(ns))
	}
	args = append(args, "-batch", "-")
	return Run(ctx, strings.Join(lines, "\n")+"\n", args...)
}

// Run runs a program with stdin, its output folded into the error.
func Run(ctx context.Context, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// listNamespaces returns the names ip netns list reports.
func listNamespaces(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// Owned returns the lab namespaces that exist, with the pid of the
// run that created each.
func Owned(ctx context.Context) (map[string]int, error) {
	names, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int)
	for _, name := range names {
		m := nsNameRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		out[name] = pid
	}
	return out, nil
}

// OwnedBy returns the names of the lab namespaces that process pid
// created, sorted: those whose name carries exactly that pid.
func OwnedBy(ctx context.Context, pid int) ([]string, error) {
	all, err := Owned(ctx)
	if err != nil {
		return nil, err
	}
	return ofPid(all, pid), nil
}

// ofPid returns the names in all (name → pid) that belong to pid, sorted.
func ofPid(all map[string]int, pid int) []string {
	var out []string
	for name, p := range all {
		if p == pid {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// SweepStale deletes lab namespaces left by runs whose process is gone and
// returns their names. Namespaces of live runs are left alone.
func SweepStale(ctx context.Context) ([]string, error) {
	all, err := Owned(ctx)
	if err != nil {
		return nil, err
	}
	var stale []string
	for name, pid := range all {
		if pid != os.Getpid() && !alive(pid) {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	return stale, Delete(ctx, stale)
}

// alive reports whether process pid exists and is not a zombie: a lab
// killed with SIGKILL stays a zombie until its parent reaps it, and its
// namespaces are stale all the same.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // cannot tell; keep its namespaces
	}
	// The state follows the parenthesised command name, which may contain
	// anything, so look after its last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// Delete deletes the named namespaces, going on past errors.
func Delete(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var lines strings.Builder
	for _, n := range names {
		lines.WriteString("netns del " + n + "\n")
	}
	return Run(ctx, lines.String(), "ip", "-force", "-batch", "-")
}

// Dialer returns a DialContext that opens connections from inside n.
func (n NS) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := n.Do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Listen opens a TCP listener on addr inside n.
func (n NS) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// Restore replaces the tables in text atomically with iptables-restore
// (family 4) or ip6tables-restore (family 6).
func (n NS) Restore(ctx context.Context, family int, text string) error {
	prog := "iptables-restore"
	if family == 6 {
		prog = "ip6tables-restore"
	}
	return n.Exec(ctx, text, prog)
}

// LookPath finds a program in PATH or in the sbin directories, where Debian
// installs ip, iptables and haproxy and which a non-login shell may lack.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		if p, err := exec.LookPath(dir + "/" + name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}
