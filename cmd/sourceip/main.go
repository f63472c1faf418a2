// Command sourceip resolves a request's client address the way the clientip
// package does and prints the answer with its provenance.
//
// Resolve one request from flags:
//
//	sourceip -peer 10.0.0.1:4431 -trusted 10.0.0.0/8 -header X-Forwarded-For \
//	    -H 'X-Forwarded-For: 6.6.6.6, 203.0.113.7'
//
// Run with no arguments, it walks through a few built-in cases (a direct
// client, a forged X-Forwarded-For behind a proxy, a PROXY protocol load
// balancer, an RFC 7239 Forwarded chain, a masquerading node) and prints what
// each resolves to. -version prints the version (from the build information)
// and exits 0. The other flags need -peer, and positional arguments are
// refused: both are usage errors (exit status 2), as is any invalid flag
// value. -h prints the usage and exits 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/version"
)

type headerFlags http.Header

func (h headerFlags) String() string { return "" }
func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return errors.New(`want "Name: value"`)
	}
	http.Header(h).Add(strings.TrimSpace(name), strings.TrimSpace(value))
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a mistake in the command line: it is reported with the usage.
type usageError struct{ error }

// run runs the command and returns its exit status: 0 on success and for
// -h, 2 for a usage error or an invalid configuration. Output goes to
// stdout, except errors and the usage that follows them, which go to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sourceip", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, once
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: sourceip [-version] [-peer addr:port|unix [flags]]\n\n"+
			"Resolves one request's client address from the flags, or, with no\n"+
			"arguments, walks through built-in cases. The flags other than -peer\n"+
			"and -version need -peer.\n\n")
		fs.PrintDefaults()
	}
	err := parseAndRun(fs, args, stdout)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	fmt.Fprintln(stderr, "sourceip:", err)
	if _, ok := errors.AsType[usageError](err); ok {
		fmt.Fprintln(stderr)
		fs.SetOutput(stderr)
		fs.Usage()
	}
	return 2
}

func parseAndRun(fs *flag.FlagSet, args []string, out io.Writer) error {
	var cfg clientip.Config
	headers := headerFlags{}
	peer := fs.String("peer", "", "socket peer `addr:port`, or \"unix\" (omit it, and every other flag, to run the built-in cases)")
	proxy := fs.String("proxy", "", "source `addr:port` from a PROXY protocol header")
	fs.Var(&cfg.TrustedProxies, "trusted", "trusted proxy `prefixes` (CIDRs, addresses, loopback, private, linklocal, cgnat); repeatable")
	fs.IntVar(&cfg.TrustedHops, "hops", 0, "trusted hop `count` (hop-count mode)")
	fs.BoolVar(&cfg.TrustUnixSocket, "trust-unix", false, "trust a Unix-socket peer")
	fs.StringVar(&cfg.Header, "header", "", "forwarding header to read: X-Forwarded-For, Forwarded, or a single-address header")
	fs.Var(&cfg.Masquerade, "masquerade", "masquerading node `prefixes`; repeatable")
	fs.Var(headers, "H", "request header `\"Name: value\"`; repeatable")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		// Parsing stops at the first argument that is not a flag, so any
		// flags after it were not read either.
		return usageError{fmt.Errorf("unexpected argument %q: sourceip takes no arguments, and flags after one are not parsed", fs.Arg(0))}
	}
	if *showVersion {
		fmt.Fprintln(out, "sourceip", version.String())
		return nil
	}
	if *peer == "" {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "peer" && f.Name != "version" {
				set = append(set, "-"+f.Name)
			}
		})
		if len(set) > 0 {
			return usageError{fmt.Errorf("%s given without -peer (the built-in cases run only with no flags)", strings.Join(set, ", "))}
		}
		return demo(out)
	}
	var t clientip.Transport
	if *peer != "unix" {
		ap, err := netip.ParseAddrPort(*peer)
		if err != nil {
			return fmt.Errorf("-peer: %w", err)
		}
		t.Peer = ap
	}
	if *proxy != "" {
		ap, err := netip.ParseAddrPort(*proxy)
		if err != nil {
			return fmt.Errorf("-proxy: %w", err)
		}
		t.Proxy = ap
	}
	r, err := clientip.New(cfg)
	if err != nil {
		return err
	}
	report(out, r, t, http.Header(headers))
	return nil
}

func report(out io.Writer, r *clientip.Resolver, t clientip.Transport, h http.Header) {
	res, err := r.Resolve(t, h)
	fmt.Fprintf(out, "  result: %v\n", res)
	if err != nil {
		fmt.Fprintf(out, "  error:  %v\n", err)
	}
	log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	log.Info("resolved", "clientip", res)
}

func demo(out io.Writer) error {
	proxies := clientip.MustParsePrefixSet("10.0.0.0/8")
	lb := clientip.MustParsePrefixSet("192.0.2.10")
	cases := []struct {
		title string
		cfg   clientip.Config
		t     clientip.Transport
		h     http.Header
	}{
		{
			"a client connects directly and forges X-Forwarded-For: its headers are ignored",
			clientip.Config{TrustedProxies: proxies, Header: "X-Forwarded-For"},
			clientip.Transport{Peer: netip.MustParseAddrPort("203.0.113.7:51000")},
			http.Header{"X-Forwarded-For": {"127.0.0.1"}},
		},
		{
			"behind two trusted proxies, a client forges the left of X-Forwarded-For",
			clientip.Config{TrustedProxies: proxies, Header: "X-Forwarded-For"},
			clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.2:40000")},
			http.Header{"X-Forwarded-For": {"6.6.6.6, 198.51.100.20, 10.0.0.3"}},
		},
		{
			"a load balancer sends a PROXY v2 header",
			clientip.Config{TrustedProxies: lb},
			clientip.Transport{Peer: netip.MustParseAddrPort("192.0.2.10:33000"), Proxy: netip.MustParseAddrPort("198.51.100.77:52311")},
			nil,
		},
		{
			"RFC 7239 Forwarded with a quoted, bracketed IPv6 node and port",
			clientip.Config{TrustedProxies: proxies, Header: "Forwarded"},
			clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.2:40000")},
			http.Header{"Forwarded": {`for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.9`}},
		},
		{
			"a garbage entry where the walk needs an address: refused, not skipped",
			clientip.Config{TrustedProxies: proxies, Header: "X-Forwarded-For"},
			clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.2:40000")},
			http.Header{"X-Forwarded-For": {"198.51.100.20, not-an-ip"}},
		},
		{
			"externalTrafficPolicy: Cluster masqueraded the client to a node address",
			clientip.Config{Masquerade: clientip.MustParsePrefixSet("192.0.2.0/28")},
			clientip.Transport{Peer: netip.MustParseAddrPort("192.0.2.3:61000")},
			nil,
		},
	}
	for i, c := range cases {
		r, err := clientip.New(c.cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%d. %s\n", i+1, c.title)
		report(out, r, c.t, c.h)
		fmt.Fprintln(out)
	}
	return nil
}
