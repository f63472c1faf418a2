package lb

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/internal/freeport"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestForwardsWithHeaderFromSource(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.200")})})
		require.NoError(t, err)
		defer pl.Close()
		l, err := Start(Config{Listen: "127.0.0.1:0", Backend: inner.Addr().String(), Source: netip.MustParseAddr("127.0.0.200"), Version: v})
		require.NoError(t, err)
		defer l.Close()
		facts := make(chan proxyproto.Facts, 1)
		go func() {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			facts <- c.(*proxyproto.Conn).Facts()
			io.Copy(c, c)
		}()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.11")}}
		c, err := d.Dial("tcp", l.Addr())
		require.NoError(t, err)
		c.Write([]byte("ping"))
		buf := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err, "echo")
		require.Equal(t, "ping", string(buf), "echo")
		f := <-facts
		assert.Equal(t, v, f.Version, "v%d facts %v", v, f)
		assert.Equal(t, netip.MustParseAddr("127.0.0.200"), f.Peer.Addr(), "v%d facts %v", v, f)
		assert.Equal(t, netip.MustParseAddrPort(c.LocalAddr().String()), f.Source, "v%d facts %v", v, f)
		assert.Equal(t, l.Addr(), f.Destination.String(), "v%d facts %v", v, f)
		// Restart: the connection is cut, and the same address accepts again.
		require.NoError(t, l.Restart())
		_, err = c.Read(buf)
		assert.Error(t, err, "connection survived the restart")
		c.Close()
		c2, err := net.Dial("tcp", l.Addr())
		require.NoError(t, err, "dial after restart")
		c2.Close()
	}
}

// TestAutomaticPortBelowEphemeralRange: a front port of 0 is picked below the
// kernel's ephemeral range, so that in the window Restart has it closed no
// port-0 listener or outgoing connection (a device reconnecting, another
// test) can be given it, which failed TestNoLossAcrossLoadBalancerRestart's
// restart with "address already in use".
func TestAutomaticPortBelowEphemeralRange(t *testing.T) {
	low := freeport.EphemeralLow()
	if low-freeport.From < 1000 {
		e2e.Unavailable(t, fmt.Sprintf("no room below the ephemeral port range (it starts at %d)", low))
	}
	l, err := Start(Config{Listen: "127.0.0.1:0", Backend: "127.0.0.1:1"})
	require.NoError(t, err)
	defer l.Close()
	port := netip.MustParseAddrPort(l.Addr()).Port()
	assert.True(t, int(port) >= freeport.From && int(port) < low, "port %d outside [%d, %d)", port, freeport.From, low)
	require.NoError(t, l.Restart())
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", port), l.Addr(), "address after restart")
}

// TestRestartFailsWhenAddressTaken: when another socket took the front
// address while Restart had it closed, Restart says so instead of leaving a
// load balancer that accepts nothing.
func TestRestartFailsWhenAddressTaken(t *testing.T) {
	l, err := Start(Config{Listen: "127.0.0.1:0", Backend: "127.0.0.1:1"})
	require.NoError(t, err)
	defer l.Close()
	l.stop()
	stranger, err := net.Listen("tcp", l.Addr())
	require.NoError(t, err)
	defer stranger.Close()
	err = l.Restart()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lb: listen again on "+l.Addr())
}
