// Command sourceip resolves a request's client address the way the clientip
// package does and explains the answer hop by hop, or fetches the
// explanation a live explain endpoint gives of the request it receives.
//
// Resolve one request from flags:
//
//	sourceip -peer 10.0.0.1:4431 -trusted 10.0.0.0/8 -header X-Forwarded-For \
//	    -H 'X-Forwarded-For: 6.6.6.6, 203.0.113.7'
//
// It prints the answer, or the error with its kind, the walk (each hop,
// whether it is trusted, and the entries never read), the forwarding
// headers and whether each was read, and a JSON line whose "msg" is
// "resolved" or "unresolved", with the error and its "reason" when
// unresolved. A -H header is only read when -header names it: -H without
// -header is refused, and a -H header other than -header's is reported as
// not read.
//
// Fetch a live explanation (see the explain package) and print it:
//
//	sourceip -fetch http://127.0.0.1:9090/debug/clientip
//	sourceip -fetch http://127.0.0.1:9090/debug/clientip -advice
//
// -advice fetches the endpoint's configuration advice instead, and -json
// prints the fetched document as it came, except that characters a terminal
// would act on (control characters, DEL, bytes that are not UTF-8,
// bidirectional and other format characters) are written as JSON escapes,
// which decode to the same document (a byte that is not UTF-8 as U+FFFD,
// as encoding/json reads it), and carriage returns between tokens are
// dropped. The text form escapes them too, as Go does (\x1b): the
// endpoint, which may be hostile, chose every byte it prints.
//
// Run with no arguments, it walks through a few built-in cases (a direct
// client, a forged X-Forwarded-For behind a proxy, a PROXY protocol load
// balancer, an RFC 7239 Forwarded chain, a malformed hop, a masquerading
// node) and prints what each resolves to. -version prints the version (from
// the build information). -h prints the usage.
//
// Exit status:
//
//	0  resolved (for -fetch: the fetched explanation resolved, or the advice
//	   was fetched); also the built-in cases, -version and -h
//	1  unresolved: the chain could not be trusted; the output names the
//	   error and its kind (malformed, all_trusted, masqueraded, …)
//	2  usage error: a bad flag or flag value, a stray argument, a flag that
//	   needs another, or an invalid resolver configuration
//	3  -fetch failed: the endpoint could not be reached, did not answer
//	   200, or did not answer with an explanation
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/explain"
	"github.com/sourceip/sourceip/internal/version"
)

// Exit statuses.
const (
	exitResolved   = 0
	exitUnresolved = 1
	exitUsage      = 2
	exitFetch      = 3
)

type headerFlags http.Header

func (h headerFlags) String() string { return "" }
func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return errors.New(`want "Name: value"`)
	}
	name = strings.TrimSpace(name)
	if !validFieldName(name) {
		return fmt.Errorf("%q is not a header name (RFC 9110 §5.1: one or more of A-Z a-z 0-9 !#$%%&'*+-.^_`|~)", name)
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

// validFieldName reports whether s is an HTTP field name: a token of RFC
// 9110 §5.6.2.
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a mistake in the command line: it is reported with the usage.
type usageError struct{ error }

// configError is an invalid resolver configuration: exit 2, without the usage.
type configError struct{ error }

// fetchError is a -fetch that got no explanation: exit 3.
type fetchError struct{ error }

// errUnresolved is returned when the answer is an error: its kind and the
// error were printed; the exit status is 1.
var errUnresolved = errors.New("unresolved")

const usageText = `usage: sourceip [-version]
       sourceip -peer addr:port|unix [-proxy addr:port] [-trusted prefixes] [-hops n]
                [-trust-unix] [-header name] [-masquerade prefixes] [-H "Name: value"]...
       sourceip -fetch url [-advice] [-json] [-timeout d]

Resolves one request's client address from the flags and explains the walk,
or fetches a live explain endpoint's explanation, or, with no arguments,
walks through built-in cases. A -H header is read only when -header names it.

Exit status: 0 resolved (and the built-in cases, -version, -h); 1 unresolved,
the error's kind named in the output; 2 usage error or invalid configuration;
3 -fetch got no explanation.

`

// run runs the command and returns its exit status (see the package
// documentation). Output goes to stdout, except errors and the usage that
// follows them, which go to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sourceip", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, once
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	err := parseAndRun(fs, args, stdout)
	switch {
	case err == nil:
		return exitResolved
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return exitResolved
	case errors.Is(err, errUnresolved):
		return exitUnresolved
	}
	// A -fetch error may carry what the endpoint sent: its status line's
	// reason phrase, which net/http does not check.
	fmt.Fprintf(stderr, "sourceip: %s\n", escapeText([]byte(err.Error())))
	if _, ok := errors.AsType[fetchError](err); ok {
		return exitFetch
	}
	if _, ok := errors.AsType[usageError](err); ok {
		fmt.Fprintln(stderr)
		fs.SetOutput(stderr)
		fs.Usage()
	}
	return exitUsage
}

func parseAndRun(fs *flag.FlagSet, args []string, out io.Writer) error {
	var cfg clientip.Config
	headers := headerFlags{}
	peer := fs.String("peer", "", "socket peer `addr:port`, or \"unix\" (omit it, and every other flag, to run the built-in cases)")
	proxy := fs.String("proxy", "", "source `addr:port` from a PROXY protocol header")
	fs.Var(&cfg.TrustedProxies, "trusted", "trusted proxy `prefixes` (CIDRs, addresses, loopback, private, linklocal, cgnat); repeatable")
	fs.IntVar(&cfg.TrustedHops, "hops", 0, "trusted hop `count` (hop-count mode)")
	fs.BoolVar(&cfg.TrustUnixSocket, "trust-unix", false, "trust a Unix-socket peer")
	fs.StringVar(&cfg.Header, "header", "", "forwarding header to read: X-Forwarded-For, Forwarded, or a single-address header; -H headers are read only when this names them")
	fs.Var(&cfg.Masquerade, "masquerade", "masquerading node `prefixes`; repeatable")
	fs.Var(headers, "H", "request header `\"Name: value\"`; repeatable")
	fetch := fs.String("fetch", "", "fetch the explanation a live explain endpoint gives at `url` and print it")
	advice := fs.Bool("advice", false, "with -fetch: fetch the endpoint's configuration advice (?view=advice)")
	raw := fs.Bool("json", false, "with -fetch: print the fetched JSON document as it came, terminal control characters escaped")
	timeout := fs.Duration("timeout", 10*time.Second, "with -fetch: how long to wait for the endpoint")
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	others := func(allowed ...string) []string {
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if set[f.Name] && !slices.Contains(allowed, f.Name) {
				names = append(names, "-"+f.Name)
			}
		})
		return names
	}
	if set["fetch"] {
		if bad := others("fetch", "advice", "json", "timeout"); len(bad) > 0 {
			return usageError{fmt.Errorf("%s cannot be combined with -fetch: the endpoint resolves with its own configuration", strings.Join(bad, ", "))}
		}
		if *timeout <= 0 {
			return usageError{fmt.Errorf("-timeout %v: want a duration > 0", *timeout)}
		}
		return fetchAndPrint(out, *fetch, *advice, *raw, *timeout)
	}
	for _, name := range []string{"peer", "proxy"} {
		if set[name] && fs.Lookup(name).Value.String() == "" {
			// An unset shell variable, say: without this, -peer "" ran the
			// built-in cases and exited 0, as if something had resolved.
			want := "addr:port"
			if name == "peer" {
				want += ` or "unix"`
			}
			return usageError{fmt.Errorf("-%s is empty: want %s", name, want)}
		}
	}
	if *peer == "" {
		if bad := others("peer"); len(bad) > 0 {
			return usageError{fmt.Errorf("%s given without -peer or -fetch (the built-in cases run only with no flags)", strings.Join(bad, ", "))}
		}
		return demo(out)
	}
	if bad := others("peer", "proxy", "trusted", "hops", "trust-unix", "header", "masquerade", "H"); len(bad) > 0 {
		return usageError{fmt.Errorf("%s need -fetch", strings.Join(bad, ", "))}
	}
	if len(headers) > 0 && cfg.Header == "" {
		names := slices.Sorted(maps.Keys(headers))
		return usageError{fmt.Errorf("-H %s would not be read: no -header is set, so the resolver reads no header at all (add -header %s to read it)", strings.Join(names, ", -H "), names[0])}
	}
	var t clientip.Transport
	if *peer != "unix" {
		ap, err := netip.ParseAddrPort(*peer)
		if err != nil {
			return configError{fmt.Errorf("-peer: %w", err)}
		}
		t.Peer = ap
	}
	if *proxy != "" {
		ap, err := netip.ParseAddrPort(*proxy)
		if err != nil {
			return configError{fmt.Errorf("-proxy: %w", err)}
		}
		t.Proxy = ap
	}
	r, err := clientip.New(cfg)
	if err != nil {
		return configError{err}
	}
	if report(out, r, t, http.Header(headers)) != nil {
		return errUnresolved
	}
	return nil
}

// report resolves t and h with r, prints the answer, the walk and a JSON
// log line, and returns the resolution error.
func report(out io.Writer, r *clientip.Resolver, t clientip.Transport, h http.Header) error {
	res, err := r.Resolve(t, h)
	fmt.Fprintf(out, "  result: %v\n", res)
	if err != nil {
		fmt.Fprintf(out, "  error:  %v\n", err)
		fmt.Fprintf(out, "  reason: %v\n", clientip.ReasonOf(err))
	}
	rep := explain.ReportFor(r, t, h)
	var walk strings.Builder
	rep.WriteWalk(&walk)
	writeOtherHeaders(&walk, r.Config().Header, h, rep.Headers)
	for line := range strings.Lines(walk.String()) {
		if line != "\n" {
			line = "  " + line
		}
		fmt.Fprint(out, line)
	}
	log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	if err != nil {
		log.Warn("unresolved", "reason", clientip.ReasonOf(err).String(), "error", err.Error(), "clientip", res)
	} else {
		log.Info("resolved", "clientip", res)
	}
	return err
}

// writeOtherHeaders lists the -H headers the report left out because they
// are no forwarding header it knows, so that each one is said to be unread.
func writeOtherHeaders(w io.Writer, configured string, h http.Header, listed []explain.HeaderInfo) {
	seen := map[string]bool{textproto.CanonicalMIMEHeaderKey(configured): true}
	for _, hi := range listed {
		seen[textproto.CanonicalMIMEHeaderKey(hi.Name)] = true
	}
	var names []string
	for name := range h {
		if !seen[textproto.CanonicalMIMEHeaderKey(name)] {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	fmt.Fprintf(w, "\nother headers:\n")
	for _, name := range names {
		vals := make([]string, len(h[name]))
		for i, v := range h[name] {
			vals[i] = strconv.Quote(v)
		}
		fmt.Fprintf(w, "  %s: %s\n      not read: the configuration reads %s only\n", name, strings.Join(vals, ", "), configured)
	}
}

// maxDocument bounds the body -fetch reads.
const maxDocument = 4 << 20

// fetchAndPrint fetches the explain endpoint at rawURL and prints what it
// answers: the explanation, or with advice the configuration advice.
func fetchAndPrint(out io.Writer, rawURL string, advice, raw bool, timeout time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Errorf("-fetch %q: want an http:// or https:// URL", rawURL)}
	}
	if advice {
		q := u.Query()
		q.Set("view", "advice")
		u.RawQuery = q.Encode()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return usageError{fmt.Errorf("-fetch: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fetchError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	switch {
	case err != nil:
		return fetchError{fmt.Errorf("reading %s: %w", u.Redacted(), err)}
	case len(body) > maxDocument:
		return fetchError{fmt.Errorf("%s answered more than %d bytes: not an explanation", u.Redacted(), maxDocument)}
	case resp.StatusCode == http.StatusNotFound:
		return fetchError{fmt.Errorf("%s answered 404 Not Found: no explain endpoint there, or it does not admit this host (its Allow and AllowPeers)", u.Redacted())}
	case resp.StatusCode != http.StatusOK:
		first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return fetchError{fmt.Errorf("%s answered %s: %.200q", u.Redacted(), resp.Status, first)}
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return fetchError{fmt.Errorf("%s did not answer with JSON: %w", u.Redacted(), err)}
	}
	switch head.Schema {
	case explain.Schema:
		var rep explain.Report
		if err := json.Unmarshal(body, &rep); err != nil {
			return fetchError{fmt.Errorf("%s: %w", u.Redacted(), err)}
		}
		if err := printDoc(out, raw, body, &rep); err != nil {
			return err
		}
		if !rep.Resolved() {
			return errUnresolved
		}
		return nil
	case explain.AdviceSchema:
		var adv explain.Advice
		if err := json.Unmarshal(body, &adv); err != nil {
			return fetchError{fmt.Errorf("%s: %w", u.Redacted(), err)}
		}
		return printDoc(out, raw, body, &adv)
	}
	return fetchError{fmt.Errorf("%s answered a document of schema %q, not %q or %q", u.Redacted(), head.Schema, explain.Schema, explain.AdviceSchema)}
}

// printDoc writes a fetched document: as it came with raw, else as text;
// either way with the characters a terminal would act on escaped
// (escapeJSON, escapeText), since the endpoint chose every byte of it.
func printDoc(out io.Writer, raw bool, body []byte, doc interface{ WriteText(io.Writer) error }) error {
	if raw {
		_, err := out.Write(escapeJSON(body))
		return err
	}
	var b bytes.Buffer
	if err := doc.WriteText(&b); err != nil {
		return err
	}
	_, err := out.Write(escapeText(b.Bytes()))
	return err
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
