package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// nginxReady bounds how long StartNginx waits for nginx to accept
// connections.
const nginxReady = 10 * time.Second

// StartNginx runs the real nginx for tb with the server blocks that server
// renders for a free loopback address ("127.0.0.1:port"), placed inside
// nginx's http block, and returns that address once nginx accepts
// connections on it. For example:
//
//	front := e2e.StartNginx(t, func(addr string) string {
//		return "server { listen " + addr + "; location / { proxy_pass http://" + upstream + "; } }"
//	})
//
// nginx runs in the foreground without a master process, with its
// configuration, logs and temporary files in a directory of tb's; it is
// killed when tb ends, and its output is logged when tb has failed. A port
// that another process takes between being chosen here and bound by nginx
// makes nginx exit; StartNginx then tries a fresh port, three times in all.
//
// nginx cannot report readiness by itself, so StartNginx connects to the
// address until it is accepted or nginx exits. A missing nginx skips tb, or
// fails it when [Required] is true.
func StartNginx(tb testing.TB, server func(addr string) string) string {
	tb.Helper()
	bin := Require(tb, "nginx")[0]
	dir := tb.TempDir()
	for range 3 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(tb, 1)[0]))
		if startNginxOn(tb, bin, dir, addr, server(addr)) {
			return addr
		}
	}
	tb.Fatalf("nginx did not start")
	return ""
}

// startNginxOn starts nginx with servers on addr and reports whether it came
// up; it fails tb when nginx neither accepts nor exits in time.
func startNginxOn(tb testing.TB, bin, dir, addr, servers string) bool {
	tb.Helper()
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
`, dir, servers)
	path := filepath.Join(dir, "nginx.conf")
	logPath := filepath.Join(dir, "error.log")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		tb.Fatalf("nginx configuration: %v", err)
	}
	// out is read only once nginx has exited (Wait has returned).
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

	// Connect until nginx accepts, exits, or runs out of time.
	deadline := time.NewTimer(nginxReady)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			tb.Cleanup(func() {
				stop()
				if tb.Failed() {
					tb.Logf("nginx configuration:\n%s\nnginx output:\n%s", conf, output())
				}
			})
			return true
		}
		select {
		case <-exited:
			tb.Logf("nginx exited on %s: %s", addr, output())
			return false
		case <-deadline.C:
			stop()
			tb.Fatalf("nginx did not accept on %s within %v: %s", addr, nginxReady, output())
		case <-tick.C:
		}
	}
}
