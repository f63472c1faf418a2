//go:build unix

package proxyproto

import (
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// dialFrom connects from the loopback address src and writes first.
func dialFrom(src, addr string, first []byte) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(first); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestUntrustedFloodDoesNotStarveTrusted pins the attack-trial finding
// "untrusted peers can starve the PROXY listener" (issue 17): 4,500
// connections from untrusted peers, each sending a header one byte every
// 300 ms, held every pending slot, and the trusted load balancer's
// connections waited in the kernel's backlog behind them (its clients went
// from 2–8 ms to a median of 3.2 s). Here, at a bounded scale on loopback,
// untrusted sources start slow headers until their budget is full and more
// keep coming; every connection of the trusted load balancer, a distinct
// loopback address, must still be accepted and served while the untrusted
// budget stays full, and the counters must say what was shed and why.
func TestUntrustedFloodDoesNotStarveTrusted(t *testing.T) {
	const (
		lb        = "127.0.0.2" // the trusted load balancer
		budget    = 128         // MaxPendingUntrusted
		perSource = 4           // MaxPendingPerSource
		crowded   = budget / perSource
		late      = 300 // untrusted sources arriving once the budget is full
		trustedN  = 100
	)
	raiseFDLimit(t, 2*(crowded*(perSource+1)+late+trustedN)+256)

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l, err := NewListener(inner, Config{
		Trust:               trustOf(lb),
		MaxPendingUntrusted: budget,
		MaxPendingPerSource: perSource,
		// No slow header may time out and free its slot during the test:
		// the budget stays full from the moment it fills.
		ReadHeaderTimeout: time.Hour,
	})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go serveEach(l, func(c net.Conn) {
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err == nil {
			c.Write([]byte("pong"))
		}
	})
	addr := l.Addr().String()

	// The untrusted connections, and how each ended on the client's side.
	type attempt struct {
		c    net.Conn
		err  error
		shed bool // expected to be shed
	}
	var untrusted []attempt
	t.Cleanup(func() {
		for _, a := range untrusted {
			if a.c != nil {
				a.c.Close()
			}
		}
	})
	// The slow headers: the first bytes of a v1 or a v2 signature, the rest
	// never sent, as a header dripping one byte at a time looks between two
	// bytes.
	slow := [][]byte{[]byte("PRO"), []byte(sigV2[:4])}
	open := func(src string, shed bool) {
		t.Helper()
		c, err := dialFrom(src, addr, slow[len(untrusted)%2])
		if !shed {
			require.NoError(t, err, "untrusted dial from %s", src)
		}
		untrusted = append(untrusted, attempt{c, err, shed})
	}

	// Crowded sources fill the untrusted budget, perSource connections each;
	// each source's next connection is over its own bound.
	start := time.Now()
	for s := range crowded {
		for i := range perSource + 1 {
			open(fmt.Sprintf("127.1.%d.%d", s/250, s%250+1), i == perSource)
		}
	}
	waitFor(t, "the crowded sources to fill the untrusted budget", func() bool {
		st := l.Stats()
		return st.PendingUntrusted == budget && st.Shed[ShedSourceBudget] == crowded
	})
	filled := time.Since(start)

	// Late sources, one connection each, find the budget spent.
	for s := range late {
		open(fmt.Sprintf("127.2.%d.%d", s/250, s%250+1), true)
	}
	waitFor(t, "the late sources to be shed", func() bool { return l.Stats().Shed[ShedUntrustedBudget] == late })
	st := l.Stats()
	require.Equal(t, budget, st.PendingUntrusted, "untrusted budget before the trusted load balancer connects")

	// The trusted load balancer's clients, all at once.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		rtts  []time.Duration
		errs  []error
		trial = time.Now()
	)
	for i := range trustedN {
		wg.Go(func() {
			t0 := time.Now()
			b, _ := header(2, fmt.Sprintf("203.0.113.7:%d", 1000+i), "192.0.2.10:8883").Format()
			c, err := dialFrom(lb, addr, append(b, "ping"...))
			if err == nil {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				got := make([]byte, 4)
				if _, err = io.ReadFull(c, got); err == nil && string(got) != "pong" {
					err = fmt.Errorf("answer %q", got)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			rtts = append(rtts, time.Since(t0))
		})
	}
	wg.Wait()
	require.Empty(t, errs, "trusted load balancer's connections")

	st = l.Stats()
	assert.Equal(t, budget, st.Pending, "the trusted slots are freed")
	assert.Equal(t, uint64(trustedN), st.Accepted, "trusted connections accepted")
	assert.Equal(t, uint64(trustedN), st.Proxied)
	assert.Equal(t, budget, st.PendingUntrusted, "the untrusted budget stayed full while they were served")
	assert.Equal(t, [numShedReasons]uint64{ShedUntrustedBudget: late, ShedSourceBudget: crowded}, st.Shed)
	assert.Zero(t, st.TotalRejected(), "no slow header was judged, none timed out")

	// Every shed connection was reset on arrival, so fast on loopback that
	// the client may see it while connecting or writing.
	shedConns := 0
	for _, a := range untrusted {
		if !a.shed {
			continue
		}
		shedConns++
		if a.err != nil {
			assert.ErrorIs(t, a.err, syscall.ECONNRESET)
			continue
		}
		closedByServer(t, a.c)
	}
	assert.Equal(t, crowded+late, shedConns)

	slices.Sort(rtts)
	t.Logf("untrusted budget (%d) filled in %v by %d sources; %d shed over the per-source bound, %d late ones over the budget; "+
		"%d trusted connections served in %v, round trip median %v, slowest %v; stats %+v",
		budget, filled.Round(time.Millisecond), crowded, st.Shed[ShedSourceBudget], st.Shed[ShedUntrustedBudget],
		trustedN, time.Since(trial).Round(time.Millisecond), rtts[len(rtts)/2].Round(time.Microsecond),
		rtts[len(rtts)-1].Round(time.Microsecond), st)
}

// A trusted proxy that Upstreams does not allow to send a header (an HTTP
// proxy writing X-Forwarded-For beside a PROXY load balancer) drew on the
// untrusted budget and its per-source bound: with the untrusted budget full
// of an attacker's slow connections, every connection of that trusted proxy
// was shed on arrival. Its connections now take trusted slots, as the load
// balancer's do, while its header is still not believed.
func TestUntrustedFloodDoesNotStarveTrustedProxyOutsideUpstreams(t *testing.T) {
	const (
		lb       = "127.0.0.2" // the PROXY load balancer, in Upstreams
		httpProx = "127.0.0.3" // a trusted proxy outside Upstreams
		attacker = "127.0.0.9"
		budget   = 2 // MaxPendingUntrusted and MaxPendingPerSource
		proxyN   = 3 // more than either
	)
	s := newServer(t, Config{
		Trust:               trustOf(lb + "," + httpProx),
		Upstreams:           clientip.MustParsePrefixSet(lb),
		MaxPendingUntrusted: budget,
		MaxPendingPerSource: budget,
		ReadHeaderTimeout:   time.Hour,
	})
	for range budget {
		c, err := dialFrom(attacker, s.addr(), []byte("PRO")) // a header that never ends
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
	}
	waitFor(t, "the attacker to fill the untrusted budget", func() bool { return s.l.Stats().PendingUntrusted == budget })

	var conns []net.Conn
	for i := range proxyN {
		c, err := dialFrom(httpProx, s.addr(), []byte("GET / HTTP/1.1\r\n"))
		require.NoError(t, err, "trusted proxy's connection %d", i)
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	for range proxyN {
		f := s.accept(t).Facts()
		assert.Equal(t, Facts{Peer: f.Peer, Local: f.Local}, f, "a trusted proxy's connection without a header")
	}
	st := s.l.Stats()
	assert.Zero(t, st.TotalShed(), "shed: %+v", st)
	assert.Equal(t, budget, st.PendingUntrusted, "the attacker's connections still wait")

	// Its header is still refused, as an untrusted peer's (UntrustedClose).
	c, err := dialFrom(httpProx, s.addr(), []byte("PROXY TCP4 203.0.113.7 192.0.2.10 1 2\r\n"))
	require.NoError(t, err)
	defer c.Close()
	r := s.reject(t)
	assert.Equal(t, ReasonUntrusted, r.Reason)
	assert.False(t, r.Trusted)
	closedByServer(t, c)
}
