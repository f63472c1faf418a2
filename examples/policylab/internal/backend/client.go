package backend

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

	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
)

// Caller is who opens connections: an external client or a pod.
type Caller struct {
	Name string
	NS   netns.NS
	Addr topo.Dual
}

// Caller returns the pod as a caller.
func (p *Pod) Caller() Caller { return Caller{p.Name, p.NS, p.Addr} }

// Failure kinds of an Attempt.
const (
	FailNone        = ""
	FailTimeout     = "timeout"     // no answer: the SYN was dropped
	FailRefused     = "refused"     // RST to the SYN
	FailClosed      = "closed"      // accepted, then closed without an answer (a refusing PROXY listener)
	FailUnreachable = "unreachable" // ICMP unreachable
	FailOther       = "error"
)

// Attempt is one connection: who made it, from which address, what the
// backend observed, or how it failed.
type Attempt struct {
	From   string
	Worker int            // the load worker that made it (Load), else 0
	Client netip.AddrPort // the Caller's own socket address: the truth to compare with
	Start  time.Time
	Obs    *Observation
	Fail   string
	Err    error
}

// Timeouts bound one Attempt.
type Timeouts struct{ Connect, IO time.Duration }

// A dropped SYN is retransmitted after 1 s, so a connect timeout just under
// that still means "the first SYN got no answer", while a process starved
// by a busy machine for a few hundred milliseconds does not mistake a late
// wake-up for a drop.
var (
	// NormalTimeouts bound the connections of a scenario row.
	NormalTimeouts = Timeouts{Connect: 2 * time.Second, IO: 3 * time.Second}
	ProbeTimeouts  = Timeouts{Connect: 900 * time.Millisecond, IO: 2 * time.Second} // for drops and windows
)

// Try opens one connection from c to target, sends a tag, and reads the
// backend's Observation.
func Try(ctx context.Context, c Caller, target netip.AddrPort, to Timeouts, tag string) Attempt {
	a := Attempt{From: c.Name, Start: time.Now()}
	dctx, cancel := context.WithTimeout(ctx, to.Connect)
	conn, err := c.NS.Dialer()(dctx, "tcp", target.String())
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
	conn.SetDeadline(time.Now().Add(to.IO))
	if _, err := io.WriteString(conn, tag+"\n"); err != nil {
		a.Fail, a.Err = classify(err, false), err
		return a
	}
	line, err := bufio.NewReader(io.LimitReader(conn, 4096)).ReadBytes('\n')
	if err != nil {
		a.Fail, a.Err = classify(err, false), err
		return a
	}
	var o Observation
	if err := json.Unmarshal(line, &o); err != nil {
		a.Fail, a.Err = FailOther, err
		return a
	}
	a.Obs = &o
	return a
}

func classify(err error, dialing bool) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return FailUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		if dialing {
			return FailTimeout
		}
		return FailOther
	case !dialing && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		return FailClosed
	}
	return FailOther
}

// Fire makes n attempts from the callers in turn, with a few workers, and
// returns them in order; fewer when ctx ends.
func Fire(ctx context.Context, from []Caller, target netip.AddrPort, n int, to Timeouts) []Attempt {
	out := make([]Attempt, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				out[i] = Try(ctx, from[i%len(from)], target, to, fmt.Sprintf("a%d", i))
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

// Load keeps workers making attempts until stop is closed, for the window
// measurements: each worker starts an Attempt every period, or when its
// previous one ended if that took longer, so the attempts sample time evenly
// without flooding a shared machine.
func Load(ctx context.Context, from []Caller, target netip.AddrPort, workers int, period time.Duration, to Timeouts, stop <-chan struct{}) <-chan []Attempt {
	res := make(chan []Attempt, 1)
	go func() {
		var mu sync.Mutex
		var all []Attempt
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				tick := time.NewTicker(period)
				defer tick.Stop()
				for i := 0; ; i++ {
					a := Try(ctx, from[(w+i)%len(from)], target, to, fmt.Sprintf("w%d-%d", w, i))
					a.Worker = w
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
