package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// portsFrom is the lowest port FreePorts picks: below it are the ports
// services are most often configured on.
const portsFrom = 10000

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago (all are held open until each is chosen), for a program under test to
// bind. They are picked at random below the kernel's ephemeral port range
// (net.ipv4.ip_local_port_range), from which every port-0 listener and
// every outgoing connection on the machine takes its port, so that between
// being chosen here and bound by the program none of them is handed to
// another socket of a test running beside it; only another test that
// picked the same port among thousands could take it. Where that range
// cannot be read or leaves no room above portsFrom, the kernel picks them
// (port 0), as it does for a port taken on every try.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	lo, hi := portsFrom, ephemeralLow()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi-lo >= 1000 && tries < 100*n {
			addr = fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // in use: another
			}
			tb.Fatalf("free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
}
