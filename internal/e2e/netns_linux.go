package e2e

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// addrReady bounds how long AddAddr waits for the kernel to route to a new
// address (it takes well under a millisecond on an idle machine).
const addrReady = 10 * time.Second

// Netns is a named network namespace that a test created with [NewNetns].
type Netns struct {
	name string
	ip   string // the ip program
}

// NewNetns creates the network namespace name for tb, with its loopback
// up, and deletes it when tb ends, passed or failed; deleting a namespace
// also deletes the interfaces in it. Tests of other packages may run at the
// same time, so name should be unique to the test and the process (put
// os.Getpid() in it). It needs root and the ip program: without them it
// skips tb, or fails it when [Required] is true.
func NewNetns(tb testing.TB, name string) Netns {
	tb.Helper()
	RequireRoot(tb)
	if _, ok := setnsNumber(); !ok {
		Unavailable(tb, "setns(2) has no known number on "+runtime.GOARCH)
	}
	n := Netns{name: name, ip: Require(tb, "ip")[0]}
	n.run(tb, "netns", "add", name)
	tb.Cleanup(func() {
		if out, err := exec.Command(n.ip, "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	n.IP(tb, "link", "set", "lo", "up")
	return n
}

// Name returns the namespace's name.
func (n Netns) Name() string { return n.name }

// IP runs "ip -n <namespace> args…" and fails tb if it fails.
func (n Netns) IP(tb testing.TB, args ...string) {
	tb.Helper()
	n.run(tb, append([]string{"-n", n.name}, args...)...)
}

func (n Netns) run(tb testing.TB, args ...string) {
	tb.Helper()
	var out bytes.Buffer
	cmd := exec.Command(n.ip, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
}

// AddAddr adds prefix (an address with its prefix length, such as
// "fe80::1/64") to the interface dev in namespace n, without duplicate
// address detection, and returns once the kernel routes to the address:
// its local route is in the namespace's local table. The kernel inserts
// that route from a work queue after "ip addr add" has returned, nodad or
// not, and until then a connection to an IPv6 address on the loopback
// fails with "network is unreachable" (the prefix route via lo is a reject
// route). It fails tb when the route does not appear within 10 s.
func (n Netns) AddAddr(tb testing.TB, prefix, dev string) {
	tb.Helper()
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		tb.Fatalf("AddAddr: %v", err)
	}
	n.IP(tb, "addr", "add", prefix, "dev", dev, "nodad")
	family := "-4"
	if p.Addr().Is6() {
		family = "-6"
	}
	deadline := time.NewTimer(addrReady)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		out, err := exec.Command(n.ip, "-n", n.name, family, "route", "show", "table", "local", "exact", p.Addr().String()).Output()
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			return
		}
		select {
		case <-deadline.C:
			tb.Fatalf("namespace %s: no local route to %s within %v (ip route show: %v: %s)", n.name, p.Addr(), addrReady, err, out)
		case <-tick.C:
		}
	}
}

// Veth connects namespace n's interface name to namespace peer's interface
// peerName with a veth pair, created inside the two namespaces so that the
// names only need to be unique there. Both ends are brought up without the
// kernel's own link-local address (addrgenmode none), so the only addresses
// are those the test adds, with [Netns.AddAddr].
func (n Netns) Veth(tb testing.TB, name string, peer Netns, peerName string) {
	tb.Helper()
	n.run(tb, "link", "add", name, "netns", n.name, "type", "veth", "peer", "name", peerName, "netns", peer.name)
	for _, end := range []struct {
		ns  Netns
		dev string
	}{{n, name}, {peer, peerName}} {
		end.ns.IP(tb, "link", "set", end.dev, "addrgenmode", "none")
		end.ns.IP(tb, "link", "set", end.dev, "up")
	}
}

// Do runs f on an OS thread switched into the namespace, so that the
// sockets f creates (listeners, dialled connections) belong to it; they keep
// their namespace wherever they are used afterwards. f runs on a goroutine
// of its own, and Do returns what f returns. A thread that cannot be
// switched back is never reused: its goroutine ends with it locked, and the
// runtime ends the thread.
func (n Netns) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := openNetns("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer syscall.Close(back)
		into, err := openNetns("/run/netns/" + n.name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = setns(into)
		syscall.Close(into)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", n.name, err)
			return
		}
		ferr := f()
		if err := setns(back); err != nil {
			errc <- fmt.Errorf("setns back from %s: %w", n.name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func openNetns(path string) (int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}

// setns moves the calling thread into the network namespace open at fd.
// The standard library has neither a wrapper nor, on most architectures, the
// system call's number, and the library module takes no dependency for them.
func setns(fd int) error {
	nr, ok := setnsNumber()
	if !ok {
		return fmt.Errorf("setns: system call number unknown on %s", runtime.GOARCH)
	}
	if _, _, errno := syscall.RawSyscall(nr, uintptr(fd), syscall.CLONE_NEWNET, 0); errno != 0 {
		return errno
	}
	return nil
}

// setnsNumber returns the number of setns(2) on this architecture.
func setnsNumber() (uintptr, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return 308, true
	case "arm64", "riscv64", "loong64":
		return 268, true
	case "386":
		return 346, true
	case "arm":
		return 375, true
	}
	return 0, false
}
