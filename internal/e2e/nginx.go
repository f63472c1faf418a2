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

// nginxReady bounds how long StartNginx waits for nginx to accept.
const nginxReady = 10 * time.Second

// StartNginx runs the real nginx for tb in the foreground, with server, the
// body of one http { server { … } } block for a free loopback address
// (server gets the "127.0.0.1:port" to put after listen), and returns that
// address once nginx accepts connections on it. nginx is killed when tb
// ends, and what it printed is logged when tb has failed. A port that
// another process takes between being chosen here and bound by nginx makes
// nginx exit; StartNginx then tries a fresh port, three times in all.
//
// A missing nginx skips tb, or fails it when [Required] is true.
func StartNginx(tb testing.TB, server func(addr string) string) string {
	tb.Helper()
	bin := Require(tb, "nginx")[0]
	dir := tb.TempDir()
	for range 3 {
		addr := freePorts(tb, 1)[0]
		listen := fmt.Sprintf("127.0.0.1:%d", addr)
		if startNginxOn(tb, bin, dir, listen, server(listen)) {
			return listen
		}
	}
	tb.Fatalf("nginx did not start")
	return ""
}

// startNginxOn starts nginx with server listening on addr and reports
// whether it came up.
func startNginxOn(tb testing.TB, bin, dir, addr, server string) bool {
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
	server {
%[2]s
	}
}
`, dir, server)
	path := filepath.Join(dir, "nginx.conf")
	logPath := filepath.Join(dir, "error.log")
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
	logs := func() string {
		log, _ := os.ReadFile(logPath)
		return out.String() + string(log)
	}

	// Poll with connects until nginx accepts, exits, or runs out of time.
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
					tb.Logf("nginx configuration:\n%s\nnginx output:\n%s", conf, logs())
				}
			})
			return true
		}
		select {
		case <-exited:
			tb.Logf("nginx exited on %s: %s", addr, logs())
			return false
		case <-deadline.C:
			stop()
			tb.Fatalf("nginx did not accept on %s within %v: %s", addr, nginxReady, logs())
		case <-tick.C:
		}
	}
}
