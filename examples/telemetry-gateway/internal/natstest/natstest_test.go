package natstest

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// greeter listens on a loopback port and writes greeting to every client.
func greeter(t *testing.T, greeting string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(greeting))
			c.Close()
		}
	}()
	return l.Addr().String()
}

// TestAnswersAsKnowsItsNode: Start's readiness check takes a node as ready
// only when its port greets with a NATS INFO line naming it, not when any
// stranger that took the port in the window between FreePorts and the
// node's bind (another test's nats-server, any listener) accepts the dial.
func TestAnswersAsKnowsItsNode(t *testing.T) {
	const info = `INFO {"server_id":"NABC","server_name":"n1-0a0b0c0d","version":"2.11.0","port":4222}` + "\r\n"
	assert.NoError(t, answersAs(greeter(t, info), "n1-0a0b0c0d"))
	for name, greeting := range map[string]string{
		"another node's name": info,
		"not NATS":            "220 smtp ready\r\n",
		"silent":              "",
		"bad INFO":            "INFO {\r\n",
	} {
		assert.Error(t, answersAs(greeter(t, greeting), "n1-11223344"), name)
	}
}
