package proxyproto_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// A listener that believes PROXY headers from the load balancer only, and a
// resolver that reads them: one trust configuration for both. Here the "load
// balancer" is a client on loopback that writes a v2 header.
func ExampleNewListener() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	// The chain's one trust source: your load balancers.
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")})
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:             trust,
		ReadHeaderTimeout: 5 * time.Second,
		OnReject: func(r proxyproto.Rejection) {
			log.Printf("refused connection: %v", r.Err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	go func() {
		c, err := proxyproto.DialContext(context.Background(), nil, "tcp", ln.Addr().String(), proxyproto.Header{
			Version:     2,
			Command:     proxyproto.CommandProxy,
			Source:      netip.MustParseAddrPort("203.0.113.7:51000"),
			Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
		})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "hello")
		io.Copy(io.Discard, c)
	}()

	c, err := ln.Accept()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	f, _ := proxyproto.FactsFromConn(c)
	fmt.Println("remote addr:", c.RemoteAddr())
	fmt.Println("socket peer:", f.Peer.Addr())
	fmt.Println("header:", f.Version, f.Command, f.Source, "->", f.Destination)

	// The resolver the listener judged the connection with.
	res, _ := proxyproto.ResolverFromConn(c, trust).Resolve(f.Transport(), nil)
	fmt.Println("client:", res.Client, "from", res.Source)
	// Output:
	// remote addr: 203.0.113.7:51000
	// socket peer: 127.0.0.1
	// header: 2 proxy 203.0.113.7:51000 -> 192.0.2.10:8883
	// client: 203.0.113.7 from proxy-protocol
}

func ExampleWriteHeader() {
	h := proxyproto.Header{
		Version:     1,
		Command:     proxyproto.CommandProxy,
		Source:      netip.MustParseAddrPort("203.0.113.7:51000"),
		Destination: netip.MustParseAddrPort("192.0.2.10:443"),
	}
	var buf bytes.Buffer
	proxyproto.WriteHeader(&buf, h)
	fmt.Printf("%q\n", buf.String())

	h.Version = 2
	h.TLVs, _ = proxyproto.NewTLVs(proxyproto.TLV{Type: proxyproto.TLVAuthority, Value: "example.com"})
	h.AddChecksum = true
	buf.Reset()
	proxyproto.WriteHeader(&buf, h)
	parsed, n, err := proxyproto.ParseHeader(buf.Bytes())
	authority, _ := parsed.TLVs.Authority()
	fmt.Println(n, "bytes;", parsed.Source, authority, parsed.TLVs, err)
	// Output:
	// "PROXY TCP4 203.0.113.7 192.0.2.10 51000 443\r\n"
	// 49 bytes; 203.0.113.7:51000 example.com authority,crc32c <nil>
}

// A TLS server behind a PROXY listener, as for MQTT over TLS behind a load
// balancer: the header travels in clear text before the handshake, so TLS
// wraps the PROXY listener, and the connection's layers are found under the
// *tls.Conn.
func Example_tlsServer() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	pln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}),
	})
	if err != nil {
		log.Fatal(err)
	}
	ln := tls.NewListener(pln, &tls.Config{Certificates: []tls.Certificate{exampleCert()}})
	defer ln.Close()

	// The load balancer's side: a PROXY header, then the client's TLS bytes.
	go func() {
		raw, err := proxyproto.DialContext(context.Background(), nil, "tcp", ln.Addr().String(), proxyproto.Header{
			Version:     2,
			Command:     proxyproto.CommandProxy,
			Source:      netip.MustParseAddrPort("198.51.100.23:40000"),
			Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
		})
		if err != nil {
			log.Fatal(err)
		}
		c := tls.Client(raw, &tls.Config{ServerName: "mqtt.example.com", InsecureSkipVerify: true})
		defer c.Close()
		fmt.Fprintln(c, "CONNECT")
		io.Copy(io.Discard, c)
	}()

	c, err := ln.Accept()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	tc := c.(*tls.Conn)
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		log.Fatal(err)
	}
	line, _ := bufio.NewReader(tc).ReadString('\n')
	f, _ := proxyproto.FactsFromConn(tc)
	fmt.Print("got ", line)
	fmt.Println("SNI:", tc.ConnectionState().ServerName)
	fmt.Println("client:", f.Source, "via load balancer", f.Peer.Addr())
	// Output:
	// got CONNECT
	// SNI: mqtt.example.com
	// client: 198.51.100.23:40000 via load balancer 127.0.0.1
}

// ConnContext hands each connection's layers to HTTP handlers, where
// clientip's ResolveRequest finds them.
func ExampleConnContext() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")})
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: resolver})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		ConnContext: proxyproto.ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, err := resolver.ResolveRequest(r)
			if err != nil {
				http.Error(w, "cannot tell who you are", http.StatusBadRequest)
				return
			}
			fmt.Fprintln(w, "client", res.Client, "from", res.Source, "via", res.Via, "peer", res.Peer.Addr())
		}),
	}
	go srv.Serve(ln)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return proxyproto.DialContext(ctx, nil, network, addr, proxyproto.Header{
				Version: 1, Command: proxyproto.CommandProxy,
				Source:      netip.MustParseAddrPort("203.0.113.7:51000"),
				Destination: netip.MustParseAddrPort("192.0.2.10:80"),
			})
		},
	}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// client 203.0.113.7 from proxy-protocol via 127.0.0.1 peer 127.0.0.1
}

// FactsFromContext gives an HTTP handler what clientip does not carry: the
// header's TLVs. Here a service reached through AWS PrivateLink admits only
// one VPC endpoint, which the load balancer names in its PROXY header.
func ExampleFactsFromContext() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}),
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		ConnContext: proxyproto.ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, _ := proxyproto.FactsFromContext(r.Context())
			if id, _ := f.TLVs.AWSVPCEndpointID(); id != "vpce-08d2bf15fac5001c9" {
				http.Error(w, "endpoint not admitted", http.StatusForbidden)
				return
			}
			fmt.Fprintln(w, "admitted", f.Source.Addr())
		}),
	}
	go srv.Serve(ln)
	defer srv.Close()

	get := func(endpoint string) {
		h := proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy,
			Source:      netip.MustParseAddrPort("10.20.0.7:51000"),
			Destination: netip.MustParseAddrPort("10.0.0.10:443"),
		}
		h.TLVs, _ = proxyproto.NewTLVs(proxyproto.TLV{Type: proxyproto.TLVAWS, Value: "\x01" + endpoint})
		client := &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return proxyproto.DialContext(ctx, nil, network, addr, h)
			},
		}}
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	get("vpce-08d2bf15fac5001c9")
	get("vpce-0123456789abcdef0")
	// Output:
	// 200 admitted 10.20.0.7
	// 403 endpoint not admitted
}

// The optional-header mode, for a health endpoint probed both by a load
// balancer that puts a PROXY header in front of its health checks and by
// checkers that send none: every connection is served, and a header is read,
// validated and discarded, believed only from a trusted upstream (here none,
// since a health answer does not depend on who asks).
func ExampleConfig_optionalHeader() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Headerless: proxyproto.HeaderlessAllow, // a trusted upstream may send no header
		Untrusted:  proxyproto.UntrustedIgnore, // anyone else's header is discarded
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	checks := []struct {
		name   string
		header *proxyproto.Header
	}{
		{"v2 LOCAL (AWS NLB)", &proxyproto.Header{Version: 2, Command: proxyproto.CommandLocal}},
		{"v1 PROXY (HAProxy)", &proxyproto.Header{Version: 1, Command: proxyproto.CommandProxy,
			Source: netip.MustParseAddrPort("10.0.0.2:51234"), Destination: netip.MustParseAddrPort("10.0.0.11:32123")}},
		{"no header", nil},
	}
	for _, check := range checks {
		go func() {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				log.Fatal(err)
			}
			defer c.Close()
			if check.header != nil {
				proxyproto.WriteHeader(c, *check.header)
			}
			io.WriteString(c, "GET /healthz\n")
			io.Copy(io.Discard, c)
		}()
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		f, _ := proxyproto.FactsFromConn(c)
		fmt.Printf("%s: read %q, header believed: %v\n", check.name, line, f.Version != 0)
		c.Close()
	}
	fmt.Println("headers discarded:", ln.Stats().Ignored)
	// Output:
	// v2 LOCAL (AWS NLB): read "GET /healthz\n", header believed: false
	// v1 PROXY (HAProxy): read "GET /healthz\n", header believed: false
	// no header: read "GET /healthz\n", header believed: false
	// headers discarded: 2
}

// Pending budgets: the load balancers' connections and everyone else's wait
// for their headers in separate budgets, and a flood of untrusted
// connections is shed on arrival rather than queued in front of the load
// balancers'.
func ExampleConfig_pendingBudgets() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	lbs := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24")}) // the load balancers
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:               lbs,
		MaxPending:          4096, // theirs; over it they wait in the backlog
		MaxPendingUntrusted: 1024, // anyone else's; over it they are closed
		MaxPendingPerSource: 1,    // one untrusted address's (or IPv6 /64's)
		OnAcceptError: func(err error, retryIn time.Duration) {
			log.Printf("accept: %v (retrying in %v)", err, retryIn)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go ln.Accept()

	// A client that sends nothing holds its address's one slot; its next
	// connection is closed at once.
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()
	second, err := net.Dial("tcp", ln.Addr().String())
	if err == nil {
		_, err = second.Read(make([]byte, 1))
		second.Close()
	}
	fmt.Println("second connection closed:", err != nil)
	st := ln.Stats()
	fmt.Println("pending untrusted:", st.PendingUntrusted)
	fmt.Println("shed:", st.Shed[proxyproto.ShedSourceBudget], proxyproto.ShedSourceBudget)
	// Output:
	// second connection closed: true
	// pending untrusted: 1
	// shed: 1 source_budget
}

// OnReject runs at most MaxOnReject calls at once, so that a flood of refused
// connections cannot pile up goroutines behind a slow callback (here a stuck
// log sink); a rejection beyond them is counted in Stats.Unreported.
func ExampleConfig_maxOnReject() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	stuck := make(chan struct{})
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:       clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}),
		MaxOnReject: 1,
		OnReject:    func(proxyproto.Rejection) { <-stuck },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	defer close(stuck)
	go ln.Accept()

	// The load balancer's connections without a header are refused.
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			log.Fatal(err)
		}
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		c.Read(make([]byte, 1)) // until the listener closes it
		c.Close()
	}
	st := ln.Stats()
	fmt.Println("refused:", st.TotalRejected(), "unreported:", st.Unreported)
	// Output:
	// refused: 3 unreported: 2
}

// exampleCert returns a throwaway self-signed certificate.
func exampleCert() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		DNSNames:     []string{"mqtt.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A backend behind a load balancer that terminates TLS and forwards the
// client's certificate in the PROXY header's SSL TLV: the certificate is
// believed only because the header came from a trusted upstream, and is
// verified against the backend's own client CA. Here the "load balancer" is
// a client on loopback that writes the header with this package's writer.
func ExampleSSL_VerifyCertificate() {
	// The backend's client CA and a device certificate it issued.
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Fleet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	devKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	devDER, _ := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "device-7"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, &devKey.PublicKey, caKey)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca)

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	lbs := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}) // the load balancers
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:          lbs,
		MaxHeaderBytes: proxyproto.MaxHeaderBytesLimit, // room for long certificates
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	// The load balancer's side: it terminated the client's TLS, verified the
	// certificate, and passes what it learnt on.
	go func() {
		ssl := proxyproto.SSL{
			Client:  proxyproto.SSLClientTLS | proxyproto.SSLClientCertConn,
			Version: "TLSv1.3",
			CN:      "device-7",
			CertDER: string(devDER),
		}
		tlvs, err := proxyproto.NewTLVs(ssl.TLV())
		if err != nil {
			log.Fatal(err)
		}
		c, err := proxyproto.DialContext(context.Background(), nil, "tcp", ln.Addr().String(), proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy, TLVs: tlvs,
			Source:      netip.MustParseAddrPort("203.0.113.7:51000"),
			Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
		})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()

	c, err := ln.Accept()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	f, _ := proxyproto.FactsFromConn(c)
	ssl, ok := f.TLVs.SSL()
	if !ok || !ssl.CertVerified() {
		fmt.Println("refused: no verified client certificate")
		return
	}
	chains, err := ssl.VerifyCertificate(x509.VerifyOptions{Roots: clientCAs})
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println("client:", f.Source.Addr(), "over", ssl.Version)
	fmt.Println("identity:", chains[0][0].Subject.CommonName, "issued by", chains[0][1].Subject.CommonName)

	// The same certificate against another CA.
	_, err = ssl.VerifyCertificate(x509.VerifyOptions{Roots: x509.NewCertPool()})
	fmt.Println(errors.Is(err, proxyproto.ErrClientCertUntrusted))
	// Output:
	// client: 203.0.113.7 over TLSv1.3
	// identity: device-7 issued by Fleet CA
	// true
}
