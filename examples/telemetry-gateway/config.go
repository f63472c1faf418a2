package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/proxyproto"
)

// envPrefix turns a flag name into its environment variable: -mqtt-addr is
// GATEWAY_MQTT_ADDR. The prefix keeps clear of the variables Kubernetes
// injects for Services (a Service named "mqtt" brings MQTT_PORT, MQTT_SERVICE_HOST, …).
const envPrefix = "GATEWAY_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// options is the command line.
type options struct {
	mqttAddr, httpAddr, adminAddr string

	proxyTrusted       clientip.PrefixSet
	proxyHeaderless    proxyproto.HeaderlessPolicy
	proxyHeaderTimeout time.Duration

	httpTrusted clientip.PrefixSet
	httpHeader  string
	masquerade  clientip.PrefixSet
	allow       clientip.PrefixSet

	tlsCert, tlsKey, tlsClientCA, tlsClientAuth string
	tlsHosts, tlsSelfSignedOut                  string
	handshakeTimeout, connectTimeout            time.Duration
	httpReadTimeout                             time.Duration

	sinkPath    string
	sinkSync    sink.SyncMode
	maxPayload  int
	topicPrefix string

	rate        float64
	rateBurst   int
	rateMaxWait time.Duration

	kubeHealthAddr, kubeService, kubeEndpoint string

	drainDelay, shutdownTimeout time.Duration
	logFormat, logLevel         string
	mochiLogLevel               string

	demo, verbose bool
}

// parseOptions reads flags, then the environment for every flag not given
// on the command line.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("telemetry-gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)

	fs.StringVar(&o.mqttAddr, "mqtt-addr", ":8883", "MQTT over TLS listener")
	fs.StringVar(&o.httpAddr, "http-addr", ":8080", "HTTP ingest listener (POST /v1/telemetry); empty disables")
	fs.StringVar(&o.adminAddr, "admin-addr", ":9090", "admin listener: /livez, /readyz, /metrics; empty disables")

	fs.Var(&o.proxyTrusted, "proxy-trusted", "load balancers that must send a PROXY header on the MQTT port (addresses, CIDRs or loopback|private|linklocal|cgnat; repeatable); a header from anyone else is refused; empty: no PROXY protocol")
	fs.TextVar(&o.proxyHeaderless, "proxy-headerless", proxyproto.HeaderlessRefuse, "refuse|allow connections from -proxy-trusted without a header (allow for TCP health checks)")
	fs.DurationVar(&o.proxyHeaderTimeout, "proxy-header-timeout", proxyproto.DefaultReadHeaderTimeout, "deadline for the PROXY header")

	fs.Var(&o.httpTrusted, "http-trusted", "proxies trusted to append -http-header on the HTTP port (repeatable)")
	fs.StringVar(&o.httpHeader, "http-header", "X-Forwarded-For", "forwarding header read from -http-trusted peers: X-Forwarded-For, Forwarded, or a single-address header such as X-Real-IP")
	fs.Var(&o.masquerade, "masquerade", "node addresses that stand in for clients under externalTrafficPolicy: Cluster (repeatable)")
	fs.Var(&o.allow, "allow", "admit only clients resolved inside these ranges, on MQTT (CONNACK not authorized) and HTTP (403); empty admits every resolved client (repeatable)")

	fs.StringVar(&o.tlsCert, "tls-cert", "", "server certificate chain (PEM); empty generates a self-signed certificate at start")
	fs.StringVar(&o.tlsKey, "tls-key", "", "server private key (PEM)")
	fs.StringVar(&o.tlsHosts, "tls-hosts", "localhost,127.0.0.1", "names and addresses of the generated self-signed certificate")
	fs.StringVar(&o.tlsSelfSignedOut, "tls-self-signed-out", "", "write the generated certificate here (PEM) for clients to pin")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "CA bundle (PEM) for device client certificates; their subject is logged as the device identity")
	fs.StringVar(&o.tlsClientAuth, "tls-client-auth", "optional", "optional|require a client certificate (with -tls-client-ca)")
	fs.DurationVar(&o.handshakeTimeout, "tls-handshake-timeout", 5*time.Second, "deadline for the TLS handshake")
	fs.DurationVar(&o.httpReadTimeout, "http-read-timeout", 30*time.Second, "deadline for reading one HTTP ingest request, headers and body")
	fs.DurationVar(&o.connectTimeout, "mqtt-connect-timeout", 10*time.Second, "deadline for CONNECT after the handshake")

	fs.StringVar(&o.sinkPath, "sink", "telemetry.jsonl", "durable sink: JSON Lines file, one record per accepted reading")
	fs.Var(&o.sinkSync, "sink-sync", "fsync: acknowledge after fsync (survives a machine crash); write: after write(2) (survives a process crash)")
	fs.IntVar(&o.maxPayload, "max-payload", 64<<10, "largest reading in bytes")
	fs.StringVar(&o.topicPrefix, "topic-prefix", "telemetry/", "topics devices may publish to")

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
	fs.StringVar(&o.mochiLogLevel, "mochi-log-level", "warn", "lowest level of the embedded broker's own lines: debug|info|warn|error|off")

	fs.BoolVar(&o.demo, "demo", false, "run the self-contained demo on loopback: gateway, a load balancer sending PROXY v2, simulated devices; print what every layer saw and exit")
	fs.BoolVar(&o.verbose, "v", false, "with -demo: also print the gateway's log lines")

	fs.VisitAll(func(f *flag.Flag) { f.Usage += " [$" + envName(f.Name) + "]" })
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `telemetry-gateway: IoT ingest over MQTT 3.1.1/5 on TLS and HTTP, logging the client
address seen at every layer (socket, PROXY protocol, TLS, MQTT, X-Forwarded-For).

Every flag can also be set with the environment variable named after it
(-mqtt-addr: GATEWAY_MQTT_ADDR); a flag on the command line wins.

  go run ./telemetry-gateway -demo        # from examples/: the whole chain on loopback

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("$%s: %w", envName(f.Name), err))
			}
		}
	})
	return o, errors.Join(errs...)
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

// tlsConfig loads the configured certificate or generates a self-signed one.
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
		hosts := strings.FieldsFunc(o.tlsHosts, func(r rune) bool { return r == ',' || r == ' ' })
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
	if o.tlsClientCA != "" {
		pool, err := pki.LoadPool(o.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-client-ca: %w", err)
		}
		cfg.ClientCAs = pool
		switch o.tlsClientAuth {
		case "optional":
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		case "require":
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		default:
			return nil, fmt.Errorf("-tls-client-auth %q: want optional or require", o.tlsClientAuth)
		}
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
