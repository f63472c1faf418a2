// Package gateway is the telemetry gateway: an MQTT server of its own
// (package ingest: MQTT 3.1.1 and 5, ingest only) behind a listener chain that reads PROXY headers only from
// trusted load balancers, terminates TLS with a deadline (or reads what a
// load balancer that terminated it reported) and waits for CONNECT with a
// deadline; the same server over WebSocket behind an ingress (package ws);
// an HTTP ingest endpoint behind chi and the
// sourceip middleware; and an admin server with readiness, liveness and
// Prometheus metrics. Every accepted reading goes to a durable sink with the
// provenance of its sender before it is acknowledged.
//
// For one MQTT device the data flow is:
//
//	TCP accept ─► proxyproto.Listener (trusted LB? read PROXY header with timeout)
//	           ─► middleware.NewListener (clientip resolves the chain once)
//	           ─► chain.Listener: TLS handshake (deadline; SNI, client cert),
//	              or the TLS facts a load balancer reported in the PROXY header
//	           ─► ingest: CONNECT (deadline) ─► Connect: allowlist, one log line
//	           ─► PUBLISH ─► Publish: rate limit, validate, sink (fsync) ─► PUBACK
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/reading"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ws"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/ratelimit"
	"github.com/sourceip/sourceip/trafficpolicy"
	"go.opentelemetry.io/otel/metric/noop"
)

// Gateway is a running telemetry gateway.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	met     *instruments
	allow   *middleware.Policy // nil: allow all resolved clients
	limiter *ratelimit.Limiter
	masq    *masqWarner
	store   Store      // where readings go: sink, or Config.Store
	sink    *sink.Sink // the JSON Lines sink; nil with Config.Store
	disk    *diskWatch // nil: free space not checked

	// Each chain has one trust source that every layer of it reads: the
	// PROXY listener, the connection listener and the resolver for MQTT;
	// the middleware for HTTP. The MQTT chain's can change while serving.
	mqttTrust *clientip.Store
	httpTrust *clientip.Resolver
	wsTrust   *clientip.Resolver
	wsOrigin  *clientip.OriginReader

	srv       *ingest.Server
	proxyLn   *proxyproto.Listener
	chainLn   *chain.Listener
	wsLn      *chain.Listener // nil without WSAddr
	connIDs   atomic.Uint64   // numbers the connections of both
	hook      *hook
	gc        *gcTuner // nil without IdleGCPercent
	httpSrv   *http.Server
	httpLn    net.Listener
	adminSrv  *http.Server
	adminLn   net.Listener
	kubeSrv   *http.Server
	kubeLn    net.Listener
	endpoints *trafficpolicy.Registry
	kubeEP    netip.AddrPort

	draining atomic.Bool
	started  atomic.Bool
	shutdown sync.Once
	wg       sync.WaitGroup
}

// New validates cfg and builds a Gateway; Start binds and serves.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.TopicPrefix == "" {
		cfg.TopicPrefix = "telemetry/"
	}
	if cfg.MasqueradeWarnEvery <= 0 {
		cfg.MasqueradeWarnEvery = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = noop.NewMeterProvider()
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = reading.DefaultMaxBytes
	}
	if cfg.Sink.MaxLineBytes == 0 {
		// A record holds the topic beside the payload: the packet bounds both.
		cfg.Sink.MaxLineBytes = sink.LineBytesFor(cfg.maxPacketSize())
	}
	if cfg.ReceiveMaximum == 0 {
		cfg.ReceiveMaximum = DefaultReceiveMaximum
	}
	if cfg.SinkCheckInterval == 0 {
		cfg.SinkCheckInterval = DefaultSinkCheckInterval
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger}
	var err error
	if g.met, err = newInstruments(cfg.MeterProvider); err != nil {
		return nil, err
	}
	// The MQTT chain: the load balancers are the only trusted hops, and
	// they speak PROXY protocol. Its trust is a Store, so that the load
	// balancers can change without a restart (MQTTTrust); every change is
	// logged as a diff.
	if g.mqttTrust, err = clientip.NewStore(clientip.Config{TrustedProxies: cfg.ProxyTrusted, Masquerade: cfg.Masquerade},
		clientip.StoreOptions{Logger: g.log.With("chain", "mqtt")}); err != nil {
		return nil, fmt.Errorf("gateway: MQTT resolver: %w", err)
	}
	if cfg.HTTPAddr != "" {
		if g.httpTrust, err = clientip.New(clientip.Config{TrustedProxies: cfg.HTTPTrusted, Header: cfg.HTTPHeader, Masquerade: cfg.Masquerade}); err != nil {
			return nil, fmt.Errorf("gateway: HTTP resolver: %w", err)
		}
	}
	if cfg.WSAddr != "" {
		trusted, header := cfg.WSTrusted.Union(cfg.WSProxyTrusted), cfg.WSHeader
		if header == "" {
			header = "X-Forwarded-For"
		}
		if cfg.WSTrusted.Len() == 0 {
			header = "" // nobody is trusted to write it
		}
		if g.wsTrust, err = clientip.New(clientip.Config{TrustedProxies: trusted, Header: header, Masquerade: cfg.Masquerade}); err != nil {
			return nil, fmt.Errorf("gateway: WebSocket resolver: %w", err)
		}
		if g.wsOrigin, err = clientip.NewOriginReader(cfg.WSOrigin); err != nil {
			return nil, fmt.Errorf("gateway: WebSocket origin: %w", err)
		}
	}
	if cfg.Allow.Len() > 0 {
		if g.allow, err = middleware.NewSourceRanges(middleware.SourceRangesConfig{Allow: cfg.Allow, Observer: cfg.Observer}); err != nil {
			return nil, err
		}
	}
	limit := ratelimit.Limit{Rate: cfg.RateLimit, Burst: max(cfg.RateBurst, 1)}
	if cfg.RateLimit == 0 {
		limit.Rate = ratelimit.Inf // no limit: no buckets
	}
	if g.limiter, err = ratelimit.New(ratelimit.Config{Limit: limit}); err != nil {
		return nil, fmt.Errorf("gateway: rate limit: %w", err)
	}
	g.masq = &masqWarner{every: cfg.MasqueradeWarnEvery, log: g.log, seen: make(map[netip.Addr]*masqState)}
	if cfg.Store != nil {
		g.store = cfg.Store
		return g, nil
	}
	sc := cfg.Sink
	if next := sc.OnCommit; next != nil {
		sc.OnCommit = func(n, b int, d time.Duration, err error) { g.met.onCommit(n, b, d, err); next(n, b, d, err) }
	} else {
		sc.OnCommit = g.met.onCommit
	}
	if g.sink, err = sink.Open(sc); err != nil {
		return nil, fmt.Errorf("gateway: %w", err) // it says "sink: …"
	}
	g.store = g.sink
	st := g.sink.Stats()
	if st.TornBytes > 0 {
		g.log.Warn("sink: cut a torn last line left by a crash (it was never acknowledged)", "path", sc.Path, "bytes", st.TornBytes)
	}
	if st.Corrupt > 0 {
		g.log.Warn("sink: complete lines that are not records were kept as they are; they count for no device",
			"path", sc.Path, "lines", st.Corrupt, "first_at_byte", st.FirstCorruptAt, "records", st.Existing)
	}
	if cfg.SinkMinFree > 0 {
		g.disk = newDiskWatch(sc.Path, cfg.SinkMinFree, cfg.FreeSpace, g.log)
		if _, err := g.disk.free(sc.Path); errors.Is(err, errNoStatfs) {
			g.log.Warn("sink: free space cannot be measured on this system; readiness does not check it", "path", sc.Path)
			g.disk = nil
		} else {
			g.disk.check()
		}
	}
	return g, nil
}

// maxPacketSize is the largest MQTT packet the gateway takes: a reading of
// MaxPayload and the rest of its PUBLISH, and at least 64 KiB, so that a
// small MaxPayload leaves room for a long topic.
func (cfg *Config) maxPacketSize() int { return max(cfg.MaxPayload, 64<<10) + 4096 }

// MQTTTrust returns the MQTT chain's trust: the one source the PROXY
// listener, the connection listener and the resolver read. Swap, Update or
// SetRanges on it change which load balancers are believed from the next
// connection on; connections already accepted keep the trust they were
// judged with. Changes are logged as a diff.
func (g *Gateway) MQTTTrust() *clientip.Store { return g.mqttTrust }

// Sink returns the gateway's JSON Lines sink, for its statistics; nil when
// Config.Store replaced it.
func (g *Gateway) Sink() *sink.Sink { return g.sink }

// Store returns where the gateway puts readings: the JSON Lines sink or
// Config.Store.
func (g *Gateway) Store() Store { return g.store }

// Start binds every listener and starts serving. The addresses are known
// when it returns.
func (g *Gateway) Start() error {
	if err := g.startMQTT(); err != nil {
		g.store.Close()
		return err
	}
	if g.cfg.HTTPAddr != "" {
		if err := g.startHTTP(); err != nil {
			g.stopAll(context.Background())
			return err
		}
	}
	if g.cfg.KubeHealthAddr != "" {
		if err := g.startKubeHealth(); err != nil {
			g.stopAll(context.Background())
			return err
		}
	}
	if g.cfg.AdminAddr != "" {
		if err := g.startAdmin(); err != nil {
			g.stopAll(context.Background())
			return err
		}
	}
	g.started.Store(true)
	if g.cfg.IdleGCPercent > 0 {
		g.gc = newGCTuner(g.cfg.IdleGCPercent)
	}
	if g.disk != nil {
		go g.disk.run(g.cfg.SinkCheckInterval)
	}
	if g.endpoints != nil {
		g.endpoints.Set(g.kubeEP, trafficpolicy.EndpointReady)
	}
	g.log.Info("gateway started", "mqtt", g.MQTTAddr(), "ws", g.WSAddr(), "http", g.HTTPAddr(), "admin", g.AdminAddr(),
		"kube_health", g.KubeHealthAddr(), "tls_terminated_by", map[bool]string{false: "gateway", true: "load balancer"}[g.cfg.LBTLS != nil],
		"proxy_trusted", g.cfg.ProxyTrusted.String(),
		"http_trusted", g.cfg.HTTPTrusted.String(), "http_header", g.cfg.HTTPHeader,
		"masquerade", g.cfg.Masquerade.String(), "allow", g.cfg.Allow.String())
	return nil
}

func (g *Gateway) startMQTT() error {
	tcp, err := net.Listen("tcp", g.cfg.MQTTAddr)
	if err != nil {
		return fmt.Errorf("gateway: MQTT listener: %w", err)
	}
	pc := proxyproto.Config{
		Trust:             g.mqttTrust,
		Headerless:        g.cfg.ProxyHeaderless,
		ReadHeaderTimeout: g.cfg.ProxyHeaderTimeout,
		OnReject:          g.onProxyReject,
	}
	if g.cfg.LBTLS != nil {
		pc.MaxHeaderBytes = proxyproto.MaxHeaderBytesLimit // a forwarded client certificate can pass 4 KiB
	}
	g.proxyLn, err = proxyproto.NewListener(tcp, pc)
	if err != nil {
		tcp.Close()
		return fmt.Errorf("gateway: PROXY listener: %w", err)
	}
	g.chainLn, err = chain.New(chain.Config{
		ID:               "mqtts",
		IDs:              &g.connIDs,
		Inner:            middleware.NewListener(g.proxyLn, g.mqttTrust),
		TLS:              g.cfg.TLS,
		LBTLS:            g.cfg.LBTLS,
		HandshakeTimeout: g.cfg.HandshakeTimeout,
		ConnectTimeout:   g.cfg.ConnectTimeout,
		OnFailure:        g.onChainFailure,
	})
	if err != nil {
		g.proxyLn.Close()
		return err
	}
	g.hook = &hook{g: g}
	g.srv, err = ingest.New(ingest.Config{
		Handler:           g.hook,
		MaxPacketSize:     g.cfg.maxPacketSize(),
		ReceiveMaximum:    g.cfg.ReceiveMaximum,
		TopicAliasMaximum: topicAliasMaximum,
		Logger:            slog.New(&levelFilter{next: g.log.With("component", "mqtt").Handler(), min: g.cfg.MQTTLogLevel}),
	})
	if err == nil {
		err = g.met.observeIdle(func() int64 { return g.srv.Stats().Parked.Load() })
	}
	if err != nil {
		g.proxyLn.Close()
		return err
	}
	// An idle MQTT connection waits in the server's epoll set without a
	// goroutine: every layer under the TLS connection reports NetConn and
	// survives a read deadline.
	g.listen(g.chainLn, true)
	if g.cfg.WSAddr != "" {
		if err := g.startWS(); err != nil {
			g.proxyLn.Close()
			return err
		}
	}
	return nil
}

// listen serves the connections l hands on with the MQTT server.
func (g *Gateway) listen(l *chain.Listener, parkable bool) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		l.Serve(func(id string, c net.Conn) error { return g.srv.ServeConn(c, id, parkable) })
	}()
}

// wsListenerID is the WebSocket listener's id (ingest.Client.Listener).
const wsListenerID = "ws"

// startWS binds the MQTT-over-WebSocket listener and adds it to the
// broker: TCP, a PROXY listener when load balancers in front send headers,
// the ws listener that resolves each upgrade request's client and checks its
// origin, and a chain listener for the CONNECT deadline and failure reports.
func (g *Gateway) startWS() error {
	tcp, err := net.Listen("tcp", g.cfg.WSAddr)
	if err != nil {
		return fmt.Errorf("gateway: WebSocket listener: %w", err)
	}
	var inner net.Listener = tcp
	if g.cfg.WSProxyTrusted.Len() > 0 {
		if inner, err = proxyproto.NewListener(tcp, proxyproto.Config{
			Trust:             g.wsTrust,
			Upstreams:         g.cfg.WSProxyTrusted,
			Headerless:        g.cfg.ProxyHeaderless,
			ReadHeaderTimeout: g.cfg.ProxyHeaderTimeout,
			OnReject:          g.onProxyReject,
		}); err != nil {
			tcp.Close()
			return fmt.Errorf("gateway: WebSocket PROXY listener: %w", err)
		}
	}
	wsl, err := ws.New(ws.Config{Inner: inner, Trust: g.wsTrust, Origin: g.wsOrigin, AllowedOrigins: g.cfg.WSAllowedOrigins, OnRefuse: g.onWSRefuse})
	if err != nil {
		inner.Close()
		return fmt.Errorf("gateway: %w", err)
	}
	if g.wsLn, err = chain.New(chain.Config{ID: wsListenerID, IDs: &g.connIDs, Inner: wsl, Protocol: "ws", ConnectTimeout: g.cfg.ConnectTimeout, OnFailure: g.onChainFailure}); err != nil {
		wsl.Close()
		return err
	}
	// The WebSocket layer keeps its own frame state: its connections keep
	// their goroutine.
	g.listen(g.wsLn, false)
	return nil
}

// topicAliasMaximum is how many topic aliases an MQTT 5 device may set.
const topicAliasMaximum = 16

// WSAddr returns the MQTT-over-WebSocket listener's address, or "".
func (g *Gateway) WSAddr() string {
	if g.wsLn == nil {
		return ""
	}
	return g.wsLn.Address()
}

// MQTTAddr returns the MQTT listener's address.
func (g *Gateway) MQTTAddr() string {
	if g.proxyLn == nil {
		return ""
	}
	return g.proxyLn.Addr().String()
}

// HTTPAddr returns the HTTP ingest address, or "".
func (g *Gateway) HTTPAddr() string { return addrOf(g.httpLn) }

// AdminAddr returns the admin server's address, or "".
func (g *Gateway) AdminAddr() string { return addrOf(g.adminLn) }

// KubeHealthAddr returns the kube-proxy-compatible health server's address, or "".
func (g *Gateway) KubeHealthAddr() string { return addrOf(g.kubeLn) }

func addrOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// Ready returns nil when the gateway should get new connections: started,
// not draining, the sink accepting records, and (with SinkMinFree) its file
// system not low on space.
func (g *Gateway) Ready() error {
	switch {
	case !g.started.Load():
		return errors.New("not started")
	case g.draining.Load():
		return errors.New("draining")
	}
	if err := g.store.Healthy(); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	if g.disk != nil {
		return g.disk.err()
	}
	return nil
}

// Shutdown drains the gateway: it reports not ready (and the endpoint as
// terminating to load balancers), waits drainDelay so they stop sending new
// connections, disconnects MQTT clients (MQTT 5 clients get "server shutting
// down"), lets HTTP requests in flight finish, commits every record already
// accepted, and closes the sink. Readings that were being written when their
// client was disconnected are on disk but unacknowledged; the device sends
// them again and the sink recognises them. Shutdown returns when ctx is done
// at the latest. Its error includes a sink that failed while the gateway
// served (it refused every reading since), so that the process exits
// non-zero.
func (g *Gateway) Shutdown(ctx context.Context, drainDelay time.Duration) error {
	var err error
	g.shutdown.Do(func() {
		// The endpoint turns terminating before readiness fails, so that
		// no probe sees a gateway that is not ready yet still counts
		// itself as a local endpoint (kube-proxy's health check and
		// /readyz agree from the first failing answer on).
		if g.endpoints != nil {
			g.endpoints.Set(g.kubeEP, trafficpolicy.EndpointTerminating)
		}
		g.draining.Store(true)
		g.log.Info("gateway draining", "delay", drainDelay)
		if drainDelay > 0 {
			select {
			case <-time.After(drainDelay):
			case <-ctx.Done():
			}
		}
		err = g.stopAll(ctx)
		st := g.store.Stats()
		attrs := []slog.Attr{slog.Uint64("records", st.Records), slog.Uint64("duplicates", st.Duplicates), slog.Uint64("batches", st.Batches)}
		if err != nil {
			g.log.LogAttrs(ctx, slog.LevelError, "gateway stopped with an error", append(attrs, slog.String("error", err.Error()))...)
		} else {
			g.log.LogAttrs(ctx, slog.LevelInfo, "gateway stopped", attrs...)
		}
	})
	return err
}

func (g *Gateway) stopAll(ctx context.Context) error {
	var errs []error
	done := make(chan struct{})
	if g.hook != nil {
		// A session established from here on is released by Established.
		g.hook.stopping.Store(true)
		g.hook.sessions.Range(func(_, v any) bool { v.(*session).acks.release(); return true })
	}
	go func() { g.stopMQTT(); close(done) }()
	if g.httpSrv != nil {
		errs = append(errs, g.httpSrv.Shutdown(ctx))
	}
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("MQTT shutdown: %w", ctx.Err()))
	}
	if g.disk != nil && g.started.Load() {
		g.disk.close()
	}
	if err := g.store.Close(); err != nil && !errors.Is(err, sink.ErrClosed) {
		errs = append(errs, err) // it says "sink: …"
	}
	if g.kubeSrv != nil {
		errs = append(errs, g.kubeSrv.Close())
	}
	if g.adminSrv != nil {
		errs = append(errs, g.adminSrv.Close())
	}
	g.wg.Wait()
	g.gc.close()
	return errors.Join(errs...)
}

func (g *Gateway) stopMQTT() {
	if g.srv == nil {
		if g.proxyLn != nil {
			g.proxyLn.Close()
		}
		return
	}
	// The listeners stop accepting and close what is still in their hands
	// (handshakes, connections waiting for CONNECT); the server disconnects
	// its clients.
	closeClients := func(string) { g.srv.Close() }
	g.chainLn.Close(closeClients)
	if g.wsLn != nil {
		g.wsLn.Close(closeClients)
	}
	g.srv.Close()
}

func (g *Gateway) serve(srv *http.Server, ln net.Listener) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("server stopped", "addr", ln.Addr().String(), "error", err)
		}
	}()
}
