package kubeproxy

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/require"
)

// TestMain makes the test binary an agent when the lab starts it as one.
func TestMain(m *testing.M) {
	AgentMain()
	os.Exit(m.Run())
}

const testService = `apiVersion: v1
kind: Service
metadata: {namespace: lab, name: echo}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 32080
  clusterIP: 203.0.113.40
  clusterIPs: [203.0.113.40, "2001:db8:ffff::40"]
  ipFamilies: [IPv4, IPv6]
  ipFamilyPolicy: RequireDualStack
  ports: [{name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}]
status:
  loadBalancer:
    ingress: [{ip: 203.0.113.10, ipMode: VIP}, {ip: "2001:db8:ffff::10", ipMode: VIP}]
`

// TestAgent runs kube-proxy in each mode inside a namespace of its own and
// checks that it programs the Service and serves its health check node
// port and :10256 from there.
func TestAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		e2e.Unavailable(t, "not running as root")
	}
	e2e.Require(t, "ip")
	e2e.Require(t, "iptables-restore")
	e2e.Require(t, "ip6tables-restore")
	e2e.Require(t, "nft")
	svc, err := DecodeService([]byte(testService))
	require.NoError(t, err)
	for _, mode := range []Mode{ModeIPTables, ModeNFTables} {
		t.Run(string(mode), func(t *testing.T) {
			// The lab's naming scheme, so that a run killed outright is swept
			// by the next lab; an interrupt removes it at once.
			ns := netns.Prefix(os.Getpid(), "k") + string(mode)
			require.NoError(t, exec.Command("ip", "netns", "add", ns).Run())
			del := func() { netns.Delete(context.Background(), []string{ns}) }
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			done := make(chan struct{})
			go func() {
				select {
				case <-sig:
					del()
					os.Exit(1)
				case <-done:
				}
			}()
			t.Cleanup(func() {
				signal.Stop(sig)
				close(done)
				del()
			})
			lines := "link set lo up\naddr add 198.51.100.11/24 dev lo\naddr add 2001:db8:100::11/64 dev lo nodad\n"
			cmd := exec.Command("ip", "-n", ns, "-batch", "-")
			cmd.Stdin = strings.NewReader(lines)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)

			node := NodeObject("n1", []netip.Addr{netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr("2001:db8:100::11")}, NodeState{})
			a, err := Start(context.Background(), ns, Config{Mode: mode, Node: node, HealthzAddr: ":10256",
				ClusterCIDRs: []string{"203.0.113.128/25", "2001:db8:244::/48"}})
			require.NoError(t, err)
			defer a.Stop()
			eps := []Endpoint{{Addr: netip.MustParseAddr("203.0.113.138"), Node: "n1", Ready: true, Serving: true},
				{Addr: netip.MustParseAddr("2001:db8:244:1::10"), Node: "n1", Ready: true, Serving: true}}
			start := time.Now()
			rep, err := a.Do(context.Background(), Request{Service: svc, Slices: Slices(svc, "http", 8080, eps)})
			require.NoError(t, err)
			require.Len(t, rep.Synced, 2)
			t.Logf("first sync after %v", rep.SyncedAt().Sub(start))

			var rules []byte
			if mode == ModeIPTables {
				rules, err = exec.Command("ip", "netns", "exec", ns, "iptables-save", "-t", "nat").CombinedOutput()
			} else {
				rules, err = exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", "kube-proxy").CombinedOutput()
			}
			require.NoError(t, err, "%s", rules)
			require.Contains(t, string(rules), "203.0.113.138")

			client := &http.Client{Transport: &http.Transport{DialContext: netns.NS(ns).Dialer(), DisableKeepAlives: true}, Timeout: 5 * time.Second}
			get := func(url string) (int, string) {
				resp, err := client.Get(url)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(b)
			}
			code, body := get("http://198.51.100.11:32080/")
			require.Equal(t, 200, code, body)
			require.Contains(t, body, `"localEndpoints": 1`)
			code, body = get("http://198.51.100.11:10256/healthz")
			require.Equal(t, 200, code, body)

			rep, err = a.Do(context.Background(), Request{Slices: Slices(svc, "http", 8080, nil)})
			require.NoError(t, err)
			code, body = get("http://198.51.100.11:32080/")
			require.Equal(t, 503, code, body)
			_, err = a.Do(context.Background(), Request{Node: NodeObject("n1", nil, NodeState{Taints: []string{"ToBeDeletedByClusterAutoscaler"}})})
			require.NoError(t, err)
			code, body = get("http://198.51.100.11:10256/healthz")
			require.Equal(t, 503, code, body)
		})
	}
}
