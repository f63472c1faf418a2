package ingest

import (
	"fmt"
	"testing"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type nopHandler struct{}

func (nopHandler) Connect(*Client, *mqttwire.Connect) (byte, string) { return 0, "" }
func (nopHandler) Established(*Client)                               {}
func (nopHandler) Publish(*Client, *mqttwire.Publish) (byte, string, bool) {
	return 0, "", false
}
func (nopHandler) Disconnected(*Client, error) {}

// TestPublishPathAllocs: handling PUBLISH packets already read, MQTT 3.1.1
// and MQTT 5 with a topic alias, allocates nothing in the server (the
// handler's own work aside).
func TestPublishPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector: sync.Pool drops items (the run without -race checks them)")
	}
	s, err := New(Config{Handler: nopHandler{}, TopicAliasMaximum: 16})
	require.NoError(t, err)
	defer s.Close()
	for _, v := range []byte{4, 5} {
		c := &Client{srv: s, Version: v, fd: -1, aliasMax: 16}
		pk := publishPackets(v)
		c.buf = make([]byte, len(pk))
		allocs := testing.AllocsPerRun(100, func() {
			c.start, c.end = 0, copy(c.buf, pk)
			require.True(t, c.handle(), "the connection ended")
		})
		assert.Zero(t, allocs, "MQTT %d: allocations for 32 PUBLISH packets", v)
	}
}

// publishPackets is 32 QoS 1 PUBLISH packets of MQTT version v, packet ids
// 1 to 32; MQTT 5 ones have properties (topic alias 1 on the first, then
// the alias alone with an empty topic).
func publishPackets(v byte) []byte {
	var pk []byte
	for i := range 32 {
		topic, props := "telemetry/dev1", []byte(nil)
		if v == 5 {
			props = []byte{3, 0x23, 0, 1}
			if i > 0 {
				topic = ""
			}
		}
		body := append([]byte{0, byte(len(topic))}, topic...)
		body = append(body, 0, byte(i+1))
		body = append(body, props...)
		body = append(body, `{"device":"dev1","seq":1}`...)
		pk = append(pk, mqttwire.PUBLISH<<4|1<<1, byte(len(body)))
		pk = append(pk, body...)
	}
	return pk
}

// BenchmarkHandlePublish is the server's part of a PUBLISH already read:
// splitting, parsing, the topic alias and the handler call (a handler that
// does nothing), per packet, without the network.
func BenchmarkHandlePublish(b *testing.B) {
	s, err := New(Config{Handler: nopHandler{}, TopicAliasMaximum: 16})
	require.NoError(b, err)
	defer s.Close()
	for _, v := range []byte{4, 5} {
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			c := &Client{srv: s, Version: v, fd: -1, aliasMax: 16}
			pk := publishPackets(v)
			c.buf = make([]byte, len(pk))
			b.ReportAllocs()
			for b.Loop() {
				c.start, c.end = 0, copy(c.buf, pk)
				if !c.handle() {
					b.Fatal("the connection ended")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(32*b.N), "ns/packet")
		})
	}
}
