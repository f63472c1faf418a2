package lb

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sourceip/sourceip/internal/haproxy"
	"github.com/sourceip/sourceip/trafficpolicy"

	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
)

// haproxyConfig returns the configuration of the full-proxy load balancer:
// HAProxy in TCP mode, forwarding to every node's node port from its own
// address, health-checking each node with option httpchk on checkPort (the
// topo.HealthCheckNodePort under Local, kube-proxy's healthz under Cluster).
// Frontend "plain" forwards without a PROXY header, frontend "pp" with
// send-proxy-v2; the pp servers track the plain servers' checks, so each node
// is checked once. The checks carry no PROXY header: "port" is set, and
// HAProxy then sends one only with check-send-proxy.
func haproxyConfig(sock string, checkPort int, t trafficpolicy.Timing, v6 bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 256
    nbthread 1
    stats socket %s mode 600 level admin

defaults
    mode tcp
    timeout connect 1s
    timeout client 5s
    timeout server 5s
    timeout check %dms
    retries 0

frontend plain
    bind %s:%d
`, sock, t.Timeout.Milliseconds(), topo.VIPHAProxy.V4, topo.ServicePort)
	if v6 {
		fmt.Fprintf(&b, "    bind [%s]:%d\n", topo.VIPHAProxy.V6, topo.ServicePort)
	}
	fmt.Fprintf(&b, `    default_backend plain

frontend pp
    bind %s:%d
`, topo.VIPHAProxyPP.V4, topo.ServicePort)
	if v6 {
		fmt.Fprintf(&b, "    bind [%s]:%d\n", topo.VIPHAProxyPP.V6, topo.ServicePort)
	}
	b.WriteString(`    default_backend pp

backend plain
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host policylab
    http-check expect status 200
`)
	for i := 1; i <= topo.NumNodes; i++ {
		fmt.Fprintf(&b, "    server n%d %s check port %d inter %dms fall %d rise %d\n",
			i, netip.AddrPortFrom(topo.NodeAddr(i).V4, topo.NodePort), checkPort, t.Interval.Milliseconds(), t.Fall, t.Rise)
	}
	b.WriteString("\nbackend pp\n    balance roundrobin\n")
	for i := 1; i <= topo.NumNodes; i++ {
		fmt.Fprintf(&b, "    server n%d %s send-proxy-v2 track plain/n%d\n", i, netip.AddrPortFrom(topo.NodeAddr(i).V4, topo.NodePort), i)
	}
	return b.String()
}

// HAProxy is a running HAProxy in the load balancer's namespace.
type HAProxy struct {
	proc    *haproxy.Process
	sock    string
	sockDir string // removed by Stop
}

// StartHAProxy starts HAProxy inside ns with the lab's configuration and
// returns once it reports that it is ready (internal/haproxy: in the
// foreground, -Ws; it dies with the lab). It is stopped by Stop.
func StartHAProxy(ctx context.Context, ns netns.NS, checkPort int, t trafficpolicy.Timing, v6 bool) (*HAProxy, error) {
	// The stats socket's path must fit in a Unix socket address (108
	// bytes), which a directory under a long TMPDIR may not: it gets a
	// short directory of its own under /tmp.
	sockDir, err := os.MkdirTemp("/tmp", "plab")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(sockDir, "haproxy.sock")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := haproxy.Start(ctx, haproxy.Config{
		Path: "haproxy",
		Wrap: []string{"ip", "netns", "exec", string(ns)},
		Text: haproxyConfig(sock, checkPort, t, v6),
	})
	if err != nil {
		os.RemoveAll(sockDir)
		return nil, err
	}
	return &HAProxy{proc: p, sock: sock, sockDir: sockDir}, nil
}

// Stop terminates HAProxy and waits for it.
func (h *HAProxy) Stop() {
	if h == nil {
		return
	}
	h.proc.Stop()
	os.RemoveAll(h.sockDir)
}

// haproxyStat is one row of "show stat".
type haproxyStat struct {
	Proxy, Server string
	Status        string // UP, DOWN, "UP 1/2", "no check", OPEN for frontends …
	Sessions      int    // stot: sessions since start
}

// stats reads "show stat" from the stats socket (a Unix socket in the file
// system, so it is reachable from any network namespace).
func (h *HAProxy) stats(ctx context.Context) ([]haproxyStat, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "unix", h.sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return nil, err
	}
	return parseStats(raw)
}

func parseStats(raw []byte) ([]haproxyStat, error) {
	raw = bytes.TrimPrefix(bytes.TrimSpace(raw), []byte("# "))
	r := csv.NewReader(bytes.NewReader(raw))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) == 0 {
		return nil, fmt.Errorf("haproxy: unreadable stats: %v", err)
	}
	col := func(name string) int { return slices.Index(recs[0], name) }
	px, sv, st, stot := col("pxname"), col("svname"), col("status"), col("stot")
	if px < 0 || sv < 0 || st < 0 || stot < 0 {
		return nil, fmt.Errorf("haproxy: stats header lacks columns: %v", recs[0])
	}
	var out []haproxyStat
	for _, rec := range recs[1:] {
		if len(rec) <= max(px, sv, st, stot) {
			continue
		}
		n, _ := strconv.Atoi(rec[stot])
		out = append(out, haproxyStat{Proxy: rec[px], Server: rec[sv], Status: rec[st], Sessions: n})
	}
	return out, nil
}

// ServerStates returns the plain backend's server states by name.
func (h *HAProxy) ServerStates(ctx context.Context) (map[string]string, error) {
	rows, err := h.stats(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string)
	for _, r := range rows {
		if r.Proxy == "plain" && r.Server != "BACKEND" && r.Server != "FRONTEND" {
			out[r.Server] = r.Status
		}
	}
	return out, nil
}

// FrontendSessions returns the session count of frontend name.
func (h *HAProxy) FrontendSessions(ctx context.Context, name string) (int, error) {
	rows, err := h.stats(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if r.Proxy == name && r.Server == "FRONTEND" {
			return r.Sessions, nil
		}
	}
	return 0, fmt.Errorf("haproxy: no frontend %q", name)
}

// InRotation reports whether a server status means HAProxy sends it
// traffic: "UP", or "UP 2/3" (up, with failed checks that have not reached
// fall yet).
func InRotation(status string) bool { return status == "UP" || strings.HasPrefix(status, "UP ") }

// WaitUp waits until exactly the nodes in up are UP in HAProxy and the others
// DOWN.
func (h *HAProxy) WaitUp(ctx context.Context, up []string, timeout time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		states, err := h.ServerStates(ctx)
		if err == nil {
			ok := len(states) == topo.NumNodes
			for name, s := range states {
				if slices.Contains(up, name) != InRotation(s) || !slices.Contains(up, name) && !strings.HasPrefix(s, "DOWN") {
					ok = false
				}
			}
			if ok {
				return states, nil
			}
		}
		if time.Now().After(deadline) {
			return states, fmt.Errorf("haproxy: servers %v, want up %v: %v", states, up, err)
		}
		select {
		case <-ctx.Done():
			return states, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}
