// Package e2e holds the one rule for the examples' tests that need real
// programs or privileges (HAProxy, iptables, network namespaces): use them
// when they are there, skip with a one-line reason when they are not, and fail
// instead of skipping when SOURCEIP_E2E=require, as CI sets.
//
// It mirrors the library module's internal/e2e, which this module cannot
// import.
package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Required reports whether end-to-end tests must run (SOURCEIP_E2E=require).
func Required() bool { return os.Getenv("SOURCEIP_E2E") == "require" }

// LookPath returns the path of program name, looked up in PATH and then in
// the sbin directories, where Debian installs ip, iptables and haproxy and
// which a non-login root shell may lack.
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

// Require returns the paths of the named programs. When one is missing it
// skips tb with a one-line reason, or fails it when [Required] is true.
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

// RequireRoot skips tb (or fails it under SOURCEIP_E2E=require) unless the
// test runs as root, which network namespaces and iptables need.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Unavailable(tb, "not running as root")
	}
}

// Unavailable skips tb with reason, or fails it when [Required] is true.
func Unavailable(tb testing.TB, reason string) {
	tb.Helper()
	if Required() {
		tb.Fatalf("%s, and SOURCEIP_E2E=require", reason)
	}
	tb.Skipf("%s; skipping (set SOURCEIP_E2E=require to fail instead)", reason)
}
