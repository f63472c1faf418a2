package proxyproto

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func fuzzSeeds() [][]byte {
	a4 := addrs4("192.0.2.1", "198.51.100.1", 56324, 443)
	a6 := addrs6("::ffff:192.0.2.1", "2001:db8::2", 1, 2)
	ssl := SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7"}.TLV()
	full := withCRC(v2(0x21, 0x21, a6, tlv(0x02, []byte("example.com")), tlv(0x05, []byte("id-1")),
		tlv(0x20, []byte(ssl.Value)), tlv(0xEA, []byte("\x01vpce-1")), tlv(0x04, []byte{0, 0})))
	return [][]byte{
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\n"),
		v2(0x21, 0x11, a4),
		append(v2(0x21, 0x11, a4), 0x16, 0x03, 0x01),
		v2(0x20, 0x00, nil),
		withCRC(v2(0x20, 0x11, nil, tlv(0x04, make([]byte, 70)))),
		full,
		full[:len(full)-5],
		flipLast(withCRC(v2(0x21, 0x11, a4))),
		v2(0x21, 0x31, make([]byte, 216)),
		v2(0x21, 0x13, a4),
		[]byte(sigV2),
		[]byte("PROX"),
		[]byte("PROXY "), // a v1 signature and its space, nothing more
		{0x16, 0x03, 0x01, 0x00, 0x05},
		nil,
	}
}

// FuzzHeader feeds arbitrary bytes to ParseHeader and to the listener's
// header reader. Neither may panic or hang; an accepted header obeys the
// invariants; both agree; no byte after the header is lost.
func FuzzHeader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		h, n, err := ParseHeader(data)
		if err != nil {
			if !errors.Is(err, ErrNoHeader) && !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("error %v matches no sentinel", err)
			}
		} else {
			checkHeader(t, data, h, n)
		}
		// A trusted upstream's header is believed; in the optional-header
		// mode an untrusted peer's gets the same verdict and is never believed.
		checkReader(t, data, int(chunk%64)+1, h, n, err, true)
		checkReader(t, data, int(chunk%64)+1, h, n, err, false)
	})
}

func checkHeader(t *testing.T, data []byte, h Header, n int) {
	if n <= 0 || n > len(data) || n > MaxHeaderLen {
		t.Fatalf("n = %d for %d bytes", n, len(data))
	}
	if h2, n2, err := ParseHeader(data[:n]); err != nil || h2 != h || n2 != n {
		t.Fatalf("header alone parses differently: %+v %d %v", h2, n2, err)
	}
	if h.Version != 1 && h.Version != 2 {
		t.Fatalf("version %d", h.Version)
	}
	if h.AddChecksum {
		t.Fatal("AddChecksum set by ParseHeader")
	}
	switch h.Command {
	case CommandLocal:
		if h.Source.IsValid() || h.Destination.IsValid() || h.TLVs.Len() != 0 {
			t.Fatalf("LOCAL header with facts: %+v", h)
		}
	case CommandProxy:
		for _, a := range []Header{{Source: h.Source}, {Source: h.Destination}} {
			ad := a.Source.Addr()
			if !ad.IsValid() || ad.Is4In6() || ad.Zone() != "" {
				t.Fatalf("address %v not normalised", a.Source)
			}
		}
	default:
		t.Fatalf("command %v", h.Command)
	}
	if h.Version == 1 && h.TLVs.Len() != 0 {
		t.Fatal("TLVs on a v1 header")
	}
	total := 0
	crcs := 0
	for f := range h.TLVs.All() {
		total += 3 + len(f.Value)
		switch f.Type {
		case TLVUniqueID:
			if len(f.Value) > maxUniqueID {
				t.Fatalf("UNIQUE_ID of %d bytes", len(f.Value))
			}
		case TLVCRC32C:
			crcs++
		}
	}
	if total != h.TLVs.Len() {
		t.Fatalf("TLVs walk %d of %d bytes", total, h.TLVs.Len())
	}
	if sum, ok := h.TLVs.CRC32C(); ok {
		at := n - h.TLVs.Len() + bytes.Index([]byte(h.TLVs.raw), []byte{byte(TLVCRC32C), 0, 4}) + 3
		if crcs != 1 || headerCRC(data[:n], at) != sum {
			t.Fatal("accepted a header whose checksum does not verify")
		}
	}
	// Round trip through the writer (without the checksum field, which
	// covers bytes the writer may encode differently).
	var kept []TLV
	for f := range h.TLVs.All() {
		if f.Type != TLVCRC32C {
			kept = append(kept, f)
		}
	}
	h.TLVs = mustTLVs(kept...)
	b, err := h.Format()
	if err != nil {
		t.Fatalf("Format(%+v): %v", h, err)
	}
	if h2, _, err := ParseHeader(b); err != nil || h2 != h {
		t.Fatalf("round trip: %+v, %v; want %+v", h2, err, h)
	}
}

// chunkConn returns data a few bytes per Read, then EOF.
type chunkConn struct {
	net.Conn // nil: only Read is used
	data     []byte
	chunk    int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.chunk)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// checkReader runs the listener's header reader over data in chunks, for a
// trusted upstream (HeaderlessAllow) or an untrusted peer (UntrustedIgnore),
// and compares its verdict with ParseHeader's.
func checkReader(t *testing.T, data []byte, chunk int, h Header, n int, perr error, trusted bool) {
	l := &Listener{headerless: HeaderlessAllow, untrusted: UntrustedIgnore}
	c := &chunkConn{data: data, chunk: chunk}
	done := make(chan outcome, 1)
	go func() { done <- l.readHeader(&handshake{nc: c, buf: new([bufSize]byte), trusted: trusted}) }()
	var r outcome
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readHeader hung")
	}
	after := append(append([]byte{}, r.rest...), c.data...)
	if !trusted && r.facts != (Facts{}) {
		t.Fatalf("an untrusted peer's header was believed: %v", r.facts)
	}
	switch {
	case perr == nil:
		if r.err != nil {
			t.Fatalf("reader refused what ParseHeader accepted: %v", r.err)
		}
		f := r.facts
		if !trusted {
			if !r.ignored {
				t.Fatalf("untrusted header not reported as ignored: %+v", r)
			}
		} else if f.Version != h.Version || f.Command != h.Command || f.Source != h.Source || f.Destination != h.Destination || f.TLVs != h.TLVs {
			t.Fatalf("reader facts %v, ParseHeader %+v", f, h)
		}
		if !bytes.Equal(after, data[n:]) {
			t.Fatalf("bytes after the header: %q, want %q", after, data[n:])
		}
	case errors.Is(perr, ErrNoHeader):
		if r.err != nil || r.facts.Version != 0 || !bytes.Equal(after, data) {
			t.Fatalf("no header: outcome %+v, bytes %q", r, after)
		}
	case errors.Is(perr, ErrInvalidHeader):
		if !errors.Is(r.err, ErrInvalidHeader) {
			t.Fatalf("ParseHeader: %v; reader: %+v", perr, r)
		}
	case errors.Is(perr, ErrIncomplete):
		// The stream ended: a partial signature is no header (served as
		// is), a partial header is incomplete.
		if r.err == nil {
			if r.facts.Version != 0 || !bytes.Equal(after, data) {
				t.Fatalf("incomplete: outcome %+v, bytes %q", r, after)
			}
		} else if !errors.Is(r.err, ErrIncomplete) {
			t.Fatalf("incomplete: reader error %v", r.err)
		}
	}
}
