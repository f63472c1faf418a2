package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// caller is who opens connections: an external client or a pod.
type caller struct {
	name string
	ns   netns
	addr dual
}

func (h *host) caller() caller { return caller{h.name, h.ns, h.addr} }
func (p *pod) caller() caller  { return caller{p.name, p.ns, p.addr} }

// Failure kinds of an attempt.
const (
	failNone        = ""
	failTimeout     = "timeout"     // no answer: the SYN was dropped
	failRefused     = "refused"     // RST to the SYN
	failClosed      = "closed"      // accepted, then closed without an answer (a refusing PROXY listener)
	failUnreachable = "unreachable" // ICMP unreachable
	failOther       = "error"
)

// attempt is one connection: who made it, from which address, what the
// backend observed, or how it failed.
type attempt struct {
	From   string
	Client netip.AddrPort // the caller's own socket address: the truth to compare with
	Start  time.Time
	Obs    *observation
	Fail   string
	Err    error
}

// timeouts bound one attempt.
type timeouts struct{ connect, io time.Duration }

// A dropped SYN is retransmitted after 1 s, so a connect timeout just under
// that still means "the first SYN got no answer", while a process starved
// by a busy machine for a few hundred milliseconds does not mistake a late
// wake-up for a drop.
var (
	normalTimeouts = timeouts{connect: 2 * time.Second, io: 3 * time.Second}
	probeTimeouts  = timeouts{connect: 900 * time.Millisecond, io: 2 * time.Second} // for drops and windows
)

// try opens one connection from c to target, sends a tag, and reads the
// backend's observation.
func try(ctx context.Context, c caller, target netip.AddrPort, to timeouts, tag string) attempt {
	a := attempt{From: c.name, Start: time.Now()}
	dctx, cancel := context.WithTimeout(ctx, to.connect)
	conn, err := c.ns.dialer()(dctx, "tcp", target.String())
	cancel()
	if err != nil {
		a.Fail, a.Err = classify(err, true), err
		return a
	}
	defer conn.Close()
	if ta, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		a.Client = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	conn.SetDeadline(time.Now().Add(to.io))
	if _, err := io.WriteString(conn, tag+"\n"); err != nil {
		a.Fail, a.Err = classify(err, false), err
		return a
	}
	line, err := bufio.NewReader(io.LimitReader(conn, 4096)).ReadBytes('\n')
	if err != nil {
		a.Fail, a.Err = classify(err, false), err
		return a
	}
	var o observation
	if err := json.Unmarshal(line, &o); err != nil {
		a.Fail, a.Err = failOther, err
		return a
	}
	a.Obs = &o
	return a
}

func classify(err error, dialing bool) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return failRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return failUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		if dialing {
			return failTimeout
		}
		return failOther
	case !dialing && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		return failClosed
	}
	return failOther
}

// fire makes n attempts from the callers in turn, with a few workers, and
// returns them in order; fewer when ctx ends.
func fire(ctx context.Context, from []caller, target netip.AddrPort, n int, to timeouts) []attempt {
	out := make([]attempt, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				out[i] = try(ctx, from[i%len(from)], target, to, fmt.Sprintf("a%d", i))
			}
		})
	}
	sent := 0
	for ; sent < n && ctx.Err() == nil; sent++ {
		next <- sent
	}
	close(next)
	wg.Wait()
	return out[:sent]
}

// load keeps workers making attempts until stop is closed, for the window
// measurements: each worker starts an attempt every period, or when its
// previous one ended if that took longer, so the attempts sample time evenly
// without flooding a shared machine.
func load(ctx context.Context, from []caller, target netip.AddrPort, workers int, period time.Duration, to timeouts, stop <-chan struct{}) <-chan []attempt {
	res := make(chan []attempt, 1)
	go func() {
		var mu sync.Mutex
		var all []attempt
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				tick := time.NewTicker(period)
				defer tick.Stop()
				for i := 0; ; i++ {
					a := try(ctx, from[(w+i)%len(from)], target, to, fmt.Sprintf("w%d-%d", w, i))
					mu.Lock()
					all = append(all, a)
					mu.Unlock()
					select {
					case <-stop:
						return
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
			})
		}
		wg.Wait()
		res <- all
	}()
	return res
}
