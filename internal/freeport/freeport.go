// Package freeport picks loopback TCP ports for a program to bind, away
// from the ports the kernel hands to port-0 listeners and outgoing
// connections. Tests reach it through e2e.FreePorts; programs such as the
// telemetry gateway's benchmark call it directly.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
)

// From is the lowest port Loopback picks: below it are the ports services
// are most often configured on.
const From = 10000

// Loopback returns n distinct loopback TCP ports that were free a moment
// ago (all are held open until each is chosen), for a program to bind. They
// are picked by Listen on 127.0.0.1, so that between being chosen here and
// bound by the program none of them is handed to another socket; only
// another caller that picked the same port among thousands could take it.
// It is safe for concurrent use.
func Loopback(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := Listen("127.0.0.1")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Listen listens for TCP on host at a port picked at random below the
// kernel's ephemeral port range (net.ipv4.ip_local_port_range), from which
// every port-0 listener and every outgoing connection on the machine takes
// its port: a port picked here, once closed, is not handed to another socket
// before its owner binds it again. Where that range cannot be read or leaves
// no room above From, or every try finds the port taken, the kernel picks
// it (port 0). It is safe for concurrent use.
func Listen(host string) (net.Listener, error) {
	lo, hi := From, EphemeralLow()
	if hi-lo >= 1000 {
		for range 100 {
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(lo+rand.IntN(hi-lo))))
			if err == nil {
				return l, nil
			}
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	return l, nil
}

// EphemeralLow returns the first port of the kernel's ephemeral range, or 0
// when it cannot be read.
func EphemeralLow() int {
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
