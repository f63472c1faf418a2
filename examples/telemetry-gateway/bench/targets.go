package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sourceip/sourceip/internal/freeport"
)

// target is one broker under test, run as its own process so that its
// memory is its own.
type target struct {
	name  string
	proxy bool     // the client sends a PROXY v2 header first (the gateway behind its load balancer)
	args  []string // a gateway's own flags (nil for mosquitto)
	start func(dir string, port int) (*process, error)
}

// process is a running broker.
type process struct {
	cmd    *exec.Cmd
	addr   string // MQTT over TLS
	admin  string // the gateway's admin address, for Go heap figures; "" for mosquitto
	exited chan struct{}
	out    *tail
}

// gatewayTarget runs the gateway binary with TLS and the sink as given,
// behind a PROXY-protocol load balancer on loopback (the client plays it).
func gatewayTarget(name, bin string, extra ...string) target {
	return target{name: name, proxy: true, args: extra, start: func(dir string, port int) (*process, error) {
		adminPort, err := freePort()
		for err == nil && adminPort == port { // port is free again once picked
			adminPort, err = freePort()
		}
		if err != nil {
			return nil, err
		}
		args := []string{
			"-mqtt-addr", fmt.Sprintf("127.0.0.1:%d", port), "-http-addr", "", "-admin-addr", fmt.Sprintf("127.0.0.1:%d", adminPort),
			"-tls-cert", filepath.Join(dir, "server.pem"), "-tls-key", filepath.Join(dir, "server.key"),
			// -mochi-log-level, -mqtt-log-level's former name, so that
			// -compare-bin can run a build from before the rename.
			"-proxy-trusted", "127.1.0.0/16", "-log-level", "error", "-mochi-log-level", "off",
		}
		if !slices.Contains(extra, "-nats-url") {
			sinkPath := filepath.Join(dir, name+".jsonl")
			os.Remove(sinkPath) // a fresh file each run
			args = append(args, "-sink", sinkPath, "-sink-min-free", "0")
		}
		args = append(args, extra...)
		p, err := startProcess(bin, args, fmt.Sprintf("127.0.0.1:%d", port))
		if p != nil {
			p.admin = fmt.Sprintf("127.0.0.1:%d", adminPort)
		}
		return p, err
	}}
}

// mosquittoTarget runs mosquitto with TLS and without persistence: it keeps
// nothing on disk and acknowledges a QoS 1 message once it has read it.
func mosquittoTarget(bin string) target {
	return target{name: "mosquitto", start: func(dir string, port int) (*process, error) {
		conf := filepath.Join(dir, "mosquitto.conf")
		text := fmt.Sprintf(`listener %d 127.0.0.1
certfile %s
keyfile %s
allow_anonymous true
persistence false
log_dest stderr
log_type error
max_connections -1
`, port, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"))
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		return startProcess(bin, []string{"-c", conf}, fmt.Sprintf("127.0.0.1:%d", port))
	}}
}

func startProcess(bin string, args []string, addr string) (*process, error) {
	p := &process{cmd: exec.Command(bin, args...), addr: addr, exited: make(chan struct{}), out: &tail{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited: %s", filepath.Base(bin), p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s: not listening on %s after 20s: %s", filepath.Base(bin), addr, p.out)
		}
	}
}

// stop ends the process (SIGTERM, then SIGKILL after 10 seconds).
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// memory is what a broker process holds: its resident set, and for the
// gateway the Go heap in use and goroutine stacks (from its /metrics).
type memory struct {
	rss, heap, stacks int64
}

func (p *process) memory() (memory, error) {
	var m memory
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			m.rss = kb << 10
		}
	}
	if p.admin == "" {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "go_memstats_heap_inuse_bytes":
			m.heap = int64(f)
		case "go_memstats_stack_inuse_bytes":
			m.stacks = int64(f)
		}
	}
	if m.heap == 0 {
		return m, errors.New("no go_memstats_heap_inuse_bytes in the gateway's /metrics")
	}
	return m, sc.Err()
}

// cpuTimes is a process's CPU time so far: in its own code (user) and in the
// kernel on its behalf (system), every thread's.
type cpuTimes struct{ user, sys time.Duration }

func (c cpuTimes) total() time.Duration { return c.user + c.sys }

func (c cpuTimes) sub(d cpuTimes) cpuTimes { return cpuTimes{c.user - d.user, c.sys - d.sys} }

// usage is a process's memory and the CPU time it has used, at one moment.
type usage struct {
	mem memory
	cpu cpuTimes
}

func (p *process) usage() (usage, error) {
	mem, err := p.memory()
	if err != nil {
		return usage{}, err
	}
	cpu, err := p.cpuTime()
	return usage{mem, cpu}, err
}

// cpuTime returns the CPU time the process has used, from /proc/PID/stat, in
// clock ticks of 10 ms.
func (p *process) cpuTime() (cpuTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return cpuTimes{}, err
	}
	// After "pid (comm) ": state is the first field, utime the 12th, stime the 13th.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return cpuTimes{}, fmt.Errorf("cannot read /proc/%d/stat", p.cmd.Process.Pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return cpuTimes{}, err
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return cpuTimes{time.Duration(utime) * tick, time.Duration(stime) * tick}, nil
}

// freePort returns a loopback port for a broker to bind, from below the
// kernel's ephemeral range, so that no port-0 listener or outgoing
// connection (of a test running beside the benchmark) takes it before the
// broker binds it.
func freePort() (int, error) {
	ports, err := freeport.Loopback(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// tail keeps the last 4 KiB a process printed, for error messages.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

var _ io.Writer = (*tail)(nil)
