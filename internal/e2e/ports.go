package e2e

import (
	"testing"

	"github.com/sourceip/sourceip/internal/freeport"
)

// FreePorts returns n distinct loopback TCP ports for a program under test
// to bind, picked by freeport.Loopback below the kernel's ephemeral port
// range, so that no port-0 listener or outgoing connection of a test
// running beside it takes one before the program binds it. It fails the
// test when no port can be had.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports, err := freeport.Loopback(n)
	if err != nil {
		tb.Fatal(err)
	}
	return ports
}
