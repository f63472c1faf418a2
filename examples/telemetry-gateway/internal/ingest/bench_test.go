package ingest_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// BenchmarkServePublish is one MQTT 3.1.1 connection over loopback TCP (no
// TLS) publishing b.N readings to a handler that does nothing but
// acknowledge QoS 1; the client writes 32 PUBLISHes per write and, for QoS
// 1, reads the PUBACKs as they come. Allocations are the whole process's
// (client included) per PUBLISH.
func BenchmarkServePublish(b *testing.B) {
	for _, qos := range []byte{0, 1} {
		b.Run(fmt.Sprintf("qos%d", qos), func(b *testing.B) {
			h := newCounter()
			h.target, h.done = int64(b.N), make(chan struct{})
			hs := serve(b, h)
			rc := connectRaw(b, hs, 4, "bench")
			pkt := publishPkt(false, qos, 1, "sensors/dev-1/temperature", `{"seq":1,"t":21.5}`)
			batch := bytes.Repeat(pkt, 32)
			acks := make(chan error, 1)
			if qos == 1 {
				go func() {
					_, err := io.CopyN(io.Discard, rc.conn, int64(4*b.N))
					acks <- err
				}()
			}
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			b.ResetTimer()
			for left := b.N; left > 0; {
				k := min(left, 32)
				if _, err := rc.conn.Write(batch[:k*len(pkt)]); err != nil {
					b.Fatal(err)
				}
				left -= k
			}
			<-h.done
			if qos == 1 {
				if err := <-acks; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
		})
	}
}
