package main

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContainerImage builds the image with ./build-image (the local Go
// toolchain, FROM scratch, no registry) and podman, runs it as the
// manifests do — a read-only root file system, user 65532, every capability
// dropped, no new privileges — with the host's network, and publishes a
// reading through it, from the load balancer's address with a PROXY header:
// the sink on the mounted volume holds it with the device's address.
func TestContainerImage(t *testing.T) {
	podman := e2e.Require(t, "podman")[0]
	e2e.RequireRoot(t)
	lockImageStore(t)
	prepareCgroups(t)
	image := fmt.Sprintf("localhost/telemetry-gateway:test-%d", os.Getpid())
	build := exec.Command("./build-image", image)
	build.Env = append(os.Environ(), "GO="+goCommand(t), "CONTAINER_ENGINE="+podman)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build-image:\n%s", out)
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "-f", image).Run() })
	user, err := exec.Command(podman, "image", "inspect", "--format", "{{.Config.User}}", image).Output()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", strings.TrimSpace(string(user)), "the image's user")

	data := t.TempDir()
	require.NoError(t, os.Chmod(data, 0o777)) // the container's user writes the sink here
	name := fmt.Sprintf("telemetry-gateway-test-%d", os.Getpid())
	logs := new(logLines)
	cmd := exec.Command(podman, "run", "--rm", "--name", name, "--network", "host",
		"--read-only", "--user", "65532:65532", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		// crun cannot raise the limits it inherits; name them (PODMAN-NOTES).
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"-v", data+":/data", image,
		"-mqtt-addr", "127.0.0.1:0", "-http-addr", "", "-admin-addr", "", "-sink", "/data/t.jsonl", "-sink-min-free", "0",
		"-tls-hosts", "127.0.0.1", "-tls-self-signed-out", "/data/cert.pem", "-proxy-trusted", "127.0.0.200", "-shutdown-timeout", "10s")
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = exec.Command(podman, "rm", "-f", name).Run()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
	})

	addr := logs.field(t, "gateway started", "mqtt")
	pool, err := pki.LoadPool(filepath.Join(data, "cert.pem"))
	require.NoError(t, err)
	c, err := device.Connect(t.Context(), device.Config{ID: "ct1", Version: 5, Addr: addr, Local: netip.MustParseAddr("127.0.0.200"),
		Proxy: 2, Claim: netip.MustParseAddrPort("192.0.2.77:7700"), TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, Timeout: 5 * time.Second})
	require.NoError(t, err, "log:\n%s", &logs.raw)
	require.NoError(t, c.Publish(t.Context(), "telemetry/ct1", 1, device.Reading("ct1", 1, 21.5)))
	c.Close()

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM)) // podman passes it on
	select {
	case err := <-exited:
		require.NoError(t, err, "the container's exit; log:\n%s", &logs.raw)
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the container did not stop", "log:\n%s", &logs.raw)
	}
	assert.Contains(t, logs.raw.String(), `"msg":"gateway stopped"`)
	f, err := os.Open(filepath.Join(data, "t.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	recs, err := sink.ReadAll(f)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "192.0.2.77", recs[0].Provenance.Client)
	assert.Equal(t, "proxy-protocol", recs[0].Provenance.Source)
	assert.True(t, strings.HasPrefix(recs[0].Provenance.Peer, "127.0.0.200:"), recs[0].Provenance.Peer)
}

// lockImageStore holds a lock on the machine's image store for t, so that
// this test in another test process (another checkout's run) waits for it.
// Their builds are identical, so they share an image and its intermediate
// images, and the first to finish removed them with podman rmi -f, together
// with the other's build container: "deleting build container …: container
// not known".
func lockImageStore(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/run/sourceip-container-image-test.lock", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// prepareCgroups makes podman's runtime work on a host whose cgroups are in
// hybrid mode with a controller on the v2 hierarchy (Debian 12 here: crun
// says "cgroups in hybrid mode not supported, drop all controllers from
// cgroupv2"): mounting hugetlb as a v1 hierarchy takes it off v2. It changes
// the host, as root, only when needed.
func prepareCgroups(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil || !strings.Contains(string(b), "hugetlb") {
		return
	}
	require.NoError(t, os.MkdirAll("/sys/fs/cgroup/hugetlb", 0o755))
	if out, err := exec.Command("mount", "-t", "cgroup", "-o", "hugetlb", "cgroup", "/sys/fs/cgroup/hugetlb").CombinedOutput(); err != nil {
		e2e.Unavailable(t, fmt.Sprintf("crun cannot run here (hybrid cgroups with hugetlb on v2) and remounting hugetlb failed: %v: %s", err, out))
	}
}

// goCommand returns the go command that built this test.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		e2e.Unavailable(t, "no go command to build the image's binary")
	}
	return p
}
