package proxyproto

import (
	"net"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// waitAcked waits until the peer's kernel has acknowledged everything
// written on c (SIOCOUTQ reports no unsent or unacknowledged bytes), so the
// bytes are in the peer's receive queue.
func waitAcked(t testing.TB, c net.Conn) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	waitFor(t, "written bytes to be acknowledged", func() bool {
		var outq int32
		rc.Control(func(fd uintptr) {
			const siocoutq = 0x5411 // TIOCOUTQ
			syscall.Syscall(syscall.SYS_IOCTL, fd, siocoutq, uintptr(unsafe.Pointer(&outq)))
		})
		return outq == 0
	})
}
