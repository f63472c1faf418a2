package sink

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleRecord() Record {
	return Record{ID: "d3/7", Device: "d3", Seq: 7, Received: time.Date(2026, 12, 2, 14, 17, 26, 54_000_000, time.UTC),
		Protocol: "mqtt", Topic: "telemetry/d3", QoS: 1, Payload: json.RawMessage(`{"device":"d3","seq":7,"values":{"temp":20.5}}`),
		Provenance: Provenance{Client: "198.51.100.7", Source: "proxy-protocol", Via: "127.0.0.200", Peer: "127.0.0.200:55969",
			ProxySource: "198.51.100.7:39195", ProxyDestination: "127.0.0.1:8883", TLSServerName: "gateway.example",
			TLSSubject: "CN=d3", ClientID: "d3", Conn: 3}}
}

// TestAppendJSONIsMarshal: the hand-written encoder writes exactly what
// json.Marshal writes, including its escapes (quotes, control characters,
// <, >, & and U+2028 in strings and in the payload, invalid UTF-8), omitted
// empty fields and time format.
func TestAppendJSONIsMarshal(t *testing.T) {
	full := sampleRecord()
	tests := []struct {
		name string
		rec  Record
	}{
		{"full", full},
		{"zero", Record{}},
		{"http", Record{ID: "h1/1", Device: "h1", Seq: 1, Received: time.Unix(0, 1).In(time.FixedZone("x", 3600)), Protocol: "http",
			Payload: json.RawMessage(`{}`), Provenance: Provenance{Client: "::1", Source: "x-forwarded-for", Header: "X-Forwarded-For", Masqueraded: true}}},
		{"TLS at the load balancer, over WebSocket", func() Record {
			r := full
			r.Provenance.Transport, r.Provenance.TLSTerminatedBy, r.Provenance.TLSVersion, r.Provenance.TLSIdentity = "websocket", "127.0.0.200", "TLSv1.3", "cn"
			return r
		}()},
		{"escapes", func() Record {
			r := full
			r.Topic = "telemetry/\"quoted\"\\<b>&\u2028\u2029\x00\x1f\t\n\r\b\f é 🙂 \xff\xfe"
			r.Provenance.TLSSubject = "CN=d3,O=A&B <x>"
			r.Provenance.TLSServerName = "\x7f"
			r.Payload = json.RawMessage(`{"device":"a<b>&c\u2028","s":"` + "\u2028\u2029" + `"}`)
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := json.Marshal(&tt.rec)
			require.NoError(t, err)
			got, err := tt.rec.AppendJSON(nil)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			pre := tt.rec
			pre.Provenance.Precompute()
			got, err = pre.AppendJSON(nil)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "with the provenance precomputed")
		})
	}
	_, err := (&Record{Received: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}).AppendJSON(nil)
	assert.Error(t, err, "a year json.Marshal refuses")
}

// TestPrecomputeFollowsChanges: a provenance changed after Precompute is
// encoded as it was when Precompute last ran, and as it is once Precompute
// runs again; a copy made before Precompute is encoded field by field.
func TestPrecomputeFollowsChanges(t *testing.T) {
	r := sampleRecord()
	before := r
	r.Provenance.Precompute()
	r.Provenance.ClientID = "d4"
	got, err := r.AppendJSON(nil)
	require.NoError(t, err)
	assert.Contains(t, string(got), `"client_id":"d3"`)
	r.Provenance.Precompute()
	got, err = r.AppendJSON(nil)
	require.NoError(t, err)
	assert.Contains(t, string(got), `"client_id":"d4"`)
	before.Provenance.ClientID = "d5"
	got, err = before.AppendJSON(nil)
	require.NoError(t, err)
	assert.Contains(t, string(got), `"client_id":"d5"`)
}

// FuzzAppendJSON compares the encoder with json.Marshal for any strings.
func FuzzAppendJSON(f *testing.F) {
	f.Add("telemetry/d3", "CN=d3", "d3")
	f.Add("a\"b\\c<d>e&f", "\u2028\xff", "x\x00y")
	f.Fuzz(func(t *testing.T, topic, subject, sni string) {
		r := sampleRecord()
		r.Topic, r.Provenance.TLSSubject, r.Provenance.TLSServerName = topic, subject, sni
		want, err := json.Marshal(&r)
		require.NoError(t, err)
		got, err := r.AppendJSON(nil)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

// TestAppendJSONAllocs: a record of plain ASCII is encoded into a buffer
// with room without allocating.
func TestAppendJSONAllocs(t *testing.T) {
	r := sampleRecord()
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() { buf, _ = r.AppendJSON(buf[:0]) })
	assert.Zero(t, allocs)
}

func BenchmarkEncode(b *testing.B) {
	r := sampleRecord()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("AppendJSON/precomputed", func(b *testing.B) {
		b.ReportAllocs()
		r := r
		r.Provenance.Precompute()
		var buf []byte
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
}
