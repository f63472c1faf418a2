package ingest

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paho3 "github.com/eclipse/paho.mqtt.golang/packets"
)

// A fixed header may announce up to the maximum packet size behind a few
// bytes: the read buffer grows with what the client has sent, at most
// doubling, not to the length announced (a slow-send trick: 512 bytes that
// announce 64 KiB would otherwise hold 64 KiB per connection until the keep
// alive runs out). The packet still arrives whole.
func TestReadBufferGrowsWithBytesSent(t *testing.T) {
	s, err := New(Config{Handler: nopHandler{}})
	require.NoError(t, err)
	defer s.Close()
	var w bytes.Buffer
	pub := paho3.NewControlPacket(paho3.Publish).(*paho3.PublishPacket)
	pub.TopicName, pub.Payload = "t", bytes.Repeat([]byte{'x'}, 60000)
	require.NoError(t, pub.Write(&w))
	pk := w.Bytes()

	cli, srv := net.Pipe()
	defer cli.Close()
	c := &Client{srv: s, Version: 4, Conn: srv, fd: -1}
	go func() {
		for i := 0; i < len(pk); i += 100 {
			if _, err := cli.Write(pk[i:min(i+100, len(pk))]); err != nil {
				return
			}
		}
	}()
	for c.end < len(pk) {
		require.NoError(t, c.fill())
		require.LessOrEqual(t, len(c.buf), max(largeBuffer, 2*(c.end-1)), "buffer of %d bytes after %d received", len(c.buf), c.end)
	}
	assert.Equal(t, pk, c.buf[:c.end])
	assert.True(t, c.handle(), "the whole PUBLISH is handled")
}
