package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nginxReady bounds how long StartNginx waits for nginx to accept
// connections on every port.
const nginxReady = 10 * time.Second

// StartNginx runs the real nginx for tb, in the foreground and without a
// master process, with the server blocks that servers renders for n free
// loopback TCP ports, and returns those ports once nginx accepts
// connections on all of them. StartNginx writes the rest of the
// configuration: the pid file, the error log and the temporary directories
// in a directory of tb's, and access_log off. nginx is stopped when tb
// ends, and what it printed is logged, with its configuration, when tb has
// failed. A port that another process takes between being chosen and bound
// makes nginx exit; StartNginx then tries fresh ports, three times in all.
//
// nginx offers no readiness notification in this mode, so StartNginx
// connects to each port until it answers, nginx exits, or 10 s pass. A
// missing nginx skips tb, or fails it when [Required] is true.
func StartNginx(tb testing.TB, n int, servers func(ports []int) string) []int {
	tb.Helper()
	bin := Require(tb, "nginx")[0]
	dir := tb.TempDir()
	for attempt := 1; ; attempt++ {
		ports := FreePorts(tb, n)
		conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, servers(ports))
		ok, out := startNginxOn(tb, bin, dir, conf, ports)
		if ok {
			return ports
		}
		if attempt == 3 {
			tb.Fatalf("nginx did not start: %s\nconfiguration:\n%s", out, conf)
		}
	}
}

// startNginxOn starts nginx with conf and reports whether it came to accept
// connections on every port; if not, it returns what nginx printed.
func startNginxOn(tb testing.TB, bin, dir, conf string, ports []int) (bool, string) {
	tb.Helper()
	path, logPath := filepath.Join(dir, "nginx.conf"), filepath.Join(dir, "error.log")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		tb.Fatalf("nginx configuration: %v", err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", logPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("nginx: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	output := func() string {
		log, _ := os.ReadFile(logPath)
		return out.String() + string(log)
	}

	deadline := time.NewTimer(nginxReady)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for next := 0; next < len(ports); {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[next])); err == nil {
			c.Close()
			next++
			continue
		}
		select {
		case <-exited:
			return false, output()
		case <-deadline.C:
			stop()
			tb.Fatalf("nginx did not accept on %v within %v: %s\nconfiguration:\n%s", ports, nginxReady, output(), conf)
		case <-tick.C:
		}
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("nginx configuration:\n%s\nnginx output:\n%s", conf, output())
		}
	})
	return true, ""
}
