//go:build unix

package proxyproto

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// tryRead reads what has already arrived on nc without waiting. ok is false
// when nothing has arrived yet or nc offers no raw access; then the caller
// reads with a deadline instead. At accept time a load balancer's header has
// usually arrived already, so most connections are judged without a
// goroutine or a timer of their own.
func tryRead(nc net.Conn, buf []byte) (n int, err error, ok bool) {
	sc, isSC := nc.(syscall.Conn)
	if !isSC {
		return 0, nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	var rerr error
	if cerr := rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), buf)
		return true // never wait for readiness
	}); cerr != nil {
		return 0, nil, false
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EINTR):
		return 0, nil, false
	case rerr != nil:
		return 0, rerr, true
	case n == 0 && len(buf) > 0:
		return 0, io.EOF, true
	}
	return n, nil, true
}
