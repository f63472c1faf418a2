package lb

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

func TestForwardsWithHeaderFromSource(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.200")})})
		if err != nil {
			t.Fatal(err)
		}
		defer pl.Close()
		l, err := Start(Config{Listen: "127.0.0.1:0", Backend: inner.Addr().String(), Source: netip.MustParseAddr("127.0.0.200"), Version: v})
		if err != nil {
			t.Fatal(err)
		}
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
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ping"))
		buf := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q %v", buf, err)
		}
		f := <-facts
		if f.Version != v || f.Peer.Addr() != netip.MustParseAddr("127.0.0.200") ||
			f.Source != netip.MustParseAddrPort(c.LocalAddr().String()) || f.Destination.String() != l.Addr() {
			t.Errorf("v%d facts %v", v, f)
		}
		// Restart: the connection is cut, and the same address accepts again.
		if err := l.Restart(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err == nil {
			t.Error("connection survived the restart")
		}
		c.Close()
		c2, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatalf("dial after restart: %v", err)
		}
		c2.Close()
	}
}
