package sink

// index remembers, per device, which of its most recent sequence numbers are
// durable: a sliding bitmap of window bits ending at the highest seq seen.
type index struct {
	words      int // window / 64
	maxDevices int
	devices    map[string]*window
}

type window struct {
	max  uint64
	bits []uint64 // bit seq%len is set when seq in (max-len, max] is durable
}

func newIndex(size, maxDevices int) *index {
	return &index{words: (size + 63) / 64, maxDevices: maxDevices, devices: make(map[string]*window)}
}

func (x *index) span() uint64 { return uint64(x.words) * 64 }

// has reports whether (dev, seq) is known to be durable. A seq older than
// the window is reported unknown (false): it is written again and left for
// the reader to count.
func (x *index) has(dev string, seq uint64) bool {
	w := x.devices[dev]
	if w == nil || seq > w.max || w.max-seq >= x.span() {
		return false
	}
	i := seq % x.span()
	return w.bits[i/64]&(1<<(i%64)) != 0
}

func (x *index) add(dev string, seq uint64) {
	w := x.devices[dev]
	if w == nil {
		if len(x.devices) >= x.maxDevices {
			for k := range x.devices { // forget an arbitrary device
				delete(x.devices, k)
				break
			}
		}
		w = &window{max: seq, bits: make([]uint64, x.words)}
		x.devices[dev] = w
	}
	span := x.span()
	if seq > w.max {
		if seq-w.max >= span {
			clear(w.bits)
		} else {
			for s := w.max + 1; s <= seq; s++ {
				i := s % span
				w.bits[i/64] &^= 1 << (i % 64)
			}
		}
		w.max = seq
	} else if w.max-seq >= span {
		return
	}
	i := seq % span
	w.bits[i/64] |= 1 << (i % 64)
}
