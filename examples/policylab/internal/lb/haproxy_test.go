package lb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
)

var labTiming = trafficpolicy.Timing{Interval: 250 * time.Millisecond, Timeout: 200 * time.Millisecond, Rise: 2, Fall: 3}

func TestHAProxyConfig(t *testing.T) {
	cfg := haproxyConfig("/run/x.sock", topo.HealthCheckNodePort, labTiming, true)
	for _, want := range []string{
		"bind 203.0.113.20:80", "bind [2001:db8:ffff::20]:80", "bind 203.0.113.30:80", "bind [2001:db8:ffff::30]:80",
		"option httpchk", "http-check send meth GET uri /healthz", "http-check expect status 200", "timeout check 200ms",
		"server n1 198.51.100.11:30080 check port 32080 inter 250ms fall 3 rise 2",
		"server n3 198.51.100.13:30080 send-proxy-v2 track plain/n3",
	} {
		assert.Contains(t, cfg, want)
	}
	// Health checks carry no PROXY header ("port" is set, no check-send-proxy).
	assert.NotContains(t, cfg, "check-send-proxy", "PROXY header on checks")
	assert.Equal(t, topo.NumNodes, strings.Count(cfg, "send-proxy-v2"), "PROXY header on the plain backend:\n%s", cfg)
	v4 := haproxyConfig("/run/x.sock", topo.ProxyHealthzPort, labTiming, false)
	assert.NotContains(t, v4, "2001:db8", "IPv4-only config")
	assert.Contains(t, v4, "check port 10256", "IPv4-only config")
}

// TestHAProxyConfigValid has HAProxy itself check the configuration.
func TestHAProxyConfigValid(t *testing.T) {
	bin := e2e.Require(t, "haproxy")[0]
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	require.NoError(t, os.WriteFile(path, []byte(haproxyConfig(filepath.Join(dir, "s.sock"), topo.HealthCheckNodePort, labTiming, true)), 0o600))
	out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput()
	require.NoError(t, err, "haproxy -c:\n%s", out)
}

func TestParseStats(t *testing.T) {
	raw := "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight\n" +
		"plain,FRONTEND,,,0,1,256,12,0,0,0,0,0,,,,,OPEN,\n" +
		"plain,n1,0,0,0,1,,4,0,0,,0,,0,0,0,0,UP,1\n" +
		"plain,n3,0,0,0,0,,0,0,0,,0,,0,0,0,0,DOWN 1/2,1\n" +
		"plain,BACKEND,0,0,0,1,26,12,0,0,0,0,,0,0,0,0,UP,2\n\n"
	rows, err := parseStats([]byte(raw))
	require.NoError(t, err)
	want := []haproxyStat{{"plain", "FRONTEND", "OPEN", 12}, {"plain", "n1", "UP", 4}, {"plain", "n3", "DOWN 1/2", 0}, {"plain", "BACKEND", "UP", 12}}
	require.Len(t, rows, len(want), "rows = %v", rows)
	for i := range want {
		assert.Equal(t, want[i], rows[i], "row %d", i)
	}
	_, err = parseStats([]byte("# a,b\n1,2\n"))
	assert.Error(t, err, "stats without the needed columns parsed")
}
