package proxyproto

import (
	"crypto/x509"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// serveEach accepts from l until it is closed and handles each connection in
// its own goroutine, closing it afterwards.
func serveEach(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// benchServer serves l: each connection reads one byte, answers one byte and
// waits for the client to close.
func benchServer(l net.Listener) {
	serveEach(l, func(c net.Conn) {
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		c.Write(b)
		c.Read(b) // until the client's reset
	})
}

// benchRoundTrip opens one connection, sends payload (a header and one
// byte, or just the byte), reads the answer and resets the connection
// (linger 0, so that benchmarks leave no TIME_WAIT behind).
func benchRoundTrip(b *testing.B, d *net.Dialer, addr string, payload []byte) {
	c, err := d.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	c.(*net.TCPConn).SetLinger(0)
	if _, err := c.Write(payload); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	c.Close()
}

type acceptCase struct {
	name    string
	wrap    bool // serve through a proxyproto Listener
	payload []byte
}

func acceptCases(b *testing.B) []acceptCase {
	h, err := header(2, "203.0.113.7:4444", "192.0.2.10:8883").Format()
	if err != nil {
		b.Fatal(err)
	}
	return []acceptCase{
		// Plain TCP through the same server code, no PROXY listener.
		{"plain", false, []byte{'x'}},
		// A trusted upstream sending a v2 header with the first byte.
		{"v2", true, append(h, 'x')},
		// A direct (untrusted) client without a header through the PROXY listener.
		{"direct", true, []byte{'x'}},
	}
}

func startBench(b *testing.B, tc acceptCase) (addr string, d *net.Dialer) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	if err != nil {
		b.Fatal(err)
	}
	var l net.Listener = inner
	if tc.wrap {
		if l, err = NewListener(inner, trustedLB()); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { l.Close() })
	go benchServer(l)
	src := lbAddr
	if tc.name == "direct" {
		src = "127.0.0.66"
	}
	return l.Addr().String(), &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
}

// BenchmarkAccept measures connections per second, one client at a time:
// dial, send, receive one byte, close.
func BenchmarkAccept(b *testing.B) {
	for _, tc := range acceptCases(b) {
		b.Run(tc.name, func(b *testing.B) {
			addr, d := startBench(b, tc)
			b.ReportAllocs()
			for b.Loop() {
				benchRoundTrip(b, d, addr, tc.payload)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}

// BenchmarkAcceptParallel is BenchmarkAccept with GOMAXPROCS concurrent clients.
func BenchmarkAcceptParallel(b *testing.B) {
	for _, tc := range acceptCases(b) {
		b.Run(tc.name, func(b *testing.B) {
			addr, d := startBench(b, tc)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchRoundTrip(b, d, addr, tc.payload)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}

func parseCases(b *testing.B) []struct {
	name string
	in   []byte
} {
	v1, _ := header(1, "203.0.113.7:4444", "192.0.2.10:8883").Format()
	v2b, _ := header(2, "203.0.113.7:4444", "192.0.2.10:8883").Format()
	h := header(2, "[2001:db8::7]:4444", "[2001:db8::10]:8883")
	h.TLVs = mustTLVs(TLV{TLVAuthority, "mqtt.example.com"}, TLV{TLVUniqueID, "0123456789abcdef0123456789abcdef"},
		SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-0042", Cipher: "TLS_AES_128_GCM_SHA256"}.TLV())
	h.AddChecksum = true
	tl, _ := h.Format()
	ca := newTestCA(b, "Fleet CA")
	h.TLVs = mustTLVs(SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-0042", Cipher: "TLS_AES_128_GCM_SHA256",
		CertDER: string(ca.client(b, "device-0042").Certificate[0])}.TLV())
	cert, _ := h.Format()
	return []struct {
		name string
		in   []byte
	}{{"v1", v1}, {"v2", v2b}, {"v2-tlvs-crc", tl}, {"v2-ssl-cert", cert}}
}

// BenchmarkParse measures framing, parsing and validating one header: the
// per-connection cost of the header.
func BenchmarkParse(b *testing.B) {
	for _, tc := range parseCases(b) {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.in)))
			for b.Loop() {
				if _, _, err := ParseHeader(tc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseParallel(b *testing.B) {
	for _, tc := range parseCases(b) {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := ParseHeader(tc.in); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkHostile measures refusing garbage: a v2 header at the size limit
// whose checksum fails, and an over-long v1 line.
func BenchmarkHostile(b *testing.B) {
	big := flipLast(withCRC(v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), tlv(0x04, make([]byte, MaxV2Payload-12-3-7)))))
	long := []byte("PROXY TCP4 " + string(make([]byte, 200)))
	for _, tc := range []struct {
		name string
		in   []byte
	}{{"v2-4KiB-bad-crc", big}, {"v1-too-long", long}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.in)))
			for b.Loop() {
				if _, _, err := ParseHeader(tc.in); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

func BenchmarkTLVAccessors(b *testing.B) {
	tl := mustTLVs(TLV{TLVAuthority, "mqtt.example.com"}, TLV{TLVUniqueID, "id"}, TLV{TLVAWS, "\x01vpce-08d2bf15fac5001c9"})
	b.Run("Authority", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tl.Authority()
		}
	})
	b.Run("AWSVPCEndpointID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tl.AWSVPCEndpointID()
		}
	})
	ssl := mustTLVs(SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-0042", Cipher: "TLS_AES_128_GCM_SHA256"}.TLV())
	b.Run("SSL", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ssl.SSL()
		}
	})
}

// BenchmarkSSLVerifyCertificate measures what a backend pays per connection
// to hold a forwarded client certificate to its own CA: parsing the DER and
// verifying a one-link chain (ECDSA P-256).
func BenchmarkSSLVerifyCertificate(b *testing.B) {
	ca := newTestCA(b, "Fleet CA")
	s := SSL{Client: SSLClientTLS | SSLClientCertConn, Version: "TLSv1.3", CN: "device-0042", CertDER: string(ca.client(b, "device-0042").Certificate[0])}
	opts := x509.VerifyOptions{Roots: ca.pool}
	b.Run("Certificate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Certificate(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("VerifyCertificate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.VerifyCertificate(opts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAcceptInterleaved alternates a plain TCP connection, a v2 PROXY
// connection from the trusted upstream and a direct connection from an
// untrusted peer (which takes a slot of the untrusted budget) on every
// iteration, each to its own server, and reports the median connection rate
// of each and their ratios to plain. On a shared machine the neighbours' load
// then hits all sides alike, which separate sub-benchmarks cannot promise.
func BenchmarkAcceptInterleaved(b *testing.B) {
	cases := acceptCases(b)
	plain, v2c, direct := cases[0], cases[1], cases[2]
	pAddr, pDial := startBench(b, plain)
	vAddr, vDial := startBench(b, v2c)
	dAddr, dDial := startBench(b, direct)
	var pd, vd, dd []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		benchRoundTrip(b, pDial, pAddr, plain.payload)
		t1 := time.Now()
		benchRoundTrip(b, vDial, vAddr, v2c.payload)
		t2 := time.Now()
		benchRoundTrip(b, dDial, dAddr, direct.payload)
		pd = append(pd, t1.Sub(t0))
		vd = append(vd, t2.Sub(t1))
		dd = append(dd, time.Since(t2))
	}
	pm, vm, dm := median(pd), median(vd), median(dd)
	b.ReportMetric(float64(time.Second)/float64(pm), "plain-conns/s")
	b.ReportMetric(float64(time.Second)/float64(vm), "v2-conns/s")
	b.ReportMetric(float64(time.Second)/float64(dm), "direct-conns/s")
	b.ReportMetric(float64(pm)/float64(vm), "v2/plain")
	b.ReportMetric(float64(pm)/float64(dm), "direct/plain")
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
