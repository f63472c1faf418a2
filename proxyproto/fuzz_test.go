package proxyproto

import (
	"bytes"
	"encoding/asn1"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
	"unicode/utf8"
)

func fuzzSeeds() [][]byte {
	a4 := addrs4("192.0.2.1", "198.51.100.1", 56324, 443)
	a6 := addrs6("::ffff:192.0.2.1", "2001:db8::2", 1, 2)
	ssl := SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-7"}.TLV()
	full := withCRC(v2(0x21, 0x21, a6, tlv(0x02, []byte("example.com")), tlv(0x05, []byte("id-1")),
		tlv(0x20, []byte(ssl.Value)), tlv(0xEA, []byte("\x01vpce-1")), tlv(0x04, []byte{0, 0})))
	sslAll := SSL{Client: SSLClientTLS | SSLClientCertConn | SSLClientCertSess, Verify: 21, Version: "TLSv1.3", CN: "device-7",
		Cipher: "TLS_AES_128_GCM_SHA256", SigAlg: "ecdsa-with-SHA256", KeyAlg: "EC256", Group: "X25519MLKEM768",
		SigScheme: "ecdsa_secp256r1_sha256", CertDER: fakeDER}.TLV()
	return [][]byte{
		v2(0x21, 0x11, a4, tlv(0x20, []byte(sslAll.Value))),
		v2(0x21, 0x11, a4, tlv(0x20, []byte(sslAll.Value+"\x29\x00\x00"))),
		v2(0x21, 0x11, a4, tlv(0x20, []byte(sslAll.Value)), tlv(0x20, []byte(sslv(0, 0)))),
		v2(0x21, 0x11, a4, tlv(0x20, []byte(sslv(SSLClientTLS, 0, sub(0x28, "\x30\x82\x01\x00"+string(make([]byte, 0x100))))))),
		v2(0x21, 0x11, a4, tlv(0x04, make([]byte, MaxV2Payload))), // longer than a listener's default limit
		v2(0x21, 0x11, a4, tlv(0x04, make([]byte, bufSize))),      // longer than the pooled buffer
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\n"),
		v2(0x21, 0x11, a4),
		append(v2(0x21, 0x11, a4), 0x16, 0x03, 0x01),
		v2(0x20, 0x00, nil),
		withCRC(v2(0x20, 0x11, nil, tlv(0x04, make([]byte, 70)))),
		awsNLBHealthCheck(),
		flipLast(withCRC(v2(0x20, 0x11, a4))),
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
	if n <= 0 || n > len(data) || n > MaxHeaderBytesLimit {
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
	if v, ok := h.TLVs.Lookup(TLVSSL); ok {
		s, ok := h.TLVs.SSL()
		if !ok {
			t.Fatal("accepted a header whose SSL TLV does not decode")
		}
		checkSSL(t, v, s)
	}
	if sum, ok := h.TLVs.CRC32C(); ok {
		at := n - h.TLVs.Len() + bytes.Index([]byte(h.TLVs.raw), []byte{byte(TLVCRC32C), 0, 4}) + 3
		if crcs != 1 || headerCRC(data[:n], at) != sum {
			t.Fatal("accepted a header whose checksum does not verify")
		}
	}
	// Written as parsed, its checksum field gets the new header's checksum.
	if _, ok := h.TLVs.CRC32C(); ok {
		b, err := h.Format()
		if err != nil {
			t.Fatalf("Format(%+v): %v", h, err)
		}
		if _, _, err := ParseHeader(b); err != nil {
			t.Fatalf("written with its checksum field: %v", err)
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
	// A trusted upstream may send what ParseHeader accepts; an untrusted
	// peer's header is held to the default limit.
	l := &Listener{headerless: HeaderlessAllow, untrusted: UntrustedIgnore, maxV2: MaxHeaderBytesLimit - v2FixedLen}
	if !trusted && len(data) >= v2FixedLen && bytes.HasPrefix(data, []byte(sigV2)) && v2Length(data) > MaxV2Payload {
		perr = ErrHeaderTooLong
	}
	c := &chunkConn{data: data, chunk: chunk}
	done := make(chan outcome, 1)
	go func() { done <- l.readHeader(&handshake{nc: c, buf: new([bufSize]byte), trusted: trusted}) }()
	defer func() {
		// The pooled buffer is replaced once for a trusted upstream's v2
		// header that does not fit it, and never otherwise.
		want := uint64(0)
		if trusted && len(data) >= v2FixedLen && bytes.HasPrefix(data, []byte(sigV2)) && v2FixedLen+v2Length(data) > bufSize {
			want = 1
		}
		if grown := l.grown.Load(); grown != want {
			t.Fatalf("buffer grown %d times for a trusted=%t peer's %d bytes", grown, trusted, len(data))
		}
	}()
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
	case errors.Is(perr, ErrHeaderTooLong):
		if !errors.Is(r.err, ErrHeaderTooLong) || r.reason != ReasonInvalid {
			t.Fatalf("an untrusted peer's long header: %+v", r)
		}
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

// FuzzSSL feeds arbitrary bytes to the SSL TLV parser. It may not panic; what
// it refuses wraps ErrInvalidSSL and refuses the header that carries it; what
// it accepts obeys the rules on SSL, agrees with go-proxyproto's tlvparse,
// and survives the writer and the header parser unchanged.
func FuzzSSL(f *testing.F) {
	for _, tc := range parseSSLCases() {
		f.Add([]byte(tc.in))
	}
	a4 := addrs4("192.0.2.1", "198.51.100.1", 1, 2)
	f.Fuzz(func(t *testing.T, v []byte) {
		s, err := parseSSL(string(v))
		var in []byte
		if len(v) <= 0xffff-12-3 {
			in = v2(0x21, 0x11, a4, tlv(0x20, v))
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidSSL) || s != (SSL{}) {
				t.Fatalf("refused with %v, %+v", err, s)
			}
			if in != nil {
				if _, _, herr := ParseHeader(in); !errors.Is(herr, ErrInvalidSSL) {
					t.Fatalf("ParseHeader accepted an SSL TLV parseSSL refused (%v): %v", err, herr)
				}
			}
			return
		}
		checkSSL(t, string(v), s)
		if in != nil {
			h, _, err := ParseHeader(in)
			if err != nil {
				t.Fatalf("ParseHeader refused an SSL TLV parseSSL accepted: %v", err)
			}
			if got, ok := h.TLVs.SSL(); !ok || got != s {
				t.Fatalf("header's SSL %+v, %t; want %+v", got, ok, s)
			}
		}
	})
}

// checkSSL checks an SSL that parseSSL decoded from v.
func checkSSL(t *testing.T, v string, s SSL) {
	t.Helper()
	if !referenceValid(s) {
		t.Fatalf("accepted %+v, which breaks a rule", s)
	}
	agreesWithTLVParse(t, v, s)
	again, err := parseSSL(s.TLV().Value)
	if err != nil || again != s {
		t.Fatalf("parse(format(x)) = %+v, %v; want %+v", again, err, s)
	}
	if c, err := s.Certificate(); (c == nil) == (err == nil) ||
		(err != nil && !errors.Is(err, ErrNoClientCert) && !errors.Is(err, ErrInvalidClientCert)) {
		t.Fatalf("Certificate: %v, %v", c, err)
	}
}

// FuzzSSLFields writes arbitrary SSL values and reads them back: the parser
// takes exactly those a slow reference of the rules calls valid, and returns
// them unchanged (parse(format(x)) == x).
func FuzzSSLFields(f *testing.F) {
	for _, tc := range parseSSLCases() {
		if !tc.wantErr {
			s := tc.want
			f.Add(s.Client, s.Verify, s.Version, s.CN, s.Cipher, s.SigAlg, s.KeyAlg, s.Group, s.SigScheme, []byte(s.CertDER))
		}
	}
	f.Add(SSLClientTLS|SSLClientCertConn, uint32(0), "TLSv1.3", "device\xff", "", "", "", "", "", []byte("\x30\x81\x03\x02\x01\x07"))
	f.Fuzz(func(t *testing.T, client uint8, verify uint32, version, cn, cipher, sigAlg, keyAlg, group, sigScheme string, der []byte) {
		s := SSL{Client: client, Verify: verify, Version: version, CN: cn, Cipher: cipher, SigAlg: sigAlg, KeyAlg: keyAlg,
			Group: group, SigScheme: sigScheme, CertDER: string(der)}
		v := s.TLV().Value
		if len(v) > 0xffff {
			if _, err := NewTLVs(s.TLV()); !errors.Is(err, ErrInvalidHeaderValue) {
				t.Fatalf("NewTLVs took a %d-byte SSL TLV: %v", len(v), err)
			}
			return
		}
		got, err := parseSSL(v)
		switch ok := referenceValid(s); {
		case ok && (err != nil || got != s):
			t.Fatalf("parse(format(%+v)) = %+v, %v", s, got, err)
		case !ok && err == nil:
			t.Fatalf("accepted %+v, which breaks a rule", s)
		}
	})
}

// referenceValid is the rules on SSL written out plainly, with
// encoding/asn1 for the DER check, independent of parseSSL.
func referenceValid(s SSL) bool {
	for _, f := range []string{s.Version, s.Cipher, s.SigAlg, s.KeyAlg, s.Group, s.SigScheme} {
		for _, r := range []byte(f) {
			if r > 0x7f {
				return false
			}
		}
	}
	if !utf8.ValidString(s.CN) {
		return false
	}
	if s.CertDER != "" {
		var rv asn1.RawValue
		rest, err := asn1.Unmarshal([]byte(s.CertDER), &rv)
		if err != nil || len(rest) != 0 || rv.Class != asn1.ClassUniversal || rv.Tag != asn1.TagSequence || !rv.IsCompound {
			return false
		}
	}
	tlsBit := s.Client&0x01 != 0
	certBits := s.Client&0x06 != 0
	switch {
	case tlsBit && s.Version == "":
		return false
	case certBits && !tlsBit:
		return false
	case (s.CN != "" || s.CertDER != "") && !certBits:
		return false
	}
	return true
}

// FuzzFormat writes arbitrary headers. Format may not panic; it refuses
// exactly what its documentation says it refuses, with ErrInvalidHeaderValue;
// what it writes, ParseHeader reads back as the header written (addresses
// unmapped, a LOCAL header's addresses and TLVs dropped, a checksum field
// filled in), unless a TLV breaks a receiver's rule.
func FuzzFormat(f *testing.F) {
	v4a, v4b := netip.MustParseAddr("192.0.2.1").AsSlice(), netip.MustParseAddr("198.51.100.1").AsSlice()
	v6a, mapped := netip.MustParseAddr("2001:db8::1").AsSlice(), netip.MustParseAddr("::ffff:192.0.2.1").AsSlice()
	f.Add(uint8(2), uint8(CommandProxy), v4a, uint16(1), v4b, uint16(2), []byte("\x02\x0bexample.com\x05\x02id"), true)
	f.Add(uint8(2), uint8(CommandProxy), mapped, uint16(1), mapped, uint16(2), []byte("\x03\x04\x00\x00\x00\x00"), false)
	f.Add(uint8(1), uint8(CommandProxy), v6a, uint16(1), v4b, uint16(443), []byte(nil), false)
	f.Add(uint8(2), uint8(CommandLocal), []byte(nil), uint16(0), []byte(nil), uint16(0), []byte("\x04\x03\x00\x00\x00\x03\x04abcd"), true)
	f.Fuzz(func(t *testing.T, version, command uint8, src []byte, sport uint16, dst []byte, dport uint16, tlvBytes []byte, addChecksum bool) {
		// tlvBytes is a list of (type, length, value), the length cut to what is left.
		var list []TLV
		for s := tlvBytes; len(s) >= 2; {
			typ, l := TLVType(s[0]), min(int(s[1]), len(s)-2)
			list = append(list, TLV{typ, string(s[2 : 2+l])})
			s = s[2+l:]
		}
		tlvs := mustTLVs(list...)
		sa, _ := netip.AddrFromSlice(src)
		da, _ := netip.AddrFromSlice(dst)
		h := Header{Version: version, Command: Command(command), Source: netip.AddrPortFrom(sa, sport),
			Destination: netip.AddrPortFrom(da, dport), TLVs: tlvs, AddChecksum: addChecksum}
		if !sa.IsValid() {
			h.Source = netip.AddrPort{}
		}
		if !da.IsValid() {
			h.Destination = netip.AddrPort{}
		}

		// What a receiver makes of the TLVs, counting the checksum the
		// writer adds when the TLVs hold none of 4 bytes.
		crcs, fourByteCRC, ssls, badTLV, badCRC := 0, false, 0, false, false
		for _, tl := range list {
			switch tl.Type {
			case TLVCRC32C:
				crcs++
				fourByteCRC = fourByteCRC || len(tl.Value) == 4
				badCRC = badCRC || len(tl.Value) != 4
			case TLVUniqueID:
				badTLV = badTLV || len(tl.Value) > maxUniqueID
			case TLVSSL:
				ssls++
				_, err := parseSSL(tl.Value)
				badTLV = badTLV || err != nil
			}
		}
		added := addChecksum && !fourByteCRC
		if added {
			crcs++
		}
		badCRC = badCRC || crcs > 1
		badTLV = badTLV || badCRC || ssls > 1

		addrLen := 0
		s, d := h.Source.Addr().Unmap(), h.Destination.Addr().Unmap()
		if h.Command == CommandProxy {
			addrLen = 36
			if s.Is4() && d.Is4() {
				addrLen = 12
			}
		}
		extra := 0
		if added {
			extra = 7
		}
		wantErr := (version != 1 && version != 2) ||
			(version == 1 && (tlvs.Len() > 0 || addChecksum)) ||
			(h.Command != CommandProxy && h.Command != CommandLocal) ||
			(h.Command == CommandProxy && (!h.Source.IsValid() || !h.Destination.IsValid())) ||
			(version == 2 && addrLen+tlvs.Len()+extra > 0xffff)

		b, err := h.Format()
		if err != nil {
			if !errors.Is(err, ErrInvalidHeaderValue) || !wantErr {
				t.Fatalf("Format(%+v): %v", h, err)
			}
			return
		}
		if wantErr {
			t.Fatalf("Format(%+v) wrote %q", h, b)
		}
		got, n, err := ParseHeader(b)
		if version == 2 && h.Command == CommandProxy && badTLV {
			if !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("a header with a TLV that breaks a rule parsed: %+v, %v", got, err)
			}
			return
		}
		// A LOCAL header's TLVs are discarded, but its checksum is verified.
		if version == 2 && h.Command == CommandLocal && badCRC {
			if !errors.Is(err, ErrChecksum) {
				t.Fatalf("a LOCAL header with a checksum that breaks a rule parsed: %+v, %v", got, err)
			}
			return
		}
		if err != nil || n != len(b) {
			t.Fatalf("ParseHeader(Format(%+v)) = %+v, %d, %v", h, got, n, err)
		}
		want := Header{Version: version, Command: h.Command}
		if h.Command == CommandProxy {
			want.Source = netip.AddrPortFrom(s, h.Source.Port())
			want.Destination = netip.AddrPortFrom(d, h.Destination.Port())
			if version == 2 {
				if added {
					list = append(list, TLV{TLVCRC32C, ""})
				}
				// The checksum's value is the written header's, which
				// ParseHeader verified; take it from there.
				sum, _ := got.TLVs.Lookup(TLVCRC32C)
				for i := range list {
					if list[i].Type == TLVCRC32C {
						list[i].Value = sum
					}
				}
				want.TLVs = mustTLVs(list...)
			}
		}
		if got != want {
			t.Fatalf("ParseHeader(Format(%+v)) = %+v, want %+v", h, got, want)
		}
	})
}
