// Package natstest runs real NATS servers for the gateway's tests: the
// nats-server program built from github.com/nats-io/nats-server/v2 at the
// version the natsserver module pins (a module of its own, so that the
// server stays out of the examples module's build), started as processes
// that a test can kill.
//
// Building the server takes a minute or two the first time (the module is
// downloaded and compiled once; the build cache keeps it), a few seconds
// after. A machine without the go command or the module skips the test that
// needs it, or fails it under SOURCEIP_E2E=require.
package natstest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/sourceip/sourceip/internal/e2e"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the nats-server program, building it the first
// time (into a directory of the system's temporary directory named after
// the natsserver module's go.sum, shared by test binaries and runs).
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() { buildPath, buildErr = build() })
	if buildErr != nil {
		e2e.Unavailable(tb, "cannot build nats-server: "+strings.ReplaceAll(strings.TrimSpace(buildErr.Error()), "\n", "; "))
	}
	return buildPath
}

func build() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no source path")
	}
	mod := filepath.Join(filepath.Dir(file), "..", "..", "natsserver")
	sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(sum)
	dir := filepath.Join(os.TempDir(), "sourceip-nats-server-"+hex.EncodeToString(h[:6]))
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goCmd, err := e2e.LookPath("go")
	if err != nil {
		if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
			goCmd = p
		} else {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "nats-server-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	cmd := exec.Command(goCmd, "build", "-o", tmp.Name(), "github.com/nats-io/nats-server/v2")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("%w: %s", err, out)
	}
	return bin, os.Rename(tmp.Name(), bin) // atomic: another test binary may build it too
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Cluster is a NATS cluster with JetStream, one process per node.
type Cluster struct {
	tb    testing.TB
	bin   string
	Nodes []*Node
}

// Node is one nats-server process.
type Node struct {
	Name        string // server_name: "n1", "n2", … and a token unique to the cluster
	Port        int    // client port on 127.0.0.1
	ClusterPort int
	dir, conf   string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    *e2e.Output
}

// StartCluster starts n nodes (n ≥ 1; three for an R3 stream) routed to
// each other, with JetStream on files under tb's temporary directory, and
// returns once JetStream answers through every node (its meta leader is
// elected). The processes are killed when tb ends; what they printed is
// logged when tb has failed.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, bin: Binary(tb)}
	ports := e2e.FreePorts(tb, 2*n)
	// Node names unique to this cluster, so that Start knows its own node
	// from a nats-server of another test that took the port.
	token := make([]byte, 4)
	_, _ = rand.Read(token)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	base := tb.TempDir()
	for i := range n {
		nd := &Node{Name: fmt.Sprintf("n%d-%x", i+1, token), Port: ports[i], ClusterPort: ports[n+i], dir: filepath.Join(base, fmt.Sprintf("n%d", i+1))}
		nd.conf = filepath.Join(nd.dir, "nats.conf")
		cluster := ""
		if n > 1 {
			cluster = fmt.Sprintf("cluster {\n  name: gwtest\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", nd.ClusterPort, strings.Join(routes, ", "))
		}
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n}\n%s", nd.Name, nd.Port, filepath.Join(nd.dir, "js"), cluster)
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(nd.conf, []byte(conf), 0o644); err != nil {
			tb.Fatal(err)
		}
		c.Nodes = append(c.Nodes, nd)
	}
	tb.Cleanup(func() {
		for _, nd := range c.Nodes {
			nd.Kill()
			if tb.Failed() {
				tb.Logf("nats-server %s:\n%s", nd.Name, nd.Output())
			}
		}
	})
	for _, nd := range c.Nodes {
		if err := c.Start(nd); err != nil {
			tb.Fatal(err)
		}
	}
	for _, nd := range c.Nodes {
		if err := waitJetStream(nd.URL(), 30*time.Second); err != nil {
			tb.Fatalf("nats-server %s: JetStream not ready: %v\n%s", nd.Name, err, nd.Output())
		}
	}
	return c
}

// URL returns every node's client URL, comma-separated, as nats.Connect
// and the gateway's -nats-url take them.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		urls[i] = nd.URL()
	}
	return strings.Join(urls, ",")
}

// URL returns the node's client URL.
func (nd *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", nd.Port) }

// Start starts (or restarts) nd and waits until it accepts clients: until
// its port answers with a NATS INFO line naming nd, not merely accepts a
// connection, which a stranger that took the port would too.
func (c *Cluster) Start(nd *Node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.out = &e2e.Output{}
	nd.cmd = exec.Command(c.bin, "-c", nd.conf)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.out, nd.out
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nd.cmd.Start(); err != nil {
		return err
	}
	nd.exited = make(chan struct{})
	cmd, exited := nd.cmd, nd.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = answersAs(fmt.Sprintf("127.0.0.1:%d", nd.Port), nd.Name); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("nats-server %s exited: %s", nd.Name, nd.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("nats-server %s: not ready after 20s: %w", nd.Name, last)
}

// answersAs reports whether the server at addr greets a client with a NATS
// INFO line whose server_name is name.
func answersAs(addr, name string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReaderSize(conn, 4096).ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("%s: no INFO line: %w", addr, err)
	}
	js, ok := bytes.CutPrefix(line, []byte("INFO "))
	if !ok {
		return fmt.Errorf("%s: greeting %q is not a NATS INFO line", addr, line)
	}
	var info struct {
		ServerName string `json:"server_name"`
	}
	if err := json.Unmarshal(js, &info); err != nil {
		return fmt.Errorf("%s: INFO: %w", addr, err)
	}
	if info.ServerName != name {
		return fmt.Errorf("%s: answered as server %q, not %q", addr, info.ServerName, name)
	}
	return nil
}

// Kill ends nd with SIGKILL, as a crashed node, and waits for it.
func (nd *Node) Kill() {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Output returns what the node printed since it last started.
func (nd *Node) Output() string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.out == nil {
		return ""
	}
	return nd.out.String()
}

// waitJetStream waits until a JetStream API call through url succeeds.
func waitJetStream(url string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		nc, err := nats.Connect(url, nats.Timeout(time.Second))
		if err == nil {
			js, _ := natsjs.New(nc)
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = js.AccountInfo(actx)
			acancel()
			nc.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
}
