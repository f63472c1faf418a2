//go:build !linux

package haproxy

import "syscall"

// dieWithParent returns nil: only Linux kills a child with its parent.
func dieWithParent() *syscall.SysProcAttr { return nil }
