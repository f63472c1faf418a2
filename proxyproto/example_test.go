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

// A listener that believes PROXY headers from the load balancer only. Here
// the "load balancer" is a client on loopback that writes a v2 header.
func ExampleNewListener() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{
		TrustedUpstreams:  clientip.MustParsePrefixSet("127.0.0.1"), // your load balancers
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

	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")})
	res, _ := resolver.Resolve(f.Transport(), nil)
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
		TrustedUpstreams: clientip.MustParsePrefixSet("127.0.0.1"),
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
	ln, err := proxyproto.NewListener(inner, proxyproto.Config{TrustedUpstreams: clientip.MustParsePrefixSet("127.0.0.1")})
	if err != nil {
		log.Fatal(err)
	}
	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")})
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
