//go:build !linux

package daemon

import "syscall"

// dieWithParent returns nil: only Linux kills a child with its parent.
func dieWithParent() *syscall.SysProcAttr { return nil }
