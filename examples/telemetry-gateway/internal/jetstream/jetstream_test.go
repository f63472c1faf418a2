package jetstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/natstest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMsgID(t *testing.T) {
	assert.Equal(t, "d7/123", MsgID("d7", 123, ""))
	withCert := MsgID("d7", 123, "CN=d7")
	assert.Regexp(t, `^d7/123/[0-9a-f]{32}$`, withCert)
	assert.NotEqual(t, withCert, MsgID("d7", 123, "CN=d7,O=other"), "another certificate is another sender")
}

// TestSinkOnR3Stream: records go to an R3 stream on a real three-node
// cluster with their provenance; a redelivery (same sender, device and seq)
// is answered as a duplicate and stored once; a reading forged under a
// certificate-bound device's name is another sender and stored beside it.
func TestSinkOnR3Stream(t *testing.T) {
	s, c, ctx := openSink(t, 3)

	rec := func(dev string, seq uint64, subject string) *sink.Record {
		return &sink.Record{ID: sink.Key(dev, seq), Device: dev, Seq: seq, Protocol: "mqtt", Payload: json.RawMessage(`{"device":"` + dev + `"}`),
			Provenance: sink.Provenance{Client: "198.51.100.7", Source: "proxy-protocol", Via: "127.0.0.200", Peer: "127.0.0.200:4000",
				ProxySource: "198.51.100.7:5000", TLSSubject: subject, ClientID: dev, Conn: 3}}
	}
	type answer struct {
		res sink.Result
		err error
	}
	submit := func(r *sink.Record) answer {
		ch := make(chan answer, 1)
		require.NoError(t, s.Submit(ctx, r, func(res sink.Result, err error) { ch <- answer{res, err} }))
		select {
		case a := <-ch:
			return a
		case <-ctx.Done():
			require.FailNow(t, "no answer")
			return answer{}
		}
	}
	assert.Equal(t, answer{}, submit(rec("d1", 1, "")))
	assert.Equal(t, answer{res: sink.Result{Duplicate: true}}, submit(rec("d1", 1, "")), "redelivery")
	assert.Equal(t, answer{}, submit(rec("d1", 2, "")))
	assert.Equal(t, answer{}, submit(rec("d3", 1, "CN=d3")))
	assert.Equal(t, answer{}, submit(rec("d3", 1, "")), "forged: another sender")
	require.NoError(t, s.Submit(ctx, rec("d4", 1, ""), nil), "QoS 0: nobody waits")
	require.NoError(t, s.Healthy())
	require.NoError(t, s.Close())
	st := s.Stats()
	assert.EqualValues(t, 5, st.Records)
	assert.EqualValues(t, 1, st.Duplicates)

	stream := readStream(ctx, t, c, "TELEMETRY")
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, info.Config.Replicas)
	assert.EqualValues(t, 5, info.State.Msgs)
	m, err := stream.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "telemetry.d1", m.Subject)
	assert.Equal(t, "d1/1", m.Header.Get(natsjs.MsgIDHeader))
	var got sink.Record
	require.NoError(t, json.Unmarshal(m.Data, &got))
	assert.Equal(t, *rec("d1", 1, ""), got, "the record with its provenance")

	assert.ErrorIs(t, s.Submit(ctx, rec("d1", 3, ""), nil), ErrClosed)
}

// TestDotsInTheDeviceName: a device name may start or end with '.' or hold
// "..", which made a subject with an empty token: NATS stored nothing, and
// every reading of such a device failed with "no response from stream" (its
// device disconnected as by a store failure, again at each redelivery).
// Each empty token is published as "%"; other names keep their subject.
func TestDotsInTheDeviceName(t *testing.T) {
	s, c, ctx := openSink(t, 1)
	stream := readStream(ctx, t, c, "TELEMETRY")
	for dev, subject := range map[string]string{
		"d7": "telemetry.d7", "a.b": "telemetry.a.b", ".a": "telemetry.%.a", "a.": "telemetry.a.%",
		"a..b": "telemetry.a.%.b", ".": "telemetry.%.%",
	} {
		answered := make(chan error, 1)
		r := &sink.Record{ID: sink.Key(dev, 1), Device: dev, Seq: 1, Protocol: "http", Payload: json.RawMessage(`{}`)}
		require.NoError(t, s.Submit(ctx, r, func(_ sink.Result, err error) { answered <- err }))
		require.NoError(t, <-answered, "device %q", dev)
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		require.NoError(t, err, "device %q", dev)
		assert.Equal(t, sink.Key(dev, 1), m.Header.Get(natsjs.MsgIDHeader))
	}
}

// TestRecordOverMaxPayloadIsTooLarge: a record longer than the servers'
// max_payload (1 MiB by default; the gateway takes readings up to 256 MiB)
// is refused with sink.ErrTooLarge, which the gateway answers as a refused
// reading; it was a plain publish error, which the gateway took for a failed
// store: the device was disconnected and sent the reading again for ever.
func TestRecordOverMaxPayloadIsTooLarge(t *testing.T) {
	s, _, ctx := openSink(t, 1)
	big := &sink.Record{ID: "d1/1", Device: "d1", Seq: 1, Protocol: "http",
		Payload: json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`)}
	err := s.Submit(ctx, big, func(sink.Result, error) { t.Error("answered a refused record") })
	require.ErrorIs(t, err, sink.ErrTooLarge)
	require.NoError(t, s.Healthy())
}

// openSink starts a cluster of n nodes and opens a Sink on it that creates
// the stream TELEMETRY with n replicas; the end of t closes it.
func openSink(t *testing.T, n int) (*Sink, *natstest.Cluster, context.Context) {
	t.Helper()
	c := natstest.StartCluster(t, n)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := Open(ctx, Config{URL: c.URL(), Stream: "TELEMETRY", Subject: "telemetry", Replicas: n})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, c, ctx
}

// readStream returns the stream name as a reader on its own connection to
// c sees it.
func readStream(ctx context.Context, t *testing.T, c *natstest.Cluster, name string) natsjs.Stream {
	t.Helper()
	nc, err := nats.Connect(c.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, name)
	require.NoError(t, err)
	return stream
}

// TestOpenRefuses: a missing stream (unless told to create it), a stream
// that does not capture the readings' subjects (they would be stored
// elsewhere, or nowhere, and acknowledged anyway), and one whose duplicate
// window ends before a device can send a reading again.
func TestOpenRefuses(t *testing.T) {
	c := natstest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, Config{URL: c.URL(), Stream: "MISSING", Subject: "telemetry"})
	assert.ErrorIs(t, err, natsjs.ErrStreamNotFound, "no stream and no Replicas to create it")

	other, err := Open(ctx, Config{URL: c.URL(), Stream: "OTHER", Subject: "other", Replicas: 1})
	require.NoError(t, err)
	defer other.Close()
	_, err = Open(ctx, Config{URL: c.URL(), Stream: "OTHER", Subject: "telemetry"})
	assert.ErrorIs(t, err, ErrWrongStream)

	// A duplicate window no longer than the acknowledgement timeout: a
	// publish that timed out but was stored is stored again when its device,
	// disconnected for the timeout, sends it again (the window has passed).
	short, err := Open(ctx, Config{URL: c.URL(), Stream: "SHORT", Subject: "short", Replicas: 1, Duplicates: time.Second, AckTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	defer short.Close()
	_, err = Open(ctx, Config{URL: c.URL(), Stream: "SHORT", Subject: "short", AckTimeout: 5 * time.Second})
	assert.ErrorIs(t, err, ErrShortWindow)
}
