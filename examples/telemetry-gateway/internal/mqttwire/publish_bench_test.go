package mqttwire

import "testing"

// benchPublish is an MQTT 5 QoS 1 PUBLISH with the properties a device sends: topic alias, payload
// format, message expiry, content type and a user property, followed by a PINGREQ.
func benchPublish() []byte {
	return cat(packet(0x32, cat(str("sensors/site-7/dev-42/temperature"), u16(4242),
		plist(property(0x23, u16(3)), property(0x01, []byte{1}), property(0x02, u32(3600)),
			property(0x03, str("application/json")), property(0x26, str("seq"), str("1234567"))),
		[]byte(`{"t":21.5,"h":40.1,"ts":1764763200}`))), []byte{0xC0, 0})
}

func BenchmarkSplitParsePublish(b *testing.B) {
	for _, bc := range []struct {
		name string
		buf  []byte
		v5   bool
	}{
		{"v5_props", benchPublish(), true},
		{"v311", packet(0x32, cat(str("sensors/site-7/dev-42/temperature"), u16(4242),
			[]byte(`{"t":21.5,"h":40.1,"ts":1764763200}`))), false},
		// Hostile size: a 64 KiB packet of 2,000 user properties, each checked as UTF-8.
		{"v5_2000_user_props", packet(0x30, cat(str("t"), plist(repeat(property(0x26, str("key-0123"), str("value-01234567890")), 2000)...))), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.buf)))
			for b.Loop() {
				_, flags, body, _, err := Split(bc.buf, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ParsePublish(flags, body, bc.v5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSplitParsePublishParallel(b *testing.B) {
	buf := benchPublish()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, flags, body, _, err := Split(buf, 1<<20)
			if err != nil {
				panic(err)
			}
			if _, err := ParsePublish(flags, body, true); err != nil {
				panic(err)
			}
		}
	})
}

func repeat(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}
