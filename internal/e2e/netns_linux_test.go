package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNetns: two namespaces joined by a veth pair carry a TCP connection
// between their link-local addresses, and are gone when the test that made
// them ends.
func TestNetns(t *testing.T) {
	names := []string{fmt.Sprintf("sipe2e%d-a", os.Getpid()), fmt.Sprintf("sipe2e%d-b", os.Getpid())}
	t.Run("run", func(t *testing.T) {
		a, b := NewNetns(t, names[0]), NewNetns(t, names[1])
		a.Veth(t, "ea0", b, "eb0")
		a.AddAddr(t, "fe80::a/64", "ea0")
		b.AddAddr(t, "fe80::b/64", "eb0")
		var ln net.Listener
		require.NoError(t, b.Do(func() (err error) {
			ln, err = net.Listen("tcp6", "[::]:0")
			return err
		}))
		defer ln.Close()
		var c net.Conn
		require.NoError(t, a.Do(func() (err error) {
			c, err = net.Dial("tcp6", net.JoinHostPort("fe80::b%ea0", fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)))
			return err
		}))
		defer c.Close()
		s, err := ln.Accept()
		require.NoError(t, err)
		defer s.Close()
		peer := s.RemoteAddr().(*net.TCPAddr)
		assert.Equal(t, "fe80::a", peer.IP.String(), "the only address of a's end (addrgenmode none)")
		assert.NotEmpty(t, peer.Zone, "a link-local peer has a zone")
	})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err == nil {
		for _, n := range names {
			assert.NotContains(t, strings.Fields(string(out)), n, "namespace left behind")
		}
	}
}
