package limiter

import (
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// fill holds n buckets, each with a token taken at now (so none is full).
func fill(b *Buckets, n int, now time.Time) {
	p := netip.MustParsePrefix("10.0.0.1/32")
	for i := range n {
		b.ReserveAt(Key{Prefix: p, Identity: strconv.Itoa(i)}, now, 0)
	}
}

// BenchmarkReserveAtFullTable: every reservation is for a new key while the
// table holds MaxKeys (the default, 100000) busy buckets, so each one evicts.
func BenchmarkReserveAtFullTable(b *testing.B) {
	bk := &Buckets{Rate: 1, Burst: 5}
	now := time.Unix(1000, 0)
	fill(bk, 100000, now)
	b.ResetTimer()
	for i := uint32(0); b.Loop(); i++ {
		// A key never seen before.
		bk.ReserveAt(Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(172 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)}), 32)}, now, 0)
	}
}

// BenchmarkReserveAtExisting: reservations for keys already held.
func BenchmarkReserveAtExisting(b *testing.B) {
	bk := &Buckets{Rate: 1e9, Burst: 5}
	now := time.Unix(1000, 0)
	fill(bk, 100000, now)
	p := netip.MustParsePrefix("10.0.0.1/32")
	keys := make([]Key, 1<<16)
	for i := range keys {
		keys[i] = Key{Prefix: p, Identity: strconv.Itoa(i * 3 % 100000)}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bk.ReserveAt(keys[i&(len(keys)-1)], now.Add(time.Duration(i)), 0)
	}
}
