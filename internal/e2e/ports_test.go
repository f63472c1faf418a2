package e2e

import (
	"fmt"
	"net"
	"testing"

	"github.com/sourceip/sourceip/internal/freeport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFreePorts: the ports are distinct, free once returned, and below the
// kernel's ephemeral range, where no port-0 listener or outgoing connection
// of another test can take one before the program under test binds it.
func TestFreePorts(t *testing.T) {
	low := freeport.EphemeralLow()
	if low-freeport.From < 1000 {
		Unavailable(t, fmt.Sprintf("no room below the ephemeral port range (it starts at %d)", low))
	}
	ports := FreePorts(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		assert.True(t, p >= freeport.From && p < low, "port %d outside [%d, %d)", p, freeport.From, low)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err, "port %d not free", p)
		l.Close()
	}
}
