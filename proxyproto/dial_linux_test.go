package proxyproto

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
)

// DialContext to a link-local IPv6 address fills the header's addresses
// from the connection's, which carry the interface as a zone that no PROXY
// header can carry: it drops the zone, as ForwardHeader does. It refused
// to write the header (a zone is an error for addresses the caller gives).
// The link-local address is on the loopback of a namespace of the test's own.
func TestDialContextLinkLocal(t *testing.T) {
	ns := e2e.NewNetns(t, fmt.Sprintf("pprevll%d", os.Getpid()))
	ns.AddAddr(t, "fe80::1/64", "lo")
	var ln net.Listener
	require.NoError(t, ns.Do(func() (err error) {
		ln, err = net.Listen("tcp6", "[fe80::1%lo]:0")
		return err
	}))
	l, err := NewListener(ln, Config{Trust: trustOf("fe80::1")})
	require.NoError(t, err)
	defer l.Close()
	var c net.Conn
	require.NoError(t, ns.Do(func() (err error) {
		c, err = DialContext(context.Background(), nil, "tcp6", fmt.Sprintf("[fe80::1%%lo]:%d", ln.Addr().(*net.TCPAddr).Port), Header{Version: 2, Command: CommandProxy})
		return err
	}))
	defer c.Close()
	sc, err := l.Accept()
	require.NoError(t, err)
	defer sc.Close()
	f := sc.(*Conn).Facts()
	local, remote := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
	assert.Equal(t, netip.AddrPortFrom(local.Addr().WithZone(""), local.Port()), f.Source)
	assert.Equal(t, netip.AddrPortFrom(remote.Addr().WithZone(""), remote.Port()), f.Destination)
}
