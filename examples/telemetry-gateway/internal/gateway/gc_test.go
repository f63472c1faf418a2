package gateway

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// gcPercent returns the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestGCTuner: the target is the idle one while few readings arrive, Go's
// default as soon as a tick has busyPerTick of them, the idle one again
// after a quiet tick, and Go's default once the tuner is closed.
func TestGCTuner(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := newGCTuner(50)
	require.Equal(t, 50, gcPercent(), "idle at start")
	for range busyPerTick - 1 {
		g.reading()
	}
	require.Equal(t, 50, gcPercent(), "below the busy rate")
	g.reading()
	if gcPercent() != activePercent {
		// A tick ended the window between two readings: a busy tick again.
		for range busyPerTick {
			g.reading()
		}
	}
	require.Equal(t, activePercent, gcPercent(), "busy: raised at once")
	require.Eventually(t, func() bool { return gcPercent() == 50 }, 5*tick, tick/10, "lowered after a quiet tick")
	g.close()
	require.Equal(t, activePercent, gcPercent(), "closed")
	var none *gcTuner
	none.reading() // a gateway without IdleGCPercent
	none.close()
}
