//go:build !unix

package proxyproto

import "net"

// tryRead never reads on this platform: every header is read by a goroutine
// under the deadline.
func tryRead(nc net.Conn, buf []byte) (n int, err error, ok bool) { return 0, nil, false }
