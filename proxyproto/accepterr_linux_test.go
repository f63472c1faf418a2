package proxyproto

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The kernel's own EMFILE: with the descriptor limit lowered so that the
// process may open no more descriptors while a client's connection waits
// in the backlog, the listener's accept fails for real. It must report and
// count the error, back off, and accept the waiting connection once
// descriptors are available again.
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
	// Its accept loop starts with the first Accept, below: an accept4 of
	// its own, even one that finds nothing, reserves the lowest free
	// descriptor while it runs, which made the test's own socket fail with
	// EMFILE when the loop was already running.
	l := newListener(t, cfg)
	c := dial(t, lbAddr, l.Addr().String())

	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	restore := rl
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &restore) })
	// The lowest free descriptor becomes the limit: none may be opened.
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	syscall.Close(fd)
	rl.Cur = uint64(fd)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl))

	type accepted struct {
		c   net.Conn
		err error
	}
	got := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		got <- accepted{c, err}
	}()
	retryIn := <-emfile
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &restore))

	require.Equal(t, 5*time.Millisecond, retryIn, "first back-off")
	require.NoError(t, WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2")))
	var a accepted
	select {
	case a = <-got:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no connection accepted within 5s")
	}
	require.NoError(t, a.err)
	defer a.c.Close()
	require.Equal(t, ap("203.0.113.7:1"), a.c.(*Conn).Facts().Source)
	require.NotZero(t, l.Stats().AcceptErrors)
}
