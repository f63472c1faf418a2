package proxyproto

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The kernel's own EMFILE: with the descriptor limit lowered so that a
// client's socket is the last descriptor the process may open, the listener's
// accept fails for real. It must report and count the error, back off, and
// accept the waiting connection once descriptors are available again.
func TestListenerAcceptEMFILE(t *testing.T) {
	emfile := make(chan time.Duration, 64)
	cfg := trustedLB()
	cfg.OnAcceptError = func(err error, retryIn time.Duration) {
		if errors.Is(err, syscall.EMFILE) {
			select {
			case emfile <- retryIn:
			default:
			}
		}
	}
	s := newServer(t, cfg) // its accept loop is running

	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	restore := rl
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &restore) })
	// The lowest free descriptor will be the client's socket; the limit
	// makes it the last one.
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	syscall.Close(fd)
	rl.Cur = uint64(fd) + 1
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl))

	c := dial(t, lbAddr, s.addr())
	retryIn := <-emfile
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &restore))

	require.Equal(t, 5*time.Millisecond, retryIn, "first back-off")
	require.NoError(t, WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2")))
	sc := s.accept(t)
	require.Equal(t, ap("203.0.113.7:1"), sc.Facts().Source)
	require.NotZero(t, s.l.Stats().AcceptErrors)
}
