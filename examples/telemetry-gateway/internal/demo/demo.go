// Package demo is the telemetry gateway's -demo: the gateway, an in-process
// load balancer that sends PROXY v2, an HTTP ingress that appends
// X-Forwarded-For and a few simulated devices, all on loopback, and a table
// of what every layer saw per device, with each refusal explained from the
// gateway's own decision.
package demo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/gateway"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/lb"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/middleware"
)

// The demo's cast: loopback addresses stand for machines.
var (
	demoLB      = netip.MustParseAddr("127.0.0.200") // the load balancer's address towards the gateway
	demoIngress = netip.MustParseAddr("127.0.0.60")  // an HTTPS ingress in front of HTTP ingest
	demoAllow   = "127.0.0.0/28"                     // the allowlist: 127.0.0.0 – 127.0.0.15
	demoSNI     = "gateway.demo"
)

type demoDevice struct {
	name     string
	version  byte // 4, 5, or 0 for HTTP
	from     netip.Addr
	cert     bool // presents a client certificate
	readings int
	refused  bool // outside the allowlist
}

// http reports whether the device posts over HTTP.
func (d demoDevice) http() bool { return d.version == 0 }

func demoDevices(aliases bool) []demoDevice {
	a := func(s string) netip.Addr {
		if !aliases {
			return netip.MustParseAddr("127.0.0.1")
		}
		return netip.MustParseAddr(s)
	}
	ds := []demoDevice{
		{name: "d1", version: 4, from: a("127.0.0.11"), readings: 3},
		{name: "d2", version: 5, from: a("127.0.0.12"), readings: 3},
		{name: "d3", version: 5, from: a("127.0.0.13"), readings: 3, cert: true},
		{name: "d4", version: 4, from: a("127.0.0.14"), readings: 3},
	}
	if aliases { // these rows need addresses of their own
		ds = append(ds,
			demoDevice{name: "d5", version: 5, from: a("127.0.0.99"), readings: 3, refused: true},
			demoDevice{name: "h6", version: 0, from: a("127.0.0.15"), readings: 3},
			demoDevice{name: "h7", version: 0, from: a("127.0.0.98"), readings: 3, refused: true},
		)
	}
	return ds
}

// demoRow is what one device did and what every layer of the gateway saw.
type demoRow struct {
	dev      demoDevice
	local    netip.AddrPort      // the device's address and port, as its own socket says
	conn     *gateway.Connection // MQTT: the gateway's record of the connection
	deny     *denial             // HTTP: the gateway's refusal, if it refused
	acked    int
	err      error
	records  []sink.Record
	problems []string
}

// denial is a refusal the gateway reported to its Observer: the Result it
// judged and the policy's error.
type denial struct {
	res clientip.Result
	err error
}

// denials is the demo's middleware.Observer: it keeps the gateway's
// refusals by client address, for the HTTP rows (MQTT rows have the
// gateway's Connection record).
type denials struct {
	mu sync.Mutex
	m  map[netip.Addr]denial
}

func (d *denials) ObserveResolve(context.Context, clientip.Result, error) {}

func (d *denials) ObserveDeny(_ context.Context, res clientip.Result, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[res.Client] = denial{res, err}
}

func (d *denials) of(a netip.Addr) *denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.m[a]; ok {
		return &v
	}
	return nil
}

// explain says in words why the gateway refused a client, from the policy
// error it returned (classified by middleware.OutcomeOf) and the Result it
// judged.
func explain(err error, res clientip.Result, allow string) string {
	switch middleware.OutcomeOf(err) {
	case middleware.OutcomeNotAllowed:
		return fmt.Sprintf("%v is not in the allowlist %s", res.Client, allow)
	case middleware.OutcomeMasqueraded:
		return fmt.Sprintf("%v is a node that masquerades its clients; the client is unknown", res.Client)
	case middleware.OutcomeUnresolved:
		return "the address chain could not be resolved to a client"
	}
	return err.Error()
}

// Run runs the gateway, an in-process load balancer sending PROXY v2, an
// HTTP ingress appending X-Forwarded-For and a few devices, all on loopback,
// prints a table of what each layer saw per device, and fails when any row is
// not what the chain must produce.
func Run(ctx context.Context, stdout, stderr io.Writer, verbose bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, info, err := demo(ctx, stderr, verbose)
	if err != nil {
		return err
	}
	printDemo(stdout, rows, info)
	var bad []string
	for _, r := range rows {
		for _, p := range r.problems {
			bad = append(bad, r.dev.name+": "+p)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d unexpected observations:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	fmt.Fprintln(stdout, "OK: every device was seen as itself behind the load balancer and the ingress; the ones outside the allowlist were refused.")
	return nil
}

type demoInfo struct {
	gateway, http, lb, ingress string
	lbSrc, ingressSrc          netip.Addr
	aliases                    bool
	summary                    sink.Summary
}

func demo(ctx context.Context, stderr io.Writer, verbose bool) ([]*demoRow, demoInfo, error) {
	var info demoInfo
	info.aliases = lb.CheckSource(demoLB) == nil && lb.CheckSource(netip.MustParseAddr("127.0.0.11")) == nil
	info.lbSrc, info.ingressSrc = demoLB, demoIngress
	if !info.aliases { // macOS and others bind only 127.0.0.1 without aliases
		info.lbSrc, info.ingressSrc = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.1")
	}
	dir, err := os.MkdirTemp("", "telemetry-gateway-demo")
	if err != nil {
		return nil, info, err
	}
	defer os.RemoveAll(dir)

	ca, err := pki.NewCA("telemetry-gateway demo CA")
	if err != nil {
		return nil, info, err
	}
	serverCert, err := ca.Server(demoSNI, "127.0.0.1")
	if err != nil {
		return nil, info, err
	}
	log := slog.New(slog.DiscardHandler)
	if verbose {
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	var mu sync.Mutex
	conns := map[string]gateway.Connection{}
	denied := &denials{m: make(map[netip.Addr]denial)}
	cfg := gateway.Config{
		MQTTAddr:     "127.0.0.1:0",
		HTTPAddr:     "127.0.0.1:0",
		ProxyTrusted: clientip.MustParsePrefixSet(info.lbSrc.String()),
		TLS: &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool(),
			ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12},
		Sink:         sink.Config{Path: filepath.Join(dir, "telemetry.jsonl")},
		Logger:       log,
		MQTTLogLevel: slog.LevelError + 100,
		Observer:     denied,
		OnConnection: func(c gateway.Connection) {
			mu.Lock()
			conns[c.ClientID] = c
			mu.Unlock()
		},
	}
	if info.aliases {
		cfg.Allow = clientip.MustParsePrefixSet(demoAllow)
		cfg.HTTPTrusted = clientip.MustParsePrefixSet(info.ingressSrc.String())
		cfg.HTTPHeader = "X-Forwarded-For"
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return nil, info, err
	}
	if err := g.Start(); err != nil {
		return nil, info, err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return g.Shutdown(sctx, 0)
	}
	defer stop()
	balancer, err := lb.Start(lb.Config{Listen: "127.0.0.1:0", Backend: g.MQTTAddr(), Source: info.lbSrc, Version: 2})
	if err != nil {
		return nil, info, err
	}
	defer balancer.Close()
	ingress, err := startIngress(g.HTTPAddr(), info.ingressSrc)
	if err != nil {
		return nil, info, err
	}
	defer ingress.Close()
	info.gateway, info.http, info.lb, info.ingress = g.MQTTAddr(), g.HTTPAddr(), balancer.Addr(), ingress.Addr().String()

	var rows []*demoRow
	for _, d := range demoDevices(info.aliases) {
		r := &demoRow{dev: d}
		rows = append(rows, r)
		if d.http() {
			r.acked, r.local, r.err = postReadings(ctx, "http://"+info.ingress+"/v1/telemetry", d)
			r.deny = denied.of(r.local.Addr())
			continue
		}
		dc := device.Config{
			ID: d.name, Version: d.version, Addr: balancer.Addr(), Local: d.from, Timeout: 5 * time.Second,
			TLS:    &tls.Config{RootCAs: ca.Pool(), ServerName: demoSNI},
			OnDial: func(c net.Conn) { r.local = addrPort(c.LocalAddr()) },
		}
		if info.aliases {
			dc.Local = d.from
		} else {
			dc.Local = netip.Addr{}
		}
		if d.cert {
			cert, err := ca.Client(d.name)
			if err != nil {
				return nil, info, err
			}
			dc.TLS.Certificates = []tls.Certificate{cert}
		}
		c, err := device.Connect(ctx, dc)
		if err != nil {
			r.err = err
			continue
		}
		for seq := range d.readings {
			if err := c.Publish(ctx, "telemetry/"+d.name, 1, device.Reading(d.name, uint64(seq), 20+float64(seq)/2)); err != nil {
				r.err = err
				break
			}
			r.acked++
		}
		c.Close()
	}
	if err := stop(); err != nil {
		return nil, info, err
	}
	if info.summary, err = sink.SummarizeFile(cfg.Sink.Path); err != nil {
		return nil, info, err
	}
	recs, err := readRecords(cfg.Sink.Path)
	if err != nil {
		return nil, info, err
	}
	for _, r := range rows {
		if c, ok := conns[r.dev.name]; ok {
			r.conn = &c
		}
		for _, rec := range recs {
			if rec.Device == r.dev.name {
				r.records = append(r.records, rec)
			}
		}
		r.check(info)
	}
	return rows, info, nil
}

// check compares what the gateway saw with what it must have seen.
func (r *demoRow) check(info demoInfo) {
	bad := func(f string, a ...any) { r.problems = append(r.problems, fmt.Sprintf(f, a...)) }
	d := r.dev
	if !r.local.IsValid() {
		bad("the device never connected")
		return
	}
	if info.aliases && r.local.Addr() != d.from {
		bad("connected from %v, not %v", r.local.Addr(), d.from)
	}
	if d.http() {
		r.checkHTTP(info, bad)
	} else {
		r.checkMQTT(info, bad)
	}
	want := d.readings
	if d.refused {
		want = 0
	}
	if len(r.records) != want {
		bad("%d records in the sink, want %d", len(r.records), want)
	}
}

func (r *demoRow) checkHTTP(info demoInfo, bad func(string, ...any)) {
	d := r.dev
	switch {
	case d.refused:
		var se statusError
		if !errors.As(r.err, &se) || se != http.StatusForbidden || r.deny == nil || middleware.OutcomeOf(r.deny.err) != middleware.OutcomeNotAllowed {
			bad("not refused with 403 for the allowlist: %v", r.err)
		}
	case r.err != nil || r.acked != d.readings || r.deny != nil:
		bad("%d of %d readings accepted: %v", r.acked, d.readings, r.err)
	}
	for _, rec := range r.records {
		p := rec.Provenance
		if p.Client != r.local.Addr().String() || p.Source != clientip.SourceXForwardedFor.String() || !strings.HasPrefix(p.Peer, info.ingressSrc.String()+":") {
			bad("record %s: client %s from %s, peer %s", rec.ID, p.Client, p.Source, p.Peer)
		}
	}
}

func (r *demoRow) checkMQTT(info demoInfo, bad func(string, ...any)) {
	d := r.dev
	c := r.conn
	if c == nil {
		bad("the gateway saw no CONNECT")
		return
	}
	if c.Result.Peer.Addr() != info.lbSrc {
		bad("socket peer %v, want the load balancer %v", c.Result.Peer, info.lbSrc)
	}
	if c.Result.Proxy != r.local {
		bad("PROXY source %v, want the device %v", c.Result.Proxy, r.local)
	}
	if c.Result.Client != r.local.Addr() || c.Result.Source != clientip.SourceProxyProtocol || c.Result.Masqueraded {
		bad("resolved %v", c.Result)
	}
	if c.ServerName != demoSNI {
		bad("SNI %q", c.ServerName)
	}
	if want := map[bool]string{true: "CN=" + d.name}[d.cert]; c.Subject != want {
		bad("client certificate subject %q, want %q", c.Subject, want)
	}
	if d.refused {
		var ce *device.ConnectError
		if !errors.As(r.err, &ce) || ce.Code != 0x87 || middleware.OutcomeOf(c.Refused) != middleware.OutcomeNotAllowed {
			bad("not refused for the allowlist with CONNACK 0x87: %v (%v)", r.err, c.Refused)
		}
		return
	}
	if c.Refused != nil || r.err != nil || r.acked != d.readings {
		bad("%d of %d readings acknowledged: %v %v", r.acked, d.readings, c.Refused, r.err)
	}
	for _, rec := range r.records {
		p := rec.Provenance
		if p.Client != r.local.Addr().String() || p.ProxySource != r.local.String() || p.Source != "proxy-protocol" || p.ClientID != d.name {
			bad("record %s provenance %+v", rec.ID, p)
		}
	}
}

func printDemo(w io.Writer, rows []*demoRow, info demoInfo) {
	fmt.Fprintf(w, "telemetry-gateway demo: devices -> load balancer %s (PROXY v2 from %s) -> gateway mqtts://%s\n", info.lb, info.lbSrc, info.gateway)
	if info.aliases {
		fmt.Fprintf(w, "                        HTTP devices -> ingress %s (X-Forwarded-For, from %s) -> gateway http://%s; allowlist %s\n\n", info.ingress, info.ingressSrc, info.http, demoAllow)
	} else {
		fmt.Fprintf(w, "(this machine binds only 127.0.0.1: every device and the load balancer share it; the allowlist and HTTP rows are left out)\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tPROTOCOL\tDEVICE ADDR\tSOCKET PEER\tPROXY SOURCE\tTLS SNI\tTLS SUBJECT\tCLIENT ID\tRESOLVED CLIENT\tSOURCE\tMASQ\tALLOWLIST\tRESULT")
	for _, r := range rows {
		c := r.cells(info)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.dev.name, c.proto, dash(r.local.String()), dash(c.peer), dash(c.psrc),
			dash(c.sni), dash(c.subj), dash(c.id), dash(c.client), dash(c.source), dash(c.masq), dash(c.allow), c.result)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nsink: %d records (%d distinct ids, %d duplicates), each with the provenance above\n", info.summary.Lines, info.summary.Unique, info.summary.Duplicates)
}

type cells struct {
	proto, peer, psrc, sni, subj, id, client, source, masq, allow, result string
}

// cells renders what the gateway saw and decided for the row's device.
func (r *demoRow) cells(info demoInfo) cells {
	c := cells{proto: map[byte]string{0: "http", 4: "mqtt 3.1.1", 5: "mqtt 5"}[r.dev.version]}
	var res clientip.Result
	var refused error // the gateway's policy error
	switch {
	case r.conn != nil:
		res, refused = r.conn.Result, r.conn.Refused
		c.sni, c.subj, c.id = r.conn.ServerName, r.conn.Subject, r.conn.ClientID
	case r.deny != nil:
		res, refused = r.deny.res, r.deny.err
	case len(r.records) > 0:
		p := r.records[0].Provenance
		c.peer, c.client, c.source, c.masq = p.Peer, p.Client, p.Source, yesNo(p.Masqueraded)
	}
	if res.IsValid() {
		c.peer, c.client, c.source, c.masq = res.Peer.String(), res.Client.String(), res.Source.String(), yesNo(res.Masqueraded)
		if res.Proxy.IsValid() {
			c.psrc = res.Proxy.String()
		}
	}
	switch o := middleware.OutcomeOf(refused); {
	case !info.aliases:
	case refused == nil && r.err == nil:
		c.allow = "allowed"
	case o == middleware.OutcomeNotAllowed || o == middleware.OutcomeMasqueraded || o == middleware.OutcomeUnresolved:
		c.allow = "denied"
	case refused != nil:
		c.allow = "allowed" // refused for another reason
	}
	c.result = fmt.Sprintf("%d/%d acked", r.acked, r.dev.readings)
	if r.dev.http() {
		c.result = fmt.Sprintf("%d/%d stored", r.acked, r.dev.readings)
	}
	var ce *device.ConnectError
	var se statusError
	switch {
	case refused != nil && errors.As(r.err, &ce):
		c.result = fmt.Sprintf("refused: %s (CONNACK 0x%02x)", explain(refused, res, demoAllow), ce.Code)
	case refused != nil && errors.As(r.err, &se):
		c.result = fmt.Sprintf("refused: %s (HTTP %d)", explain(refused, res, demoAllow), int(se))
	case r.err != nil:
		c.result = "error: " + r.err.Error()
	}
	return c
}

func dash(s string) string {
	if s == "" || s == "invalid AddrPort" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// startIngress runs a reverse proxy that appends the client to
// X-Forwarded-For and connects to the gateway from src, as an ingress
// controller does.
func startIngress(backend string, src netip.Addr) (net.Listener, error) {
	target, err := url.Parse("http://" + backend)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded() // appends the client's address
		},
		Transport: &http.Transport{DialContext: d.DialContext},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return ln, nil
}

// statusError is an HTTP answer other than 201 Created.
type statusError int

func (e statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", int(e), http.StatusText(int(e)))
}

// postReadings sends an HTTP device's readings through the ingress.
func postReadings(ctx context.Context, url string, d demoDevice) (int, netip.AddrPort, error) {
	var local netip.AddrPort
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: d.from.AsSlice()}}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				local = addrPort(c.LocalAddr())
			}
			return c, err
		},
	}}
	defer hc.CloseIdleConnections()
	n := 0
	for seq := range d.readings {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(device.Reading(d.name, uint64(seq), 19.5))))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return n, local, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return n, local, statusError(resp.StatusCode)
		}
		n++
	}
	return n, local, nil
}

func readRecords(path string) ([]sink.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sink.ReadAll(f)
}
