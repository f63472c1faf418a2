package middleware_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
)

// A TCP relay behind a PROXY-protocol load balancer passes the client it
// verified on to its backend in a PROXY v2 header of its own.
func ExampleDialForward() {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1")}) // the load balancer
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: trust})
	if err != nil {
		log.Fatal(err)
	}
	ln := middleware.NewListener(pl, trust)
	defer ln.Close()

	// The backend reads the relay's PROXY header.
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	backend, err := proxyproto.NewListener(bl, proxyproto.Config{Trust: trust}) // the relay, from 127.0.0.1
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	// The load balancer's side.
	go func() {
		c, err := proxyproto.DialContext(context.Background(), nil, "tcp", ln.Addr().String(), proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy,
			Source:      netip.MustParseAddrPort("198.51.100.7:5555"),
			Destination: netip.MustParseAddrPort("192.0.2.10:1883"),
		})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "hello\n")
		io.Copy(io.Discard, c)
	}()

	// The relay: one connection, relayed one way for the example.
	c, err := ln.Accept()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	up, err := middleware.DialForward(context.Background(), c, nil, "tcp", backend.Addr().String())
	if err != nil {
		log.Fatal(err) // an unverified client: nothing is dialled
	}
	defer up.Close()
	go io.Copy(up, c)

	b, err := backend.Accept()
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	f, _ := proxyproto.FactsFromConn(b)
	line, _ := bufio.NewReader(b).ReadString('\n')
	fmt.Println("backend sees", f.Source, "->", f.Destination, "then", line)
	// Output:
	// backend sees 198.51.100.7:5555 -> 192.0.2.10:1883 then hello
}
