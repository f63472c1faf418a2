// Package e2e holds the one rule for tests that need a real program (HAProxy,
// nginx, mosquitto clients): use it when it is installed, skip with a reason when
// it is not, and fail instead of skipping when SOURCEIP_E2E=require, as CI sets.
package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// Required reports whether end-to-end tests must run (SOURCEIP_E2E=require).
func Required() bool { return os.Getenv("SOURCEIP_E2E") == "require" }

// Require returns the path of the program name found in PATH (or the sbin
// directories, where Debian installs daemons such as haproxy). When it is
// missing, Require skips tb with a one-line reason, or fails it when
// [Required] is true.
func Require(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
			if p, e := exec.LookPath(dir + "/" + name); e == nil {
				return p
			}
		}
		if Required() {
			tb.Fatalf("%s is required (SOURCEIP_E2E=require) but not installed: %v", name, err)
		}
		tb.Skipf("%s not installed; skipping (set SOURCEIP_E2E=require to fail instead)", name)
	}
	return path
}

// Unavailable skips tb with reason, or fails it when [Required] is true: for
// a test whose real part (a Unix socket, a bound client address) the machine
// does not offer.
func Unavailable(tb testing.TB, reason string) {
	tb.Helper()
	if Required() {
		tb.Fatalf("%s, and SOURCEIP_E2E=require", reason)
	}
	tb.Skipf("%s; skipping (set SOURCEIP_E2E=require to fail instead)", reason)
}
