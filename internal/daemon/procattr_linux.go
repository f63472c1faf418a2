package daemon

import "syscall"

// dieWithParent has the kernel kill the program when the process that
// started it dies (a test binary killed at its timeout), so no daemon is
// left holding ports (HAProxy's worker exits with its master).
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
