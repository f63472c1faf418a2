package clientip_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"

	"github.com/sourceip/sourceip/clientip"
)

// A resolver for an application behind reverse proxies in 10.0.0.0/8 that
// append X-Forwarded-For.
func ExampleNew() {
	r, err := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	if err != nil {
		panic(err)
	}
	// A client forged the left of the header; the proxy at 10.0.0.2 appended
	// the real address, and the proxy at 10.0.0.1 appended 10.0.0.2.
	res, err := r.Resolve(
		clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")},
		http.Header{"X-Forwarded-For": {"127.0.0.1, 198.51.100.7, 10.0.0.2"}},
	)
	fmt.Println(res.Client, res.Source, res.Hop, err)
	fmt.Println(res)
	// Output:
	// 198.51.100.7 x-forwarded-for 2 <nil>
	// 198.51.100.7 from x-forwarded-for hop 2 via 10.0.0.2 (peer 10.0.0.1:40000)
}

// Resolve fails closed: a chain that cannot be read is an error that says
// where, never a guess.
func ExampleResolver_Resolve() {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	peer := clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")}
	for _, xff := range []string{
		"198.51.100.7",          // the client
		"198.51.100.7, garbage", // a hop the walk needs is malformed
		"10.0.0.5, 10.0.0.6",    // every hop is a trusted proxy
	} {
		res, err := r.Resolve(peer, http.Header{"X-Forwarded-For": {xff}})
		switch {
		case err == nil:
			fmt.Println("client", res.Client)
		case errors.Is(err, clientip.ErrAllTrusted):
			fmt.Println("internal origin, outermost hop", res.Via)
		default:
			fmt.Println("refused:", err)
		}
	}
	// A direct client's headers are never read.
	res, _ := r.Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("203.0.113.9:5000")},
		http.Header{"X-Forwarded-For": {"127.0.0.1"}})
	fmt.Println("client", res.Client, "from", res.Source)
	// Output:
	// client 198.51.100.7
	// refused: clientip: malformed address (hop 1 in X-Forwarded-For: "garbage")
	// internal origin, outermost hop 10.0.0.5
	// client 203.0.113.9 from socket
}

// RFC 7239 Forwarded, with quoted IPv6 nodes and obfuscated identifiers.
func ExampleConfig_forwarded() {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "Forwarded",
	})
	peer := clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")}
	for _, fwd := range []string{
		`for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2`,
		`for=192.0.2.60;proto=http;by=203.0.113.43`,
		`for=198.51.100.7, for=_hidden`,
	} {
		res, err := r.Resolve(peer, http.Header{"Forwarded": {fwd}})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(res.Client, "hop", res.Hop)
	}
	// Output:
	// 2001:db8:cafe::17 hop 2
	// 192.0.2.60 hop 1
	// clientip: hop address is unknown (hop 1 in Forwarded: "for=_hidden")
}

// Behind a load balancer that sends PROXY protocol, the PROXY source is the
// client and the load balancer stays visible as the socket layer. Under
// Kubernetes externalTrafficPolicy: Cluster, node addresses are flagged.
func ExampleConfig_masquerade() {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("192.0.2.10"),
		Masquerade:     clientip.MustParsePrefixSet("192.0.2.0/28"),
	})
	res, err := r.Resolve(clientip.Transport{
		Peer:  netip.MustParseAddrPort("192.0.2.10:33000"),
		Proxy: netip.MustParseAddrPort("198.51.100.77:52311"),
	}, nil)
	fmt.Println(res, err)
	res, err = r.Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("192.0.2.3:61000")}, nil)
	fmt.Println(res.Client, res.Masqueraded, errors.Is(err, clientip.ErrMasqueraded))
	// Output:
	// 198.51.100.77 from proxy-protocol hop 1 via 192.0.2.10 (peer 192.0.2.10:33000, proxy 198.51.100.77:52311) <nil>
	// 192.0.2.3 true true
}

// One log line carries every layer.
func ExampleResult_LogValue() {
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"})
	res, _ := r.Resolve(clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")},
		http.Header{"X-Forwarded-For": {"198.51.100.7"}})
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	log.Info("request", "clientip", res)
	// Output:
	// level=INFO msg=request clientip.client=198.51.100.7 clientip.source=x-forwarded-for clientip.header=X-Forwarded-For clientip.hop=1 clientip.via=10.0.0.1 clientip.peer=10.0.0.1:40000
}

// Trusted sets load from flags, environment variables and configuration
// files, with named presets.
func ExampleParsePrefixSet() {
	set, err := clientip.ParsePrefixSet("loopback, 10.0.0.0/8 2001:db8::/32")
	fmt.Println(set, err)
	_, err = clientip.ParsePrefixSet("10.0.0.1/8")
	fmt.Println(err)
	// Output:
	// 10.0.0.0/8,127.0.0.0/8,::1/128,2001:db8::/32 <nil>
	// clientip: invalid prefix "10.0.0.1/8": host bits are set (did you mean 10.0.0.0/8?)
}

// Rate-limit keys group an IPv6 client's /64.
func ExampleRateLimitKey() {
	fmt.Println(clientip.RateLimitKey(netip.MustParseAddr("2001:db8:1:2:aaaa::1")))
	fmt.Println(clientip.RateLimitKey(netip.MustParseAddr("::ffff:198.51.100.7")))
	k := clientip.Keyer{IPv6Bits: 56}
	p, _ := k.Key(netip.MustParseAddr("2001:db8:1:2:aaaa::1"))
	fmt.Println(p)
	// Output:
	// 2001:db8:1:2::/64
	// 198.51.100.7/32
	// 2001:db8:1::/56
}

// An address that carries an IPv4 address is keyed by it: a 6to4 host,
// and the IPv4 clients an IPv6-only service sees through its NAT64
// translator (here one of its own, in RFC 8215's local-use prefix).
func ExampleKeyer_Key() {
	k := clientip.Keyer{NAT64: netip.MustParsePrefix("64:ff9b:1::/96")}
	for _, a := range []string{"2002:c633:6407:1::1", "64:ff9b::192.0.2.33", "64:ff9b:1::192.0.2.34"} {
		p, _ := k.Key(netip.MustParseAddr(a))
		fmt.Println(p)
	}
	fmt.Println(clientip.Keyer{NAT64: netip.MustParsePrefix("64:ff9b:1::/80")}.Valid())
	// Output:
	// 198.51.100.7/32
	// 192.0.2.33/32
	// 192.0.2.34/32
	// clientip: invalid configuration: Keyer.NAT64 64:ff9b:1::/80 is not an IPv6 prefix of 32, 40, 48, 56, 64 or 96 bits with its host bits zero (RFC 6052 §2.2)
}

// ReasonOf names the kind of a failure, for a log field or a metric
// attribute that must never hold what a client wrote.
func ExampleReasonOf() {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	peer := clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")}
	for _, xff := range []string{"198.51.100.7", "198.51.100.7, <script>", "10.0.0.5"} {
		_, err := r.Resolve(peer, http.Header{"X-Forwarded-For": {xff}})
		fmt.Println(clientip.ReasonOf(err))
	}
	// Output:
	// none
	// malformed
	// all_trusted
}

// Config returns the configuration a Resolver enforces, with the limits in
// force filled in.
func ExampleResolver_Config() {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "x-forwarded-for",
	})
	cfg := r.Config()
	fmt.Println(cfg.Header, cfg.TrustedProxies, cfg.MaxHops, cfg.MaxHeaderBytes)
	// Output:
	// X-Forwarded-For 10.0.0.0/8 32 8192
}

// Explain tells the walk hop by hop: here a client behind two proxies forged
// the left of X-Forwarded-For, which the walk never reads.
func ExampleResolver_Explain() {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	x := r.Explain(
		clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:40000")},
		http.Header{"X-Forwarded-For": {"127.0.0.1, 198.51.100.7, 10.0.0.2"}},
	)
	for _, s := range x.Steps {
		fmt.Printf("hop %d %-15s %-15q %-12s %v\n", s.Hop, s.Layer, s.Entry, s.Addr, s.Verdict)
	}
	fmt.Println(x.Result, x.Err)
	// Output:
	// hop 0 socket          ""              10.0.0.1     trusted
	// hop 1 x-forwarded-for "10.0.0.2"      10.0.0.2     trusted
	// hop 2 x-forwarded-for "198.51.100.7"  198.51.100.7 client
	// hop 3 x-forwarded-for "127.0.0.1"     127.0.0.1    unread
	// 198.51.100.7 from x-forwarded-for hop 2 via 10.0.0.2 (peer 10.0.0.1:40000) <nil>
}
