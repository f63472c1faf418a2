package haproxy

import "syscall"

// dieWithParent has the kernel kill haproxy's master when the process that
// started it dies (a test binary killed at its timeout), so no HAProxy is
// left holding ports; its worker exits with the master.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
