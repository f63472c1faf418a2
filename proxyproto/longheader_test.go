package proxyproto

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Config.MaxHeaderBytes: a client certificate that makes the header longer
// than 16+4096 bytes passes only when the limit is raised, only from a
// trusted upstream, and only as far as the limit; the larger buffer is
// allocated for exactly those headers.
func TestListenerLongHeader(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	der := ca.bigClient(t, "device-7", 200).Certificate[0]
	long := sslHeader(t, der)
	require.Greater(t, len(long), MaxHeaderLen+512, "the header must not fit the pooled buffer")
	const untrusted = "127.0.0.66"
	tests := []struct {
		name     string
		maxBytes int
		src      string
		ignore   bool // UntrustedIgnore
		in       []byte
		accepted bool
		grown    uint64
	}{
		{name: "default limit: trusted upstream refused", src: lbAddr, in: long},
		{name: "raised limit: trusted upstream accepted", maxBytes: MaxHeaderBytesLimit, src: lbAddr, in: long, accepted: true, grown: 1},
		{name: "raised limit just fits", maxBytes: len(long) - len("hello"), src: lbAddr, in: long, accepted: true, grown: 1},
		{name: "raised limit one byte short: refused before the buffer grows", maxBytes: len(long) - len("hello") - 1, src: lbAddr, in: long},
		{name: "raised limit: untrusted peer (UntrustedIgnore) held to the default", maxBytes: MaxHeaderBytesLimit, src: untrusted, ignore: true, in: long},
		{name: "raised limit: a bare length field from a trusted upstream claims 65535 bytes, sends 16", maxBytes: 8192, src: lbAddr,
			in: append([]byte(sigV2), 0x21, 0x11, 0xff, 0xff)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := trustedLB()
			cfg.MaxHeaderBytes = tt.maxBytes
			if tt.ignore {
				cfg.Untrusted = UntrustedIgnore
			}
			s := newServer(t, cfg)
			c := dial(t, tt.src, s.addr())
			c.Write(tt.in)
			if tt.accepted {
				sc := s.accept(t)
				got, ok := sc.Facts().TLVs.SSL()
				require.True(t, ok)
				assert.Equal(t, string(der), got.CertDER)
				assertReads(t, sc, "hello")
			} else {
				r := s.reject(t)
				assert.Equal(t, ReasonInvalid, r.Reason)
				assert.ErrorIs(t, r.Err, ErrHeaderTooLong)
				assert.ErrorIs(t, r.Err, ErrInvalidHeader)
				closedByServer(t, c)
			}
			assert.Equal(t, tt.grown, s.l.grown.Load(), "buffers grown")
		})
	}
}

// A long header that arrives in pieces grows its buffer once, while the
// listener waits for the rest under the deadline.
func TestListenerLongHeaderInPieces(t *testing.T) {
	ca := newTestCA(t, "Fleet CA")
	long := sslHeader(t, ca.bigClient(t, "device-7", 200).Certificate[0])
	cfg := trustedLB()
	cfg.MaxHeaderBytes = MaxHeaderBytesLimit
	s := newServer(t, cfg)
	c := dial(t, lbAddr, s.addr())
	cut := MaxHeaderLen + 1000
	c.Write(long[:cut])
	waitFor(t, "the listener to wait for the rest", func() bool { return s.l.waited.Load() == 1 && s.l.grown.Load() == 1 })
	c.Write(long[cut:])
	sc := s.accept(t)
	_, ok := sc.Facts().TLVs.SSL()
	assert.True(t, ok)
	assertReads(t, sc, "hello")
	assert.Equal(t, uint64(1), s.l.grown.Load())
}
