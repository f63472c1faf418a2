package e2e

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartHAProxy: the ports StartHAProxy returns are distinct and
// listening when it returns (each frontend forwards with a PROXY v2 header
// at the first try), and haproxy is gone when the test that started it ends.
func TestStartHAProxy(t *testing.T) {
	app, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer app.Close()
	var ports []int
	t.Run("run", func(t *testing.T) {
		ports = StartHAProxy(t, 2, func(p []int) string {
			return fmt.Sprintf(`defaults
    mode tcp
    timeout connect 2s
    timeout client 5s
    timeout server 5s
listen a
    bind 127.0.0.1:%[1]d
    server app %[3]s send-proxy-v2
listen b
    bind 127.0.0.1:%[2]d
    server app %[3]s send-proxy-v2
`, p[0], p[1], app.Addr())
		})
		require.Len(t, ports, 2)
		require.NotEqual(t, ports[0], ports[1])
		for _, port := range ports {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			require.NoError(t, err, "frontend not listening when StartHAProxy returned")
			s, err := app.Accept()
			require.NoError(t, err)
			s.SetDeadline(time.Now().Add(5 * time.Second))
			sig := make([]byte, 12)
			_, err = io.ReadFull(s, sig)
			require.NoError(t, err)
			assert.Equal(t, "\r\n\r\n\x00\r\nQUIT\n", string(sig), "PROXY v2 signature")
			s.Close()
			c.Close()
		}
	})
	for _, port := range ports {
		_, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		assert.Error(t, err, "haproxy still listens on %d after its test ended", port)
	}
}
