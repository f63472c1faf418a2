package gateway

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// gcTuner runs the collector at Config.IdleGCPercent while the gateway
// takes few readings and at Go's default of 100 while many flow.
//
// An idle device costs its TLS state and a few small objects, nearly all of
// the gateway's live heap when it holds many; the collector lets the heap
// (and RSS) grow to (1 + GOGC/100) times what is live before it runs, so a
// lower GOGC keeps idle devices cheaper. What a lower GOGC costs is the
// collector's CPU, which grows with what is allocated, that is with readings
// per second, not with the devices held: at a few hundred readings a second
// it is nothing; at a hundred thousand it was about 15% more CPU per reading
// at GOGC 50 (README, "Memory per device"); with no readings, a storm of
// handshakes pays for it too (at 25, about a quarter more CPU per
// connection). So the target is raised as soon
// as busyPerTick readings arrive within a tick (one atomic add per reading),
// and lowered after a tick with fewer.
type gcTuner struct {
	idle   int
	low    atomic.Bool
	window atomic.Int64 // readings in this tick
	stop   chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex // orders SetGCPercent calls
}

const (
	tick          = 500 * time.Millisecond
	busyPerTick   = 500 // 1,000 readings a second
	activePercent = 100
)

func newGCTuner(idle int) *gcTuner {
	t := &gcTuner{idle: idle, stop: make(chan struct{})}
	t.lower()
	t.done.Add(1)
	go t.run()
	return t
}

// reading counts a reading, raising the target when the tick has been busy.
func (t *gcTuner) reading() {
	if t == nil {
		return
	}
	if t.window.Add(1) >= busyPerTick && t.low.Load() {
		t.mu.Lock()
		if t.low.Load() {
			debug.SetGCPercent(activePercent)
			t.low.Store(false)
		}
		t.mu.Unlock()
	}
}

func (t *gcTuner) lower() {
	t.mu.Lock()
	if !t.low.Load() {
		debug.SetGCPercent(t.idle)
		t.low.Store(true)
	}
	t.mu.Unlock()
}

func (t *gcTuner) run() {
	defer t.done.Done()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			if t.window.Swap(0) < busyPerTick {
				t.lower()
			}
		}
	}
}

// close stops the tuner and leaves the target at Go's default.
func (t *gcTuner) close() {
	if t == nil {
		return
	}
	close(t.stop)
	t.done.Wait()
	t.mu.Lock()
	debug.SetGCPercent(activePercent)
	t.low.Store(false)
	t.mu.Unlock()
}
