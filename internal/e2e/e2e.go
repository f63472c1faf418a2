// Package e2e holds the one rule for tests that need a real program (HAProxy,
// nginx, mosquitto clients, iptables) or privileges (network namespaces):
// use them when they are there, skip with a one-line reason when they are
// not, and fail instead of skipping when SOURCEIP_E2E=require, as CI sets.
// Every module of the repository uses it (Go's internal rule is by import
// path, so the examples module may import it too).
//
// When SOURCEIP_E2E_SKIPS names a file, each skip also appends one line to
// it, "<package directory>\t<test>\t<reason>", from which scripts/test
// prints the summary of skipped real-peer tests.
package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/internal/daemon"
)

// Output collects a program's output for a test (the first 4 MiB), written
// by one goroutine while others read it.
type Output = daemon.Output

// Required reports whether end-to-end tests must run (SOURCEIP_E2E=require).
func Required() bool { return os.Getenv("SOURCEIP_E2E") == "require" }

// LookPath returns the path of program name, looked up in PATH and then in
// the sbin directories, where Debian installs daemons and tools (haproxy,
// nginx, ip, iptables) and which a non-login shell's PATH may lack.
func LookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		if p, e := exec.LookPath(filepath.Join(dir, name)); e == nil {
			return p, nil
		}
	}
	return "", err
}

// Require returns the paths of the named programs, in order. When one is
// missing it skips tb with a one-line reason, or fails it when [Required]
// is true.
func Require(tb testing.TB, names ...string) []string {
	tb.Helper()
	paths := make([]string, 0, len(names))
	for _, name := range names {
		p, err := LookPath(name)
		if err != nil {
			Unavailable(tb, name+" is not installed")
		}
		paths = append(paths, p)
	}
	return paths
}

// RequireRoot skips tb (or fails it when [Required] is true) unless the
// test runs as root, which network namespaces and iptables need.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Unavailable(tb, "not running as root")
	}
}

// Unavailable skips tb with reason, or fails it when [Required] is true:
// for a test whose real part (a program, a Unix socket, a bound client
// address) the machine does not offer. reason is one line.
func Unavailable(tb testing.TB, reason string) {
	tb.Helper()
	if Required() {
		tb.Fatalf("%s, and SOURCEIP_E2E=require", reason)
	}
	recordSkip(tb.Name(), reason)
	tb.Skipf("%s; skipping (set SOURCEIP_E2E=require to fail instead)", reason)
}

// recordSkip appends the skip to the file SOURCEIP_E2E_SKIPS names, if any.
// One write per line on a file opened for appending keeps the lines of
// test binaries running in parallel whole.
func recordSkip(test, reason string) {
	path := os.Getenv("SOURCEIP_E2E_SKIPS")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return // the summary is a convenience; the skip itself is reported by go test
	}
	defer f.Close()
	dir, _ := os.Getwd() // go test runs a package's tests in its directory
	oneLine := strings.NewReplacer("\n", " ", "\t", " ")
	f.WriteString(dir + "\t" + test + "\t" + oneLine.Replace(reason) + "\n")
}
