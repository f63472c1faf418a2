package trafficpolicy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// v2Header builds a PROXY protocol v2 header.
func v2Header(verCmd, fam byte, payload []byte) []byte {
	b := append([]byte(nil), proxyV2Sig...)
	b = append(b, verCmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(payload)))
	return append(b, payload...)
}

// awsNLBHealthCheckHeader is what an AWS NLB with proxy protocol v2 sends in
// front of a health check (tcpdump in kubernetes/kubernetes#57250): command
// LOCAL, family TCP over IPv4, 84 bytes of TLVs (CRC32C, then NOOP padding)
// and no address block.
func awsNLBHealthCheckHeader() []byte {
	payload := []byte{0x03, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef} // PP2_TYPE_CRC32C
	payload = append(payload, 0x04, 0x00, 74)                   // PP2_TYPE_NOOP, 74 bytes of padding
	payload = append(payload, make([]byte, 74)...)
	return v2Header(0x20, 0x11, payload)
}

func v2ProxyTCP4() []byte {
	return v2Header(0x21, 0x11, []byte{203, 0, 113, 7, 10, 0, 0, 11, 0x9c, 0x41, 0x7b, 0x7b})
}

func TestProxyHeaderLen(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		n       int
		done    bool
		wantErr bool
	}{
		{"empty: need more", nil, 0, false, false},
		{"HTTP request: no header", []byte("GET /healthz HTTP/1.1\r\n"), 0, true, false},
		{"POST shares a P with PROXY", []byte("POST / HTTP/1.1\r\n"), 0, true, false},
		{"PUT", []byte("PUT"), 0, true, false},
		{"partial v1 signature: need more", []byte("PRO"), 0, false, false},
		{"partial v2 signature: need more", []byte("\r\n\r\n\x00"), 0, false, false},
		{"v1 TCP4", []byte("PROXY TCP4 203.0.113.7 10.0.0.11 40001 31883\r\nGET"), 46, true, false},
		{"v1 TCP6", []byte("PROXY TCP6 2001:db8::7 2001:db8::b 40001 31883\r\n"), 48, true, false},
		{"v1 UNKNOWN (HAProxy health checks of non-TCP families)", []byte("PROXY UNKNOWN\r\n"), 15, true, false},
		{"v1 incomplete: need more", []byte("PROXY TCP4 203.0.113.7 "), 0, false, false},
		{"v1 ends with LF only", []byte("PROXY TCP4 203.0.113.7 10.0.0.11 40001 31883\n"), 0, false, true},
		{"v1 longer than 107 bytes", []byte("PROXY UNKNOWN " + strings.Repeat("x", 100)), 0, false, true},
		{"v1 unknown protocol", []byte("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"), 0, false, true},
		{"v2 LOCAL from an AWS NLB health check", awsNLBHealthCheckHeader(), 100, true, false},
		{"v2 PROXY TCP4", v2ProxyTCP4(), 28, true, false},
		{"v2 LOCAL UNSPEC, zero length", v2Header(0x20, 0x00, nil), 16, true, false},
		{"v2 header incomplete: need more", v2ProxyTCP4()[:20], 0, false, false},
		{"v2 preamble incomplete: need more", v2ProxyTCP4()[:14], 0, false, false},
		{"v2 version 3", v2Header(0x31, 0x11, nil), 0, false, true},
		{"v2 command 2", v2Header(0x22, 0x11, nil), 0, false, true},
		{"v2 undefined transport 0x13", v2Header(0x21, 0x13, nil), 0, false, true},
		{"v2 longer than 4096 bytes", append(v2Header(0x21, 0x11, nil)[:14], 0x10, 0x01), 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, done, err := proxyHeaderLen(tt.in)
			if (err != nil) != tt.wantErr || n != tt.n || done != tt.done {
				t.Fatalf("proxyHeaderLen = %d, %v, %v; want %d, %v, err %v", n, done, err, tt.n, tt.done, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadProxyHeader) {
				t.Fatalf("err = %v, want ErrBadProxyHeader", err)
			}
		})
	}
}

func FuzzProxyHeaderLen(f *testing.F) {
	for _, s := range [][]byte{nil, []byte("GET / HTTP/1.1\r\n"), []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), awsNLBHealthCheckHeader(), v2ProxyTCP4()} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, done, err := proxyHeaderLen(b)
		if err != nil {
			if done || n != 0 || !inHeader(b) {
				t.Fatalf("error %v with n=%d done=%v on %q", err, n, done, b)
			}
			return
		}
		if n < 0 || n > len(b) || n > 16+proxyV2MaxLen || (n > 0 && !done) {
			t.Fatalf("n=%d done=%v on %q", n, done, b)
		}
		// Done with a header only after a signature; done without one only
		// when b cannot start a signature; otherwise b is still a prefix of one.
		prefix := bytes.HasPrefix(proxyV1Sig, b) || bytes.HasPrefix(proxyV2Sig, b)
		switch {
		case done && n > 0 && !inHeader(b),
			done && n == 0 && (inHeader(b) || prefix),
			!done && !inHeader(b) && !prefix:
			t.Fatalf("n=%d done=%v on %q", n, done, b)
		}
		if bytes.HasPrefix(b, proxyV1Sig) && n > proxyV1MaxLen {
			t.Fatalf("v1 header of %d bytes", n)
		}
	})
}

// serveHealth serves a HealthServer with one ready endpoint on an
// OptionalProxyHeader listener on loopback and returns its address.
func serveHealth(t *testing.T, timeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs, _ := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r})
	srv := &http.Server{Handler: hs, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(OptionalProxyHeader(ln, timeout))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestOptionalProxyHeaderHealthCheck pins that a health check with a PROXY
// header in front (an AWS NLB v2 LOCAL, HAProxy v1) and one without get the
// same correct answer from the same port.
func TestOptionalProxyHeaderHealthCheck(t *testing.T) {
	addr := serveHealth(t, 2*time.Second)
	request := []byte("GET /healthz HTTP/1.1\r\nHost: 10.0.0.11:32123\r\nConnection: close\r\n\r\n")
	tests := []struct {
		name   string
		header []byte
		split  bool // header and request in separate writes
		want   int
	}{
		{"no header", nil, false, 200},
		{"AWS NLB v2 LOCAL health check", awsNLBHealthCheckHeader(), false, 200},
		{"AWS NLB v2 LOCAL, request in a second segment", awsNLBHealthCheckHeader(), true, 200},
		{"v2 PROXY TCP4", v2ProxyTCP4(), false, 200},
		{"v1 TCP4 (HAProxy send-proxy check)", []byte("PROXY TCP4 10.0.0.2 10.0.0.11 51234 32123\r\n"), false, 200},
		{"v1 UNKNOWN, split", []byte("PROXY UNKNOWN\r\n"), true, 200},
		{"malformed v2 version: refused", v2Header(0x31, 0x11, nil), false, 400},
		{"v1 without CRLF: refused", []byte("PROXY TCP4 10.0.0.2 10.0.0.11 51234 32123\n"), false, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if tt.split {
				c.Write(tt.header)
				c.Write(request)
			} else {
				c.Write(append(append([]byte(nil), tt.header...), request...))
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tt.want, body)
			}
			if tt.want == 200 && !bytes.Contains(body, []byte(`"localEndpoints": 1`)) {
				t.Fatalf("body %q", body)
			}
		})
	}
}

// TestOptionalProxyHeaderSilentClient pins the bounded wait: a connection
// that sends nothing (a plain TCP health check) is closed after the header
// timeout, without an answer.
func TestOptionalProxyHeaderSilentClient(t *testing.T) {
	addr := serveHealth(t, 100*time.Millisecond)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read = %d, %v; want the server to close the connection", n, err)
	}
}

// TestOptionalProxyHeaderDeadlines pins that the caller's read deadline is
// honoured during the header read and restored after it.
func TestOptionalProxyHeaderDeadlines(t *testing.T) {
	t.Run("restored after the header", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		c := &proxyConn{Conn: server, timeout: time.Hour}
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		go client.Write(v2ProxyTCP4()) // the header alone, then silence
		_, err := c.Read(make([]byte, 8))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Read = %v, want the caller's deadline to expire", err)
		}
	})
	t.Run("earlier caller deadline bounds the header read", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		c := &proxyConn{Conn: server, timeout: time.Hour}
		c.SetDeadline(time.Now().Add(50 * time.Millisecond))
		go client.Write([]byte("PROXY TCP4 ")) // a partial header, then silence
		_, err := c.Read(make([]byte, 8))
		if !errors.Is(err, ErrBadProxyHeader) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read = %v, want ErrBadProxyHeader wrapping the deadline", err)
		}
	})
	t.Run("data after the header is delivered", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		c := &proxyConn{Conn: server, timeout: time.Second}
		go client.Write(append(awsNLBHealthCheckHeader(), "hello"...))
		got := make([]byte, 5)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "hello" {
			t.Fatalf("read %q, %v", got, err)
		}
	})
	t.Run("a malformed line then EOF reports the malformation", func(t *testing.T) {
		server, client := net.Pipe()
		c := &proxyConn{Conn: server, timeout: time.Second}
		go func() { client.Write([]byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n")); client.Close() }()
		_, err := c.Read(make([]byte, 8))
		if !errors.Is(err, ErrBadProxyHeader) || !strings.Contains(err.Error(), "CRLF") {
			t.Fatalf("Read = %v, want the CRLF rule", err)
		}
	})
	t.Run("a lone P then EOF is data", func(t *testing.T) {
		server, client := net.Pipe()
		c := &proxyConn{Conn: server, timeout: time.Second}
		go func() { client.Write([]byte("P")); client.Close() }()
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "P" {
			t.Fatalf("read %q, %v", got, err)
		}
	})
}
