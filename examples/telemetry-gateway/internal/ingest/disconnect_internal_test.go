package ingest

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// pipeClient is an MQTT 5 client of s on one end of a net.Pipe, and a
// channel that gets every write the server makes to it, in order, and is
// closed when the server closes the connection.
func pipeClient(t *testing.T, s *Server) (*Client, <-chan []byte) {
	t.Helper()
	cli, srv := net.Pipe()
	t.Cleanup(func() { cli.Close() })
	c := &Client{srv: s, Version: 5, Conn: srv, fd: -1}
	got := make(chan []byte, 16)
	go func() {
		defer close(got)
		for {
			b := make([]byte, 256)
			n, err := cli.Read(b)
			if err != nil {
				return
			}
			got <- b[:n]
		}
	}()
	return c, got
}

// rest returns everything got still brings until it is closed.
func rest(got <-chan []byte) [][]byte {
	var out [][]byte
	for b := range got {
		out = append(out, b)
	}
	return out
}

// MQTT 5 [MQTT-3.14.4-1]: after its DISCONNECT the server sends nothing
// more, although another goroutine (the one writing acknowledgements, say)
// writes between the DISCONNECT and the close. The test holds the client's
// state lock, so that Disconnect waits in Close after its write, as a
// goroutine the scheduler leaves there would.
func TestNothingAfterServerDisconnect(t *testing.T) {
	s, err := New(Config{Handler: nopHandler{}})
	require.NoError(t, err)
	defer s.Close()
	c, got := pipeClient(t, s)
	c.acked = true
	c.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Disconnect(mqttwire.AdministrativeAction, "")
	}()
	assert.Equal(t, []byte{mqttwire.DISCONNECT << 4, 1, mqttwire.AdministrativeAction}, <-got)
	assert.ErrorIs(t, c.Write([]byte{mqttwire.PINGRESP << 4, 0}), ErrClosed, "a write after the DISCONNECT")
	c.mu.Unlock()
	<-done
	assert.Empty(t, rest(got), "nothing after the DISCONNECT")
	assert.True(t, c.Closed())
}

// MQTT 5 [MQTT-3.2.0-1]: the first packet the server sends is CONNACK. A
// client is one of the server's from before its CONNACK is written, so a
// takeover by a newer connection with its client id, or Server.Close, may
// end it then: it is closed without a DISCONNECT (and its CONNACK is not
// written after the close).
func TestNoDisconnectBeforeConnack(t *testing.T) {
	s, err := New(Config{Handler: nopHandler{}})
	require.NoError(t, err)
	defer s.Close()
	c, got := pipeClient(t, s)
	c.Disconnect(mqttwire.SessionTakenOver, "")
	assert.ErrorIs(t, c.writeConnack(mqttwire.AppendConnack(nil, true, false, 0, nil)), ErrClosed)
	assert.Empty(t, rest(got), "nothing before the CONNACK, nor the CONNACK after the close")
	assert.True(t, c.Closed())
}
