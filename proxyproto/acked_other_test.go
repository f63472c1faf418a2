//go:build !linux

package proxyproto

import (
	"net"
	"testing"
	"time"
)

// waitAcked gives the bytes written on c time to reach the peer; only Linux
// can tell when they have.
func waitAcked(t testing.TB, c net.Conn) { time.Sleep(50 * time.Millisecond) }
