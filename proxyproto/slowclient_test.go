//go:build unix

package proxyproto

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
)

// raiseFDLimit makes room for n more descriptors, or skips (fails under
// SOURCEIP_E2E=require: CI must run the slow-client test).
func raiseFDLimit(t *testing.T, n uint64) {
	skip := func(format string, args ...any) {
		t.Helper()
		e2e.Unavailable(t, fmt.Sprintf(format, args...))
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		skip("getrlimit: %v", err)
	}
	if rl.Cur >= n {
		return
	}
	if rl.Max < n {
		skip("file descriptor limit %d is below the %d this test needs", rl.Max, n)
	}
	old := rl.Cur
	rl.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		skip("setrlimit: %v", err)
	}
	t.Cleanup(func() {
		rl.Cur = old
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	})
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC() // a second cycle empties sync.Pools
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestSlowClients: 1,000 connections from the trusted upstream that send
// nothing must not delay 100 well-behaved ones, must all be closed at the
// deadline, and must leave goroutines and heap where they were.
func TestSlowClients(t *testing.T) {
	if testing.Short() {
		t.Skip("slow-client test skipped in -short mode")
	}
	const (
		silentN = 1000
		goodN   = 100
		// Long enough that setting up 1,000 silent connections, measuring the
		// heap and serving 100 clients fits inside it on a slow, throttled
		// CI runner under -race (that has taken over a second), since the
		// silent connections must not time out before the good ones are
		// served; every silent connection is then waited out.
		timeout = 4 * time.Second
	)
	raiseFDLimit(t, 2*(silentN+goodN)+256)

	cfg := trustedLB()
	cfg.ReadHeaderTimeout = timeout
	l := newListener(t, cfg)
	go serveEach(l, func(c net.Conn) {
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err == nil {
			c.Write([]byte("pong"))
		}
	})
	addr := l.Addr().String()
	good := func() error {
		c, err := DialContext(t.Context(), &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(lbAddr)}}, "tcp", addr,
			header(2, "203.0.113.7:1", "192.0.2.10:2"))
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 4))
		return err
	}
	// Warm up: the accept loop is running and one connection went through.
	require.NoError(t, good())
	require.Zero(t, l.Stats().Pending, "pending after the warm-up connection")
	baseG := runtime.NumGoroutine()
	baseHeap := heapInuse()

	start := time.Now()
	silent := make([]net.Conn, 0, silentN)
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range silentN {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err, "silent dial %d", len(silent))
		silent = append(silent, c)
	}
	waitFor(t, "silent connections to be pending", func() bool { return l.Stats().Pending >= silentN })
	peakHeap := heapInuse()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	errs := make(chan error, goodN)
	for range goodN {
		wg.Go(func() {
			t0 := time.Now()
			if err := good(); err != nil {
				errs <- err
			}
			mu.Lock()
			worst = max(worst, time.Since(t0))
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err, "well-behaved client")
	}
	st := l.Stats()
	t.Logf("%d silent connected and pending in %v; %d served, slowest %v, while %d still pending",
		silentN, time.Since(start).Round(time.Millisecond), goodN, worst.Round(time.Millisecond), st.Pending)
	assert.Zero(t, st.Rejected[ReasonTimeout], "silent connections timed out before the well-behaved ones were served")

	// Every silent connection is closed at the deadline.
	waitFor(t, "silent connections to time out", func() bool { return l.Stats().Rejected[ReasonTimeout] == silentN })
	assert.GreaterOrEqual(t, time.Since(start), timeout, "silent connections closed before the deadline")
	for _, c := range silent {
		closedByServer(t, c)
		c.Close()
	}
	silent = nil

	waitFor(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseG+2 })
	var after uint64
	waitFor(t, "heap back to baseline", func() bool {
		after = heapInuse()
		// Goroutine descriptors are never freed by the runtime, so a spike of
		// 2,000 goroutines leaves a few hundred KiB behind; anything near the
		// peak would be a leak.
		return after <= baseHeap+4<<20
	})
	st = l.Stats()
	t.Logf("after the deadline: goroutines %d (baseline %d), heap in use %d KiB (baseline %d KiB, %d KiB with %d pending), stats %+v",
		runtime.NumGoroutine(), baseG, after>>10, baseHeap>>10, peakHeap>>10, silentN, st)
	assert.Equal(t, uint64(goodN+1), st.Accepted)
	assert.Zero(t, st.Pending)
}
