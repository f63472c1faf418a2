package gateway

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttload"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reverseStore answers records in groups of n, newest first: the opposite of
// the order a device sent them in. It stores nothing.
type reverseStore struct {
	n         int
	mu        sync.Mutex
	q         []func(sink.Result, error)
	submitted atomic.Int64
}

func (r *reverseStore) Submit(_ context.Context, _ *sink.Record, done func(sink.Result, error)) error {
	r.submitted.Add(1)
	if done == nil {
		return nil
	}
	r.mu.Lock()
	r.q = append(r.q, done)
	var batch []func(sink.Result, error)
	if len(r.q) == r.n {
		batch, r.q = r.q, nil
	}
	r.mu.Unlock()
	go func() { // answered off the caller's goroutine, as a real store does
		for _, d := range slices.Backward(batch) {
			d(sink.Result{}, nil)
		}
	}()
	return nil
}
func (r *reverseStore) Healthy() error    { return nil }
func (r *reverseStore) Stats() sink.Stats { return sink.Stats{} }
func (r *reverseStore) Close() error      { return nil }

// handshake connects device id over MQTT version through the load balancer
// (PROXY v2 with source src) and returns its TLS connection and its MQTT
// client, closed when the test ends.
func handshake(t *testing.T, e *env, id string, version byte, src string) (net.Conn, *mqttload.Conn) {
	t.Helper()
	tc, err := device.Dial(t.Context(), e.device(id, version, 2, src))
	require.NoError(t, err)
	c, err := mqttload.Handshake(tc, id, version, 30)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return tc, c
}

// TestAcksInPublishOrder pins MQTT 3.1.1 §4.6 and MQTT 5 §4.6: PUBACKs go
// out in the order of the PUBLISH packets, although the gateway writes them
// itself once readings are durable and the store answers in any order. A
// refused reading keeps its place (MQTT 5: a negative PUBACK there; 3.1.1:
// none), and a retransmission of an id still waiting gets no second PUBACK.
func TestAcksInPublishOrder(t *testing.T) {
	for _, version := range []byte{4, 5} {
		t.Run(fmt.Sprintf("mqtt%d", version), func(t *testing.T) {
			e := start(t, func(c *Config) { c.Store = &reverseStore{n: 8} })
			id := fmt.Sprintf("order%d", version)
			tc, c := handshake(t, e, id, version, "127.0.0.41:4000")

			var buf []byte
			var want []uint16
			n := 34
			if version == 5 {
				n++ // the forbidden topic never reaches the store
			}
			for i := range n {
				pid := uint16(i + 1)
				payload := device.Reading(id, uint64(i), 20)
				topic := "telemetry/" + id
				switch i {
				case 5:
					payload = []byte(`{"device":"someone-else","seq":5}`)
				case 10: // the same packet id again while it waits: i = 9 is the
					// first reading of the store's second group of eight, which
					// is not answered before seven more arrive (i = 9 itself
					// would not do: i = 8 completes the first group, whose
					// PUBACKs may be out before the retransmission is read)
					pid = 10
				case 12: // a forbidden topic (MQTT 3.1.1 would be disconnected)
					if version == 5 {
						topic = "elsewhere/" + id
					}
				}
				buf = c.AppendPublish(buf, topic, pid, 1, payload)
				if i != 10 && (i != 5 || version == 5) {
					want = append(want, pid)
				}
			}
			// 34 sent, one refused and one retransmitted (35 and two refused
			// with MQTT 5): 32 answered by the store, in four groups of 8.
			require.NoError(t, c.Write(buf))
			var got []uint16
			codes := map[uint16]byte{}
			require.NoError(t, tc.SetReadDeadline(time.Now().Add(5*time.Second)))
			for range want {
				pid, code, err := c.ReadAck()
				require.NoError(t, err, "after %v", got)
				got = append(got, pid)
				codes[pid] = code
			}
			assert.Equal(t, want, got, "PUBACKs in PUBLISH order")
			if version == 5 {
				assert.EqualValues(t, 0x87, codes[6], "the refused reading's negative PUBACK, in its place")
				assert.EqualValues(t, 0x87, codes[13], "the forbidden topic's negative PUBACK, in its place, not ahead of the readings before it")
			}
		})
	}
}

// TestReceiveMaximum: the gateway holds QoS 1 readings until the store
// answers, so it enforces the receive maximum it announces for them: a MQTT
// 5 client with more QoS 1 readings waiting is disconnected with 0x93
// (MQTT 5 §3.3.4).
func TestReceiveMaximum(t *testing.T) {
	e := start(t, func(c *Config) { c.Store, c.ReceiveMaximum = &reverseStore{n: 1000}, 4 })
	tc, c := handshake(t, e, "rm5", 5, "127.0.0.42:4000")
	var buf []byte
	for i := range 5 {
		buf = c.AppendPublish(buf, "telemetry/rm5", uint16(i+1), 1, device.Reading("rm5", uint64(i), 20))
	}
	require.NoError(t, c.Write(buf))
	require.NoError(t, tc.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, code, err := c.ReadAck()
	require.ErrorIs(t, err, mqttload.ErrProtocol, "no PUBACK before the DISCONNECT: nothing was answered")
	assert.EqualValues(t, 0x93, code, "receive maximum exceeded")
}

// TestNothingStoredAfterReceiveMaximum: the readings that came after the
// PUBLISH beyond the receive maximum, in the same write, are not stored: the
// gateway ended the connection with 0x93 at that PUBLISH, and it is closed
// (MQTT 5 [MQTT-3.14.4-2]).
func TestNothingStoredAfterReceiveMaximum(t *testing.T) {
	store := &reverseStore{n: 1000}
	e := start(t, func(c *Config) { c.Store, c.ReceiveMaximum = store, 4 })
	tc, c := handshake(t, e, "rm5late", 5, "127.0.0.42:4001")
	var buf []byte
	for i := range 8 { // QoS 1 up to the fifth, then QoS 0
		qos := byte(1)
		if i >= 5 {
			qos = 0
		}
		buf = c.AppendPublish(buf, "telemetry/rm5late", uint16(i+1), qos, device.Reading("rm5late", uint64(i), 20))
	}
	require.NoError(t, c.Write(buf))
	require.NoError(t, tc.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, code, err := c.ReadAck()
	require.ErrorIs(t, err, mqttload.ErrProtocol)
	assert.EqualValues(t, 0x93, code, "receive maximum exceeded")
	require.Eventually(t, func() bool {
		n := 0
		e.g.hook.sessions.Range(func(any, any) bool { n++; return true })
		return n == 0
	}, 5*time.Second, time.Millisecond, "the session ended")
	assert.EqualValues(t, 4, store.submitted.Load(), "the four readings within the maximum, nothing after")
}

// qos2Store answers QoS 2 readings at once and holds QoS 1 ones.
type qos2Store struct{ reverseStore }

func (q *qos2Store) Submit(ctx context.Context, rec *sink.Record, done func(sink.Result, error)) error {
	if rec.QoS == 2 && done != nil {
		go done(sink.Result{}, nil)
		return nil
	}
	return q.reverseStore.Submit(ctx, rec, done)
}

// TestReceiveMaximumCountsQoS2: the receive maximum bounds QoS 1 and QoS 2
// PUBLISHes together (MQTT 5 §3.3.4): with two QoS 2 exchanges open (PUBREC
// received, no PUBREL sent), a receive maximum of 4 leaves room for two
// QoS 1 readings, and a third gets the client disconnected with 0x93.
func TestReceiveMaximumCountsQoS2(t *testing.T) {
	e := start(t, func(c *Config) { c.Store, c.ReceiveMaximum = &qos2Store{reverseStore{n: 1000}}, 4 })
	tc, c := handshake(t, e, "rm25", 5, "127.0.0.44:4000")
	require.NoError(t, tc.SetReadDeadline(time.Now().Add(5*time.Second)))
	for i := range 2 {
		require.NoError(t, c.Write(c.AppendPublish(nil, "telemetry/rm25", uint16(i+1), 2, device.Reading("rm25", uint64(i), 20))))
		id, code, err := c.ReadAck()
		require.NoError(t, err)
		assert.Equal(t, uint16(i+1), id)
		assert.Zero(t, code, "PUBREC")
	}
	var buf []byte
	for i := range 3 {
		buf = c.AppendPublish(buf, "telemetry/rm25", uint16(i+3), 1, device.Reading("rm25", uint64(i+2), 20))
	}
	require.NoError(t, c.Write(buf))
	_, code, err := c.ReadAck()
	require.ErrorIs(t, err, mqttload.ErrProtocol, "no PUBACK before the DISCONNECT: the QoS 1 readings wait in the store")
	assert.EqualValues(t, 0x93, code, "receive maximum exceeded")
}

// TestShutdownWithAFullQueue: a MQTT 3.1.1 client whose readings fill the
// receive maximum waits in the read loop for room; at shutdown that wait ends
// (the store may answer only after the server has stopped every client, and
// the server waits for every reading goroutine), and the gateway stops in
// time.
func TestShutdownWithAFullQueue(t *testing.T) {
	store := &reverseStore{n: 1000}
	e := start(t, func(c *Config) { c.Store, c.ReceiveMaximum = store, 4 })
	_, c := handshake(t, e, "full3", 4, "127.0.0.43:4000")
	var buf []byte
	for i := range 6 {
		buf = c.AppendPublish(buf, "telemetry/full3", uint16(i+1), 1, device.Reading("full3", uint64(i), 20))
	}
	require.NoError(t, c.Write(buf))
	require.Eventually(t, func() bool { return store.submitted.Load() == 4 }, 5*time.Second, time.Millisecond,
		"four readings waiting, the fifth waits for room")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, e.g.Shutdown(ctx, 0))
	t.Logf("stopped in %v", time.Since(start))
}
