package ratelimit

import (
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAllowExisting: Allow (with its clock read) on a key the Limiter
// holds, in a table of 100000.
func BenchmarkAllowExisting(b *testing.B) {
	l := mustNew(b, 1e9, 5, 0)
	fill(l, 100000, time.Now())
	k := Key{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Identity: "4242"}
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(k)
	}
}

// BenchmarkAllowExistingParallel: the same from every core, each goroutine
// on its own key (one lock guards the table).
func BenchmarkAllowExistingParallel(b *testing.B) {
	l := mustNew(b, 1e9, 5, 0)
	fill(l, 100000, time.Now())
	var next atomic.Int32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		k := Key{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Identity: strconv.Itoa(int(next.Add(1)) * 7)}
		for pb.Next() {
			l.Allow(k)
		}
	})
}

// BenchmarkReserveAtFullTable: every reservation is for a new key while the
// table holds MaxKeys (the default, 100000) busy buckets, so each one evicts.
func BenchmarkReserveAtFullTable(b *testing.B) {
	l := mustNew(b, 1, 5, 0)
	now := time.Unix(1000, 0)
	fill(l, DefaultMaxKeys, now)
	b.ReportAllocs()
	b.ResetTimer()
	for i := uint32(0); b.Loop(); i++ {
		// A key never seen before.
		l.ReserveAt(Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(172 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)}), 32)}, now, 0)
	}
}

// BenchmarkReserveAtExisting: reservations for keys already held, spread
// over the table.
func BenchmarkReserveAtExisting(b *testing.B) {
	l := mustNew(b, 1e9, 5, 0)
	now := time.Unix(1000, 0)
	fill(l, DefaultMaxKeys, now)
	p := netip.MustParsePrefix("10.0.0.1/32")
	keys := make([]Key, 1<<16)
	for i := range keys {
		keys[i] = Key{Prefix: p, Identity: strconv.Itoa(i * 3 % DefaultMaxKeys)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		l.ReserveAt(keys[i&(len(keys)-1)], now.Add(time.Duration(i)), 0)
	}
}
