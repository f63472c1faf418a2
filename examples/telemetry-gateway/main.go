// Command telemetry-gateway is sourceip's reference IoT ingest gateway: MQTT
// 3.1.1 and 5 over TLS on an MQTT server of its own behind a listener
// chain that reads PROXY headers only from trusted load balancers, plus an
// HTTP ingest endpoint behind trusted proxies. It logs the client address seen
// at every layer, resolves the real client with sourceip's clientip, applies
// an allowlist and per-client rate limits at the edge, and appends every
// accepted reading with its provenance to a durable sink before it
// acknowledges it.
//
//	go run ./telemetry-gateway -demo    # from examples/: the whole chain on loopback
//	go run ./telemetry-gateway -help    # every flag and its environment variable
//
// See README.md in this directory.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/demo"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/gateway"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/jetstream"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/internal/version"
	"github.com/sourceip/sourceip/middleware"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// idleGCPercent is the collector's target while the gateway takes no
// readings, unless GOGC is set (gateway.Config.IdleGCPercent; README,
// "Memory per device").
const idleGCPercent = 25

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it serves until ctx is done and returns
// the exit code: 0, 1 when the gateway fails to start or fails while it
// serves (its sink failed, say), 2 for a usage error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, getenv, stderr)
	if o != nil {
		o.idleGCPercent = idleGC(getenv)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "telemetry-gateway:", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, "telemetry-gateway", version.String())
		return 0
	}
	if o.demo {
		return runDemo(ctx, stdout, stderr, o.verbose)
	}
	if err := serve(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "telemetry-gateway:", err)
		return 1
	}
	return 0
}

// exitBrokenPipe is the demo's exit code when its output was closed before
// it finished: 128 + SIGPIPE, what a shell reports for a process that
// SIGPIPE ended.
const exitBrokenPipe = 128 + 13

// runDemo runs the demo and returns the exit code. Its output may go to a
// reader that leaves early (-demo -v 2>&1 | head): by default the next
// write to a closed pipe on standard output or error ends the process with
// SIGPIPE, before the demo removes its temporary directory. Asking for
// SIGPIPE makes those writes fail with EPIPE instead (see os/signal); the
// first one stops the demo, which shuts the gateway down and removes its
// files, and the command exits with exitBrokenPipe.
func runDemo(ctx context.Context, stdout, stderr io.Writer, verbose bool) int {
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var broken atomic.Bool
	closed := func() { broken.Store(true); cancel() }
	err := demo.Run(ctx, &pipeWatch{w: stdout, closed: closed}, &pipeWatch{w: stderr, closed: closed}, verbose)
	switch {
	case broken.Load():
		return exitBrokenPipe
	case err != nil:
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

// pipeWatch passes writes on to w and calls closed when one fails with
// EPIPE: the reader went away.
type pipeWatch struct {
	w      io.Writer
	closed func()
}

func (p *pipeWatch) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.closed()
	}
	return n, err
}

// serve runs the gateway until ctx is done, then drains it. The error is the
// first thing that went wrong: start-up, or a failure while serving (the
// sink's), which Shutdown reports.
func serve(ctx context.Context, o *options, logOut io.Writer) error {
	// SIGHUP is caught from the start, with or without a file to reload:
	// one sent while the gateway starts (the file changed meanwhile)
	// reloads it once the gateway has started, and one sent to a gateway
	// without -proxy-trusted-file (a reload hook that servers like nginx
	// and mosquitto honour, sent to every container) is logged, instead of
	// ending the process, which is SIGHUP's default action.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var fileLBs clientip.PrefixSet
	if o.proxyTrustedFile != "" {
		var err error
		if fileLBs, err = readTrustFile(ctx, o.proxyTrustedFile); err != nil {
			return fmt.Errorf("-proxy-trusted-file: %w", err)
		}
	}
	g, log, cleanup, err := build(o, logOut)
	if err != nil {
		return err
	}
	defer cleanup()
	if o.proxyTrustedFile != "" {
		warnWideTrust(log, "-proxy-trusted-file", fileLBs)
		if err := installTrustFile(g, fileLBs); err != nil {
			return fmt.Errorf("-proxy-trusted-file: %w", err)
		}
	}
	if err := g.Start(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		select {
		case <-hup:
			if o.proxyTrustedFile == "" {
				log.Info("SIGHUP: nothing to reload (no -proxy-trusted-file); serving on")
				continue
			}
			reloadTrustFile(ctx, g, o.proxyTrustedFile, log)
		case <-ctx.Done():
		}
	}
	log.Info("signal received; shutting down", "drain_delay", o.drainDelay, "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	return g.Shutdown(sctx, o.drainDelay)
}

// build makes the gateway the options describe, with Prometheus metrics
// through the OpenTelemetry exporter: the gateway's own instruments and
// otelsourceip's.
func build(o *options, logOut io.Writer) (*gateway.Gateway, *slog.Logger, func(), error) {
	log, err := o.logger(logOut)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := o.gatewayConfig(log)
	if err != nil {
		return nil, nil, nil, err
	}
	reg := promclient.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		return nil, nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	cleanup := func() { _ = mp.Shutdown(context.Background()) }
	cfg.MeterProvider = mp
	cfg.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if cfg.Observer, err = observer(mp); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if o.natsURL != "" {
		if cfg.Store, err = o.jetStream(log); err != nil {
			cleanup()
			return nil, nil, nil, err
		}
	}
	g, err := gateway.New(cfg)
	if err != nil {
		if cfg.Store != nil {
			cfg.Store.Close()
		}
		cleanup()
		return nil, nil, nil, err
	}
	return g, log, cleanup, nil
}

// jetStream connects to the JetStream stream that -nats-url and the flags
// after it name, creating it with -nats-replicas.
func (o *options) jetStream(log *slog.Logger) (*jetstream.Sink, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, _ := os.Hostname()
	return jetstream.Open(ctx, jetstream.Config{
		URL: o.natsURL, Stream: o.natsStream, Subject: o.natsSubject,
		Replicas: o.natsReplicas, Duplicates: o.natsDuplicates,
		MaxPending: o.natsMaxPending, AckTimeout: o.natsAckTimeout,
		Name: "telemetry-gateway " + host, Logger: log,
	})
}

// gatewayConfig turns the options into the gateway's configuration.
func (o *options) gatewayConfig(log *slog.Logger) (gateway.Config, error) {
	var tlsCfg *tls.Config
	var lbTLS *chain.LBTLSConfig
	var err error
	if o.tlsAtLB {
		lbTLS, err = o.lbTLSConfig(log)
	} else {
		tlsCfg, err = o.tlsConfig(log)
	}
	if err != nil {
		return gateway.Config{}, err
	}
	ep, err := o.endpoint()
	if err != nil {
		return gateway.Config{}, err
	}
	var topics *middleware.Policy
	if o.topicPolicy != "" {
		if topics, err = readTopicPolicy(o.topicPolicy, o.topicPrefix); err != nil {
			return gateway.Config{}, fmt.Errorf("-topic-policy: %w", err)
		}
	}
	mqttLevel, _ := parseLevel(o.mqttLogLevel) // checked by parseOptions
	header := o.httpHeader
	if o.httpTrusted.Len() == 0 {
		header = "" // nobody is trusted to write it
	}
	origins, _ := o.wsAllowedOrigins() // checked by parseOptions
	for _, f := range []struct {
		flag string
		set  clientip.PrefixSet
	}{{"-proxy-trusted", o.proxyTrusted}, {"-http-trusted", o.httpTrusted}, {"-ws-trusted", o.wsTrusted}, {"-ws-proxy-trusted", o.wsProxyTrusted}} {
		warnWideTrust(log, f.flag, f.set)
	}
	return gateway.Config{
		MQTTAddr: o.mqttAddr, HTTPAddr: o.httpAddr, AdminAddr: o.adminAddr, ExplainAllow: o.explainAllow,
		ProxyTrusted: o.proxyTrusted, ProxyHeaderless: o.proxyHeaderless, ProxyHeaderTimeout: o.proxyHeaderTimeout, RequireProxy: o.proxyRequired,
		HTTPTrusted: o.httpTrusted, HTTPHeader: header, Masquerade: o.masquerade, Allow: o.allow,
		WSAddr: o.wsAddr, WSTrusted: o.wsTrusted, WSHeader: o.wsHeader, WSProxyTrusted: o.wsProxyTrusted,
		WSOrigin: o.wsOriginConfig(), WSAllowedOrigins: origins,
		TLS: tlsCfg, LBTLS: lbTLS, HandshakeTimeout: o.handshakeTimeout, ConnectTimeout: o.connectTimeout,
		HTTPReadTimeout: o.httpReadTimeout,
		Sink:            sink.Config{Path: o.sinkPath, Sync: o.sinkSync, MaxDevices: o.sinkMaxDevices},
		SinkMinFree:     uint64(o.sinkMinFree), SinkCheckInterval: o.sinkCheckInterval,
		MaxPayload: o.maxPayload, TopicPrefix: o.topicPrefix, TopicPolicy: topics,
		RateLimit: o.rate, RateBurst: o.rateBurst, RateMaxWait: o.rateMaxWait,
		KubeHealthAddr: o.kubeHealthAddr, KubeService: o.kubeService, KubeEndpoint: ep,
		Logger: log, MQTTLogLevel: mqttLevel, IdleGCPercent: o.idleGCPercent,
	}, nil
}

// idleGC is gateway.Config.IdleGCPercent: idleGCPercent, or 0 (Go's own
// collector settings) when GOGC is set.
func idleGC(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		return 0
	}
	return idleGCPercent
}
