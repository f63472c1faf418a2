package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/gateway"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/jetstream"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/proxyproto"
)

// envPrefix turns a flag name into its environment variable: -mqtt-addr is
// GATEWAY_MQTT_ADDR. The prefix keeps clear of the variables Kubernetes
// injects for Services (a Service named "mqtt" brings MQTT_PORT, MQTT_SERVICE_HOST, …).
// formerNames maps a flag's former name to its present one: both are
// accepted, a flag on the command line wins over any variable, and the
// present name wins over the former at the same level.
var formerNames = map[string]string{"mochi-log-level": "mqtt-log-level"}

const envPrefix = "GATEWAY_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// errUsage marks an error in the command line or the environment: run exits
// with status 2 for it, as for an unknown flag.
var errUsage = errors.New("usage")

// options is the command line.
type options struct {
	mqttAddr, httpAddr, adminAddr string
	explainAllow                  clientip.PrefixSet

	proxyTrusted       clientip.PrefixSet
	proxyTrustedFile   string
	proxyHeaderless    proxyproto.HeaderlessPolicy
	proxyHeaderTimeout time.Duration
	proxyRequired      bool

	httpTrusted clientip.PrefixSet
	httpHeader  string

	wsAddr, wsHeader, wsProtoHeader string
	wsTrusted, wsProxyTrusted       clientip.PrefixSet
	wsHosts, wsOrigins              string
	masquerade                      clientip.PrefixSet
	allow                           clientip.PrefixSet

	tlsCert, tlsKey, tlsClientCA, tlsClientAuth string
	tlsHosts, tlsSelfSignedOut                  string
	tlsAtLB                                     bool
	handshakeTimeout, connectTimeout            time.Duration
	httpReadTimeout                             time.Duration

	sinkPath          string
	sinkSync          sink.SyncMode
	sinkMinFree       byteSize
	sinkCheckInterval time.Duration
	sinkMaxDevices    int

	natsURL, natsStream, natsSubject string
	natsReplicas, natsMaxPending     int
	natsAckTimeout, natsDuplicates   time.Duration
	maxPayload                       int
	topicPrefix                      string
	topicPolicy                      string

	rate        float64
	rateBurst   int
	rateMaxWait time.Duration

	kubeHealthAddr, kubeService, kubeEndpoint string

	drainDelay, shutdownTimeout time.Duration
	logFormat, logLevel         string
	mqttLogLevel                string
	idleGCPercent               int // from GOGC, not a flag

	demo, verbose, version bool
}

// parseOptions reads flags, then the environment for every flag not given
// on the command line, and checks the values. Every error but flag.ErrHelp
// wraps errUsage.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("telemetry-gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)

	fs.StringVar(&o.mqttAddr, "mqtt-addr", ":8883", "MQTT listener: over TLS, or plain behind load balancers that terminate TLS (-tls-at-lb)")
	fs.StringVar(&o.httpAddr, "http-addr", ":8080", "HTTP ingest listener (POST /v1/telemetry); empty disables")
	fs.StringVar(&o.adminAddr, "admin-addr", ":9090", "admin listener: /livez, /readyz, /metrics; empty disables")
	fs.Var(&o.explainAllow, "explain-allow", "operator `prefixes` that may fetch /debug/clientip/conn?conn=N or ?client=ID on the admin listener, the explanation of one MQTT connection (it shows the trust configuration); repeatable; none by default")

	fs.Var(prefixFlag{&o.proxyTrusted}, "proxy-trusted", "load balancers that must send a PROXY header on the MQTT port (addresses, CIDRs or loopback|private|linklocal|cgnat; repeatable); a header from anyone else is refused; unset: no PROXY protocol")
	fs.StringVar(&o.proxyTrustedFile, "proxy-trusted-file", "", "file listing more load balancers for the MQTT port, beside -proxy-trusted (one address or CIDR per line, # comments); re-read on SIGHUP, each change logged as a diff; empty: none")
	fs.TextVar(&o.proxyHeaderless, "proxy-headerless", proxyproto.HeaderlessRefuse, "refuse|allow connections from -proxy-trusted without a header (allow for TCP health checks)")
	fs.DurationVar(&o.proxyHeaderTimeout, "proxy-header-timeout", proxyproto.DefaultReadHeaderTimeout, "deadline for the PROXY header")
	fs.BoolVar(&o.proxyRequired, "proxy-required", false, "refuse MQTT clients that did not come through a trusted load balancer (CONNACK not authorized); without it a client that reaches the port directly is served as itself, and only a firewall keeps it out (see README)")

	fs.Var(prefixFlag{&o.httpTrusted}, "http-trusted", "proxies trusted to append -http-header on the HTTP port (repeatable)")
	fs.StringVar(&o.httpHeader, "http-header", "X-Forwarded-For", "forwarding header read from -http-trusted peers: X-Forwarded-For, Forwarded, or a single-address header such as X-Real-IP")
	fs.StringVar(&o.wsAddr, "ws-addr", "", "MQTT over WebSocket listener (ws://…/mqtt, subprotocol mqtt), plain HTTP behind an ingress that terminates TLS; empty disables")
	fs.Var(prefixFlag{&o.wsTrusted}, "ws-trusted", "ingress proxies trusted to append -ws-header on the WebSocket listener (repeatable)")
	fs.StringVar(&o.wsHeader, "ws-header", "X-Forwarded-For", "forwarding header read from -ws-trusted peers: X-Forwarded-For or Forwarded")
	fs.Var(prefixFlag{&o.wsProxyTrusted}, "ws-proxy-trusted", "load balancers in front of the WebSocket listener that must send a PROXY header (repeatable); unset: no PROXY protocol there")
	fs.StringVar(&o.wsProtoHeader, "ws-proto-header", "", "header in which -ws-trusted report the scheme the client used (X-Forwarded-Proto, or Forwarded for proto=), for the same-origin check; empty: the connection's own (http)")
	fs.StringVar(&o.wsHosts, "ws-hosts", "", "hosts the WebSocket listener answers to, comma-separated (*.example.com allowed); an upgrade for another host is refused; empty: any")
	fs.StringVar(&o.wsOrigins, "ws-origins", "", "origins, besides the request's own, that browsers may open a WebSocket from (https://dashboard.example.com), comma-separated; any other Origin is refused")
	fs.Var(prefixFlag{&o.masquerade}, "masquerade", "node addresses that stand in for clients under externalTrafficPolicy: Cluster (repeatable)")
	fs.Var(prefixFlag{&o.allow}, "allow", "admit only clients resolved inside these ranges, on MQTT (CONNACK not authorized) and HTTP (403); unset admits every resolved client (repeatable)")

	fs.StringVar(&o.tlsCert, "tls-cert", "", "server certificate chain (PEM); empty generates a self-signed certificate at start")
	fs.StringVar(&o.tlsKey, "tls-key", "", "server private key (PEM)")
	fs.StringVar(&o.tlsHosts, "tls-hosts", "localhost,127.0.0.1", "names and addresses of the generated self-signed certificate")
	fs.StringVar(&o.tlsSelfSignedOut, "tls-self-signed-out", "", "write the generated certificate here (PEM) for clients to pin")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "CA bundle (PEM) that verifies device client certificates; their subject is logged as the device identity")
	fs.BoolVar(&o.tlsAtLB, "tls-at-lb", false, "no TLS of the gateway's own on -mqtt-addr: the load balancers in -proxy-trusted terminate TLS, require and verify client certificates and report them in the PROXY v2 SSL TLV (HAProxy: verify required, send-proxy-v2-ssl-cn); CONNECT without a verified certificate is refused, the client id must be its common name; -tls-client-ca, if given, verifies again a certificate the load balancer forwards")
	fs.StringVar(&o.tlsClientAuth, "tls-client-auth", "", "none|optional|require a client certificate, verified against -tls-client-ca, which optional and require need (default: optional with -tls-client-ca, none without)")
	fs.DurationVar(&o.handshakeTimeout, "tls-handshake-timeout", 5*time.Second, "deadline for the TLS handshake")
	fs.DurationVar(&o.httpReadTimeout, "http-read-timeout", 30*time.Second, "deadline for reading one HTTP ingest request, headers and body")
	fs.DurationVar(&o.connectTimeout, "mqtt-connect-timeout", 10*time.Second, "deadline for CONNECT after the handshake")

	fs.StringVar(&o.sinkPath, "sink", "telemetry.jsonl", "durable sink: JSON Lines file (a regular file), one record per accepted reading")
	fs.TextVar(&o.sinkSync, "sink-sync", sink.SyncFsync, "fsync: acknowledge after fsync (survives a machine crash); write: after write(2) (survives a process crash)")
	o.sinkMinFree = gateway.DefaultSinkMinFree
	fs.Var(&o.sinkMinFree, "sink-min-free", "not ready while the sink's file system has less free space than this (bytes, or with a KiB, MiB or GiB suffix); 0 disables the check")
	fs.DurationVar(&o.sinkCheckInterval, "sink-check-interval", gateway.DefaultSinkCheckInterval, "how often the free space of -sink-min-free is checked")
	fs.IntVar(&o.sinkMaxDevices, "sink-max-devices", sink.DefaultMaxDevices, "devices whose recent sequence numbers the sink remembers to recognise redeliveries; each costs about 700 bytes of memory (see README)")
	fs.StringVar(&o.natsURL, "nats-url", "", "store readings in NATS JetStream instead of -sink: the servers, comma-separated (nats://host:4222,...); for replicas behind one load balancer")
	fs.StringVar(&o.natsStream, "nats-stream", "TELEMETRY", "with -nats-url: the JetStream stream that stores the readings")
	fs.StringVar(&o.natsSubject, "nats-subject", "telemetry", "with -nats-url: readings are published to <subject>.<device>; the stream must capture <subject>.>")
	fs.IntVar(&o.natsReplicas, "nats-replicas", 0, "with -nats-url: create the stream with this many replicas (1 to 5) if it does not exist; 0 requires an existing stream")
	fs.DurationVar(&o.natsDuplicates, "nats-duplicates", jetstream.DefaultDuplicates, "with -nats-replicas: the duplicate window of a created stream; it must outlast a device's reconnect and retry")
	fs.DurationVar(&o.natsAckTimeout, "nats-ack-timeout", jetstream.DefaultAckTimeout, "with -nats-url: how long a reading waits for JetStream's acknowledgement before the device is disconnected and sends it again")
	fs.IntVar(&o.natsMaxPending, "nats-max-pending", jetstream.DefaultMaxPending, "with -nats-url: readings waiting for JetStream's acknowledgement at most; devices are slowed down beyond")
	fs.IntVar(&o.maxPayload, "max-payload", 64<<10, "largest reading in bytes")
	fs.StringVar(&o.topicPrefix, "topic-prefix", "telemetry/", "topics devices may publish to")
	fs.StringVar(&o.topicPolicy, "topic-policy", "", "JSON file of rules per MQTT topic filter under -topic-prefix: the client ranges each admits (see README); empty: every admitted client may publish under -topic-prefix")

	fs.Float64Var(&o.rate, "rate", 0, "readings per second per client (IPv4 address or IPv6 /64); 0: unlimited")
	fs.IntVar(&o.rateBurst, "rate-burst", 20, "readings a client may send at once")
	fs.DurationVar(&o.rateMaxWait, "rate-max-wait", time.Second, "how long an MQTT publisher over its rate is slowed down before it is refused")

	fs.StringVar(&o.kubeHealthAddr, "kube-health-addr", "", "serve a kube-proxy-compatible healthCheckNodePort answer here (node-local deployments); empty disables")
	fs.StringVar(&o.kubeService, "kube-service", "", "namespace/name of the Service, for -kube-health-addr")
	fs.StringVar(&o.kubeEndpoint, "kube-endpoint", "", "this pod's endpoint ip:port, reported ready by -kube-health-addr (default: the MQTT address)")

	fs.DurationVar(&o.drainDelay, "drain-delay", 0, "after SIGTERM, report not ready for this long before closing listeners (use 0 with a preStop sleep)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "bound on the whole graceful shutdown")
	fs.StringVar(&o.logFormat, "log-format", "json", "json|text")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug|info|warn|error")
	fs.StringVar(&o.mqttLogLevel, "mqtt-log-level", "warn", "lowest level of the MQTT server's own lines (protocol errors, keep alive expiries): debug|info|warn|error|off")
	fs.Var(&formerFlag{v: "warn"}, "mochi-log-level", "the former name of -mqtt-log-level (the gateway ran on mochi-mqtt)")

	fs.BoolVar(&o.demo, "demo", false, "run the self-contained demo on loopback: gateway, a load balancer sending PROXY v2, simulated devices; print what every layer saw and exit")
	fs.BoolVar(&o.verbose, "v", false, "with -demo: also print the gateway's log lines")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")

	fs.VisitAll(func(f *flag.Flag) { f.Usage += " [$" + envName(f.Name) + "]" })
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `telemetry-gateway: IoT ingest over MQTT 3.1.1/5 on TLS and HTTP, logging the client
address seen at every layer (socket, PROXY protocol, TLS, MQTT, X-Forwarded-For).

Every flag can also be set with the environment variable named after it
(-mqtt-addr: GATEWAY_MQTT_ADDR); a flag on the command line wins. An empty
variable counts as unset: -http-addr '' disables HTTP ingest,
GATEWAY_HTTP_ADDR='' leaves it on its default address.

  go run ./telemetry-gateway -demo        # from examples/: the whole chain on loopback

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments: %q", errUsage, fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	from := map[string]string{} // flag name -> how the user spelt it
	var errs []error
	formerSet := map[string]bool{} // present name -> its former name is on the command line
	for former, now := range formerNames {
		formerSet[now] = set[former]
	}
	fs.VisitAll(func(f *flag.Flag) {
		from[f.Name] = "-" + f.Name
		if set[f.Name] {
			return
		}
		if now, ok := formerNames[f.Name]; ok && (set[now] || getenv(envName(now)) != "") {
			return // the flag's present name, on the command line or in its variable, wins
		}
		if formerSet[f.Name] {
			return // the flag's former name on the command line wins over a variable
		}
		if v := getenv(envName(f.Name)); v != "" {
			from[f.Name] = "$" + envName(f.Name)
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("$%s: %w", envName(f.Name), err))
			}
		}
	})
	for former, now := range formerNames {
		if (set[former] || from[former] != "-"+former) && !set[now] && from[now] == "-"+now {
			_ = fs.Set(now, fs.Lookup(former).Value.String()) // checked with the present flag's value below
			from[now] = from[former]                          // a bad value is named as the user spelt its flag
		}
	}
	given := map[string]string{} // flag name -> its value, for the flags set by flag or variable
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || from[f.Name] != "-"+f.Name {
			given[f.Name] = f.Value.String()
		}
	})
	if len(errs) == 0 {
		errs = o.check(from, given)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", errUsage, errors.Join(errs...))
	}
	return o, nil
}

// check reports every value that parses but makes no sense, each as
// "-flag value: what is wanted", naming the flag as the user set it
// (from maps a flag to "-flag" or "$GATEWAY_FLAG"; given holds the values
// of the flags that were set either way).
func (o *options) check(from, given map[string]string) []error {
	var errs []error
	bad := func(name string, value any, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s %v: %s", from[name], value, fmt.Sprintf(format, a...)))
	}
	// A flag that means something only beside another one is an error
	// without it, not a setting silently ignored.
	for _, n := range []struct {
		flags []string
		needs string
		ok    bool
	}{
		{[]string{"nats-stream", "nats-subject", "nats-replicas", "nats-max-pending", "nats-ack-timeout", "nats-duplicates"}, "nats-url", o.natsURL != ""},
		{[]string{"ws-trusted", "ws-header", "ws-proxy-trusted", "ws-hosts", "ws-origins", "ws-proto-header"}, "ws-addr", o.wsAddr != ""},
		{[]string{"http-header"}, "http-trusted", o.httpTrusted.Len() > 0},
		{[]string{"kube-service", "kube-endpoint"}, "kube-health-addr", o.kubeHealthAddr != ""},
		{[]string{"rate-burst", "rate-max-wait"}, "rate", o.rate > 0},
		{[]string{"proxy-headerless", "proxy-header-timeout"}, "proxy-trusted, -proxy-trusted-file or -ws-proxy-trusted",
			o.proxyTrusted.Len() > 0 || o.proxyTrustedFile != "" || o.wsProxyTrusted.Len() > 0},
		{[]string{"v"}, "demo", o.demo},
		{[]string{"http-trusted", "http-header"}, "http-addr", o.httpAddr != ""},
		{[]string{"explain-allow"}, "admin-addr", o.adminAddr != ""},
		{[]string{"sink-check-interval"}, "sink-min-free above 0", o.sinkMinFree > 0},
		{[]string{"nats-duplicates"}, "nats-replicas above 0, which creates the stream it is the window of", o.natsReplicas > 0},
	} {
		for _, f := range n.flags {
			if v, ok := given[f]; ok && !n.ok {
				bad(f, fmt.Sprintf("%q", v), "needs -%s, without which it does nothing", n.needs)
			}
		}
	}
	if o.demo {
		// The demo builds its own gateway on loopback: a flag given
		// beside it would be ignored. A variable is left alone, so that
		// the demo runs in a shell or container configured for the
		// gateway itself.
		for _, f := range slices.Sorted(maps.Keys(given)) {
			if from[f] == "-"+f && f != "demo" && f != "v" && f != "version" {
				bad(f, fmt.Sprintf("%q", given[f]), "contradicts -demo, which runs a gateway of its own on loopback and takes no flag but -v")
			}
		}
	}
	if math.IsNaN(o.rate) || math.IsInf(o.rate, 0) || o.rate < 0 {
		bad("rate", o.rate, "want readings per second, a finite number ≥ 0 (0: unlimited)")
	}
	if o.rateBurst < 0 || (o.rateBurst == 0 && o.rate > 0) {
		bad("rate-burst", o.rateBurst, "want at least 1 reading")
	}
	if o.maxPayload <= 0 || o.maxPayload > gateway.MaxPayloadLimit {
		bad("max-payload", o.maxPayload, "want 1 to %d bytes", gateway.MaxPayloadLimit)
	}
	if o.sinkMaxDevices <= 0 {
		bad("sink-max-devices", o.sinkMaxDevices, "want at least 1 device")
	}
	if o.mqttAddr == "" {
		bad("mqtt-addr", `""`, "want the MQTT listener's host:port; unlike -http-addr it cannot be disabled")
	}
	if o.sinkPath == "" && o.natsURL == "" {
		bad("sink", `""`, "want the file readings are appended to, or -nats-url")
	}
	for _, h := range []struct {
		name, header, listener string
		trusted                clientip.PrefixSet
	}{
		{"http-header", o.httpHeader, o.httpAddr, o.httpTrusted},
		{"ws-header", o.wsHeader, o.wsAddr, o.wsTrusted},
	} {
		if h.listener == "" || h.trusted.Len() == 0 {
			continue // not read; the table above names a header given without its listener
		}
		if _, err := clientip.New(clientip.Config{TrustedProxies: h.trusted, Header: h.header}); err != nil {
			bad(h.name, fmt.Sprintf("%q", h.header), "%v", err)
		}
	}
	if o.natsURL != "" {
		if from["sink"] != "-sink" || o.sinkPath != "telemetry.jsonl" {
			bad("sink", o.sinkPath, "contradicts %s: readings go to JetStream or to a file, not both", from["nats-url"])
		}
		for _, f := range []string{"sink-sync", "sink-min-free", "sink-check-interval", "sink-max-devices"} {
			if v, ok := given[f]; ok {
				bad(f, v, "contradicts %s: it configures the -sink file, which JetStream replaces", from["nats-url"])
			}
		}
		if o.natsStream == "" || strings.ContainsAny(o.natsStream, ".*> \t") {
			bad("nats-stream", fmt.Sprintf("%q", o.natsStream), "want a stream name without '.', '*', '>' or spaces")
		}
		if o.natsSubject == "" || strings.ContainsAny(o.natsSubject, "*> \t") || strings.HasSuffix(o.natsSubject, ".") || strings.HasPrefix(o.natsSubject, ".") {
			bad("nats-subject", fmt.Sprintf("%q", o.natsSubject), "want subject tokens without wildcards, such as telemetry")
		}
		if o.natsReplicas < 0 || o.natsReplicas > 5 {
			bad("nats-replicas", o.natsReplicas, "want 1 to 5 (0: the stream must exist)")
		}
		if o.natsMaxPending <= 0 {
			bad("nats-max-pending", o.natsMaxPending, "want at least 1 reading")
		}
		if o.natsAckTimeout <= 0 {
			bad("nats-ack-timeout", o.natsAckTimeout, "want a duration > 0")
		}
		if o.natsDuplicates <= 0 {
			bad("nats-duplicates", o.natsDuplicates, "want a duration > 0")
		} else if o.natsReplicas > 0 && o.natsDuplicates <= o.natsAckTimeout {
			bad("nats-duplicates", o.natsDuplicates, "want longer than -nats-ack-timeout %v: a device sends a reading again only after that", o.natsAckTimeout)
		}
	}
	if err := gateway.CheckTopicPrefix(o.topicPrefix); err != nil {
		bad("topic-prefix", fmt.Sprintf("%q", o.topicPrefix), "%v", err)
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		zeroOK   bool
		whatZero string
	}{
		{"proxy-header-timeout", o.proxyHeaderTimeout, false, ""},
		{"tls-handshake-timeout", o.handshakeTimeout, false, ""},
		{"mqtt-connect-timeout", o.connectTimeout, false, ""},
		{"http-read-timeout", o.httpReadTimeout, false, ""},
		{"shutdown-timeout", o.shutdownTimeout, false, ""},
		{"sink-check-interval", o.sinkCheckInterval, false, ""},
		{"rate-max-wait", o.rateMaxWait, true, "refuse at once"},
		{"drain-delay", o.drainDelay, true, "no delay"},
	} {
		switch {
		case d.zeroOK && d.v < 0:
			bad(d.name, d.v, "want a duration ≥ 0 (0: %s)", d.whatZero)
		case !d.zeroOK && d.v <= 0:
			bad(d.name, d.v, "want a duration > 0")
		}
	}
	if o.drainDelay > 0 && o.shutdownTimeout > 0 && o.drainDelay >= o.shutdownTimeout {
		// The drain delay is spent inside the shutdown's bound: nothing
		// would be left to close the listeners and commit the sink.
		bad("drain-delay", o.drainDelay, "want less than -shutdown-timeout %v, which bounds the whole shutdown, this delay included", o.shutdownTimeout)
	}
	if _, err := parseLevel(o.logLevel); err != nil || strings.EqualFold(o.logLevel, "off") {
		bad("log-level", fmt.Sprintf("%q", o.logLevel), "want debug, info, warn or error")
	}
	if _, err := parseLevel(o.mqttLogLevel); err != nil {
		bad("mqtt-log-level", fmt.Sprintf("%q", o.mqttLogLevel), "want debug, info, warn, error or off")
	}
	if o.logFormat != "json" && o.logFormat != "text" {
		bad("log-format", fmt.Sprintf("%q", o.logFormat), "want json or text")
	}
	if _, err := o.endpoint(); err != nil {
		bad("kube-endpoint", fmt.Sprintf("%q", o.kubeEndpoint), "want ip:port")
	}
	if ns, name, ok := strings.Cut(o.kubeService, "/"); o.kubeHealthAddr != "" && (!ok || ns == "" || name == "") {
		bad("kube-service", fmt.Sprintf("%q", o.kubeService), "want namespace/name of the Service, which -kube-health-addr reports")
	}
	if v, ok := given["ws-hosts"]; ok && len(splitList(v)) == 0 {
		// Empty means any host: a blank value must not turn the check off.
		bad("ws-hosts", fmt.Sprintf("%q", v), "names no host: give hosts, or leave the flag unset to answer to any")
	}
	if o.tlsCert == "" && !o.tlsAtLB && len(splitList(o.tlsHosts)) == 0 {
		bad("tls-hosts", fmt.Sprintf("%q", o.tlsHosts), "want at least one name or address for the generated certificate")
	}
	if _, err := o.wsOriginReader(); err != nil {
		bad("ws-hosts", fmt.Sprintf("%q", o.wsHosts), "%v", err)
	}
	if _, err := o.wsAllowedOrigins(); err != nil {
		bad("ws-origins", fmt.Sprintf("%q", o.wsOrigins), "%v", err)
	}
	if o.wsProtoHeader != "" && (strings.ContainsAny(o.wsProtoHeader, " ,:") || o.wsTrusted.Len() == 0) {
		bad("ws-proto-header", fmt.Sprintf("%q", o.wsProtoHeader), "want one header name, written by the proxies of -ws-trusted")
	}
	if o.proxyRequired && o.proxyTrusted.Len() == 0 && o.proxyTrustedFile == "" {
		bad("proxy-required", o.proxyRequired, "needs -proxy-trusted or -proxy-trusted-file: without a trusted load balancer every client would be refused")
	}
	if o.tlsAtLB {
		if o.proxyTrusted.Len() == 0 && o.proxyTrustedFile == "" {
			bad("tls-at-lb", o.tlsAtLB, "needs -proxy-trusted or -proxy-trusted-file: the TLS facts are believed only from trusted load balancers")
		}
		for _, f := range []struct{ name, v string }{
			{"tls-cert", o.tlsCert}, {"tls-key", o.tlsKey}, {"tls-self-signed-out", o.tlsSelfSignedOut}, {"tls-client-auth", o.tlsClientAuth},
		} {
			if f.v != "" {
				bad(f.name, f.v, "contradicts %s: the load balancer terminates TLS and requires client certificates", from["tls-at-lb"])
			}
		}
		if v, ok := given["tls-hosts"]; ok {
			bad("tls-hosts", fmt.Sprintf("%q", v), "contradicts %s: the gateway generates no certificate", from["tls-at-lb"])
		}
		if o.wsAddr != "" {
			bad("ws-addr", o.wsAddr, "contradicts %s: every CONNECT then needs a client certificate the load balancer verified, which no MQTT-over-WebSocket connection carries", from["tls-at-lb"])
		}
	}
	if !o.tlsAtLB {
		if (o.tlsCert == "") != (o.tlsKey == "") {
			bad("tls-cert", fmt.Sprintf("%q", o.tlsCert), "needs -tls-key %q and the reverse: a certificate and its key, or neither (a generated certificate)", o.tlsKey)
		}
		if o.tlsCert != "" {
			for _, f := range []string{"tls-hosts", "tls-self-signed-out"} {
				if v, ok := given[f]; ok {
					bad(f, fmt.Sprintf("%q", v), "contradicts %s: it is for the certificate generated without one", from["tls-cert"])
				}
			}
		}
	}
	switch o.tlsClientAuth {
	case "":
	case "none":
		if o.tlsClientCA != "" {
			bad("tls-client-auth", o.tlsClientAuth, "contradicts %s: a CA bundle for client certificates that are never asked for", from["tls-client-ca"])
		}
	case "optional", "require":
		if o.tlsClientCA == "" {
			bad("tls-client-auth", o.tlsClientAuth, "needs -tls-client-ca: without a CA bundle no client certificate can be verified, and an unverified one proves nothing")
		}
	default:
		bad("tls-client-auth", fmt.Sprintf("%q", o.tlsClientAuth), "want none, optional or require")
	}
	return errs
}

// formerFlag is a flag's former name (formerNames): it keeps what it is
// given, which parseOptions passes on to the flag's present name unless
// that one was given at the same level or above.
type formerFlag struct{ v string }

func (f *formerFlag) String() string     { return f.v }
func (f *formerFlag) Set(v string) error { f.v = v; return nil }

// prefixFlag is a repeatable clientip.PrefixSet flag that refuses a value
// naming no address: -proxy-trusted ' ' would otherwise turn PROXY protocol
// off, and -allow ' ' admit everyone, without a word.
type prefixFlag struct{ set *clientip.PrefixSet }

func (f prefixFlag) String() string {
	if f.set == nil {
		return ""
	}
	return f.set.String()
}

func (f prefixFlag) Set(v string) error {
	n, err := clientip.ParsePrefixSet(v)
	if err != nil {
		return err
	}
	if n.Len() == 0 {
		return fmt.Errorf("%q names no address: give addresses, CIDRs or presets, or leave the flag unset", v)
	}
	*f.set = f.set.Union(n)
	return nil
}

// byteSize is a flag for a number of bytes: an integer, optionally with a
// KiB, MiB or GiB suffix.
type byteSize uint64

func (b byteSize) String() string {
	for _, u := range []struct {
		suffix string
		n      uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if uint64(b) >= u.n && uint64(b)%u.n == 0 {
			return fmt.Sprintf("%d%s", uint64(b)/u.n, u.suffix)
		}
	}
	return fmt.Sprint(uint64(b))
}

func (b *byteSize) Set(s string) error {
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		n      uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.n
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > math.MaxUint64/mult {
		return fmt.Errorf("%q: want a number of bytes, optionally with a KiB, MiB or GiB suffix", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	if strings.EqualFold(s, "off") {
		return slog.LevelError + 100, nil
	}
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

func (o *options) logger(w io.Writer) (*slog.Logger, error) {
	lvl, err := parseLevel(o.logLevel)
	if err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	switch o.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want json or text", o.logFormat)
}

// wsOriginConfig is the WebSocket listener's origin configuration.
func (o *options) wsOriginConfig() clientip.OriginConfig {
	return clientip.OriginConfig{Proto: o.wsProtoHeader, AllowedHosts: splitList(o.wsHosts)}
}

// wsOriginReader checks wsOriginConfig.
func (o *options) wsOriginReader() (*clientip.OriginReader, error) {
	return clientip.NewOriginReader(o.wsOriginConfig())
}

// wsAllowedOrigins parses -ws-origins.
func (o *options) wsAllowedOrigins() ([]clientip.Origin, error) {
	var out []clientip.Origin
	for _, v := range splitList(o.wsOrigins) {
		org, err := clientip.ParseOrigin(v)
		if err != nil {
			return nil, fmt.Errorf("%q: want scheme://host[:port]", v)
		}
		out = append(out, org)
	}
	return out, nil
}

// splitList splits a comma- or space-separated list.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// lbTLSConfig is the configuration for TLS terminated at the load balancer
// (-tls-at-lb): the CA that verifies forwarded client certificates again,
// if -tls-client-ca names one.
func (o *options) lbTLSConfig(log *slog.Logger) (*chain.LBTLSConfig, error) {
	cfg := &chain.LBTLSConfig{}
	if o.tlsClientCA == "" {
		log.Warn("-tls-at-lb without -tls-client-ca: a device's identity is the common name its load balancer reports, from any CA the load balancer trusts")
		return cfg, nil
	}
	pool, err := pki.LoadPool(o.tlsClientCA)
	if err != nil {
		return nil, fmt.Errorf("-tls-client-ca: %w", err)
	}
	cfg.ClientCAs = pool
	return cfg, nil
}

// tlsConfig loads the configured certificate or generates a self-signed one,
// and the CA that verifies client certificates. check has already refused
// every -tls-client-auth that would ask for a certificate nothing verifies.
func (o *options) tlsConfig(log *slog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case o.tlsCert != "" || o.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	default:
		hosts := splitList(o.tlsHosts)
		cert, err := pki.SelfSigned(hosts...)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
		log.Warn("no -tls-cert: generated a self-signed certificate; clients must pin it", "hosts", hosts,
			"sha256", pki.Fingerprint(cert), "written_to", o.tlsSelfSignedOut)
		if o.tlsSelfSignedOut != "" {
			if err := os.WriteFile(o.tlsSelfSignedOut, pki.CertPEM(cert), 0o644); err != nil {
				return nil, err
			}
		}
	}
	if o.tlsClientCA == "" {
		return cfg, nil
	}
	pool, err := pki.LoadPool(o.tlsClientCA)
	if err != nil {
		return nil, fmt.Errorf("-tls-client-ca: %w", err)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if o.tlsClientAuth == "require" {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func (o *options) endpoint() (netip.AddrPort, error) {
	if o.kubeEndpoint == "" {
		return netip.AddrPort{}, nil
	}
	ap, err := netip.ParseAddrPort(o.kubeEndpoint)
	if err != nil {
		return ap, fmt.Errorf("-kube-endpoint: %w", err)
	}
	return ap, nil
}
