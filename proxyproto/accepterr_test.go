package proxyproto

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultyListener returns the errors in script from Accept, in order; a nil
// entry accepts from the real listener.
type faultyListener struct {
	net.Listener
	mu     sync.Mutex
	script []error
}

func (l *faultyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	var err error
	if len(l.script) > 0 {
		err, l.script = l.script[0], l.script[1:]
	}
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return l.Listener.Accept()
}

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

type acceptFailure struct {
	err     error
	retryIn time.Duration
}

// Temporary accept errors (EMFILE, ENFILE) are counted, reported with the
// back-off net/http uses (5 ms doubling, reset by a success), and retried; a
// permanent one is counted, reported with no retry, and returned by Accept.
func TestListenerAcceptErrors(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	require.NoError(t, err)
	emfile, enfile, einval := acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE), acceptErr(syscall.EINVAL)
	fl := &faultyListener{Listener: inner, script: []error{emfile, emfile, enfile, emfile, nil, emfile, einval}}
	reports := make(chan acceptFailure, 16)
	cfg := trustedLB()
	cfg.OnAcceptError = func(err error, retryIn time.Duration) { reports <- acceptFailure{err, retryIn} }
	l, err := NewListener(fl, cfg)
	require.NoError(t, err)
	defer l.Close()

	c := dial(t, lbAddr, l.Addr().String())
	require.NoError(t, WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2")))
	sc, err := l.Accept()
	require.NoError(t, err, "the connection behind four temporary errors")
	sc.Close()
	_, err = l.Accept()
	require.ErrorIs(t, err, syscall.EINVAL, "Accept after a permanent error")

	want := []acceptFailure{
		{emfile, 5 * time.Millisecond}, {emfile, 10 * time.Millisecond}, {enfile, 20 * time.Millisecond}, {emfile, 40 * time.Millisecond},
		{emfile, 5 * time.Millisecond}, // reset by the success
		{einval, 0},                    // permanent: no retry
	}
	got := make([]acceptFailure, 0, len(want))
	for range want {
		got = append(got, <-reports)
	}
	assert.Equal(t, want, got)
	st := l.Stats()
	assert.Equal(t, uint64(len(want)), st.AcceptErrors)
	assert.Equal(t, uint64(1), st.Accepted)
}

// The back-off is capped at one second.
func TestListenerAcceptBackoffCap(t *testing.T) {
	l := &Listener{failed: make(chan struct{})}
	var d time.Duration
	var seen []time.Duration
	for range 10 {
		d = l.acceptFailed(acceptErr(syscall.EMFILE), d)
		seen = append(seen, d)
	}
	assert.Equal(t, []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}, scale(seen, time.Millisecond))
	assert.Equal(t, uint64(10), l.acceptErrors.Load())
}

func scale(d []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, v := range d {
		out[i] = v / unit
	}
	return out
}

// Close while backing off stops the listener without counting anything
// more: Accept reports net.ErrClosed.
func TestListenerCloseDuringBackoff(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	require.NoError(t, err)
	reported := make(chan struct{}, 1)
	l, err := NewListener(&faultyListener{Listener: inner, script: []error{acceptErr(syscall.EMFILE)}}, Config{
		OnAcceptError: func(error, time.Duration) { reported <- struct{}{} },
	})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { _, err := l.Accept(); errc <- err }()
	<-reported
	require.NoError(t, l.Close())
	assert.True(t, errors.Is(<-errc, net.ErrClosed))
	assert.Equal(t, uint64(1), l.Stats().AcceptErrors)
}
