package lb

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
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
