package clientip

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// The trusted-set lookup is a multibit trie with a stride of one byte, in the
// style of Poptrie and ART: every node covers one byte of the address and holds
// two 256-bit maps. full marks the byte values whose whole subtree lies inside
// some prefix (prefix lengths that are not a multiple of eight are expanded into
// a run of bits); kids marks the byte values that lead to a child node, and the
// children are stored densely, indexed by the rank of their bit. A lookup reads
// at most one node per address byte and stops at the first full bit or missing
// child, so its cost depends on how deep the covering prefixes are, not on how
// many there are.
//
// We write the trie ourselves rather than import a routing-table library so that
// clientip keeps to the standard library: it answers one question (is the address
// covered?), needs no values, no deletion and no longest-match, and is immutable
// once built, which keeps it to about a hundred lines.

type bitset256 [4]uint64

func (b *bitset256) test(i byte) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func (b *bitset256) set(i byte)       { b[i>>6] |= 1 << (i & 63) }
func (b *bitset256) clear(i byte)     { b[i>>6] &^= 1 << (i & 63) }

// rank reports how many bits below i are set.
func (b *bitset256) rank(i byte) int {
	w := int(i >> 6)
	n := bits.OnesCount64(b[w] & (1<<(i&63) - 1))
	for j := 0; j < w; j++ {
		n += bits.OnesCount64(b[j])
	}
	return n
}

type trieNode struct {
	full  bitset256
	kids  bitset256
	child []*trieNode
}

// insert adds the prefix given by the address bytes addr and its length in bits.
func (n *trieNode) insert(addr []byte, length int) {
	for d := 0; ; d++ {
		rem := length - 8*d
		if rem <= 8 {
			// The prefix ends inside this node's byte: mark every byte value
			// that shares its top rem bits.
			mask := byte(0xff << (8 - rem))
			if rem == 0 {
				mask = 0
			}
			lo := addr[d] & mask
			hi := lo | ^mask
			for v := int(lo); v <= int(hi); v++ {
				n.markFull(byte(v))
			}
			return
		}
		b := addr[d]
		if n.full.test(b) {
			return // already covered by a shorter prefix
		}
		if !n.kids.test(b) {
			n.addChild(b)
		}
		n = n.child[n.kids.rank(b)]
	}
}

func (n *trieNode) markFull(b byte) {
	n.full.set(b)
	if n.kids.test(b) {
		// The subtree is now redundant: drop it.
		r := n.kids.rank(b)
		n.child = append(n.child[:r], n.child[r+1:]...)
		n.kids.clear(b)
	}
}

func (n *trieNode) addChild(b byte) {
	r := n.kids.rank(b)
	n.child = append(n.child, nil)
	copy(n.child[r+1:], n.child[r:])
	n.child[r] = new(trieNode)
	n.kids.set(b)
}

// contains4 reports whether the IPv4 address ip (in host order) lies in a
// prefix of the trie.
func (n *trieNode) contains4(ip uint32) bool {
	return n.full4(ip) || n.kids4(ip) && n.descend4(ip)
}

// full4 and kids4 are contains4's test of the root, where most lookups end:
// full4 reports that ip's first byte lies wholly in the trie, kids4 that the
// answer lies below the root and descend4 gives it. Unlike contains4 they
// are small enough for the compiler to inline, so a hot loop can pay for a
// call only when the root does not decide (see walkXFF).
func (n *trieNode) full4(ip uint32) bool { b := ip >> 24; return n.full[b>>6]>>(b&63)&1 != 0 }
func (n *trieNode) kids4(ip uint32) bool { b := ip >> 24; return n.kids[b>>6]>>(b&63)&1 != 0 }

// descend4 continues contains4 below the root.
func (n *trieNode) descend4(ip uint32) bool {
	return n.child[n.kids.rank(byte(ip>>24))].contains4From(ip)
}

func (n *trieNode) contains4From(ip uint32) bool {
	for shift := 16; shift >= 0; shift -= 8 {
		b := byte(ip >> shift)
		if n.full.test(b) {
			return true
		}
		if !n.kids.test(b) {
			return false
		}
		n = n.child[n.kids.rank(b)]
	}
	return false
}

// full6, kids6 and descend6 are full4, kids4 and descend4 for an IPv6
// address given as its high and low 64 bits.
func (n *trieNode) full6(hi uint64) bool { b := hi >> 56; return n.full[b>>6]>>(b&63)&1 != 0 }
func (n *trieNode) kids6(hi uint64) bool { b := hi >> 56; return n.kids[b>>6]>>(b&63)&1 != 0 }

// descend6 continues the lookup of hi, lo below the root.
func (n *trieNode) descend6(hi, lo uint64) bool {
	n = n.child[n.kids.rank(byte(hi>>56))]
	for d := 1; d < 16; d++ {
		w := hi
		if d >= 8 {
			w = lo
		}
		b := byte(w >> (56 - 8*(d&7)))
		if n.full.test(b) {
			return true
		}
		if !n.kids.test(b) {
			return false
		}
		n = n.child[n.kids.rank(b)]
	}
	return false
}

// contains6 reports whether the IPv6 address whose high and low 64 bits
// are hi and lo lies in a prefix of the trie.
func (n *trieNode) contains6(hi, lo uint64) bool {
	return n.full6(hi) || n.kids6(hi) && n.descend6(hi, lo)
}

// halves returns the high and low 64 bits of the IPv6 address a.
func halves(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// covers reports whether every address of the prefix given by the address
// bytes addr and its length in bits lies in the trie, whether one prefix
// covers it or several together.
func (n *trieNode) covers(addr []byte, length int) bool {
	for d := 0; ; d++ {
		rem := length - 8*d
		if rem <= 8 {
			mask := byte(0xff << (8 - rem))
			if rem == 0 {
				mask = 0
			}
			var lo byte
			if d < len(addr) {
				lo = addr[d] & mask
			}
			for v := int(lo); v <= int(lo|^mask); v++ {
				if !n.coversByte(byte(v)) {
					return false
				}
			}
			return true
		}
		b := addr[d]
		if n.full.test(b) {
			return true
		}
		if !n.kids.test(b) {
			return false
		}
		n = n.child[n.kids.rank(b)]
	}
}

// coversByte reports whether the whole subtree under byte value b lies in
// the trie: b is full, or its child covers every byte value.
func (n *trieNode) coversByte(b byte) bool {
	if n.full.test(b) {
		return true
	}
	if !n.kids.test(b) {
		return false
	}
	c := n.child[n.kids.rank(b)]
	for v := 0; v < 256; v++ {
		if !c.coversByte(byte(v)) {
			return false
		}
	}
	return true
}
