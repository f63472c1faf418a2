package explain

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
)

// hllRegisters is the number of registers of a sketch: 64, for a standard
// error of about 13% on large counts and exact-enough counts of a few,
// where linear counting takes over.
const hllRegisters = 64

// sketch estimates how many distinct addresses it has seen, in 64 bytes,
// without keeping any of them: a HyperLogLog whose registers hold, for the
// hashes that fall into them, the longest run of leading zeros plus one.
// The hash is keyed by the Advisor's key, chosen at random.
type sketch [hllRegisters]uint8

// hashAddr mixes a's 16 bytes with key (splitmix64's finalizer on each
// half).
func hashAddr(key uint64, a netip.Addr) uint64 {
	b := a.As16()
	return mix64(mix64(binary.BigEndian.Uint64(b[:8])^key) ^ binary.BigEndian.Uint64(b[8:]))
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (s *sketch) add(key uint64, a netip.Addr) {
	h := hashAddr(key, a)
	i := h >> (64 - 6) // the top 6 bits pick the register
	rank := uint8(bits.LeadingZeros64(h<<6|1<<5) + 1)
	if rank > s[i] {
		s[i] = rank
	}
}

// estimate returns the estimated number of distinct addresses added.
func (s *sketch) estimate() int {
	const m = float64(hllRegisters)
	sum, zeros := 0.0, 0
	for _, r := range s {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := 0.709 * m * m / sum // alpha_64
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(m/float64(zeros)) // linear counting
	}
	return int(math.Round(e))
}
