package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/reading"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/ratelimit"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// reqLog collects what one HTTP request's log line says; handlers further in
// fill it through the request context.
type reqLog struct {
	res      clientip.Result
	resErr   error // from the resolver
	err      error // from the policy
	resolved bool
	device   string
	id       string
	dup      bool
	problem  string
	canceled bool // the client went away while the handler waited
}

type reqLogKey struct{}

func logOf(r *http.Request) *reqLog {
	l, _ := r.Context().Value(reqLogKey{}).(*reqLog)
	if l == nil {
		l = new(reqLog)
	}
	return l
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// accessLog writes one line per request: the request, clientip's Result as
// the middleware renders it (client, source, hop, socket peer…), the
// decision, and what became of the reading.
func (g *Gateway) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		l := new(reqLog)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), reqLogKey{}, l)))
		var as []slog.Attr
		if l.resolved {
			decision := l.resErr
			if l.err != nil {
				decision = l.err
			}
			as = middleware.Attrs(l.res, decision)
		}
		as = append(as, slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", sw.status),
			slog.Duration("duration", time.Since(start)))
		if l.device != "" {
			as = append(as, slog.String("device", l.device))
		}
		if l.id != "" {
			as = append(as, slog.String("id", l.id), slog.Bool("duplicate", l.dup))
		}
		if l.problem != "" {
			as = append(as, slog.String("problem", l.problem))
		}
		if l.canceled {
			as = append(as, slog.Bool("canceled", true))
		}
		level := slog.LevelInfo
		if sw.status >= 400 || l.res.Masqueraded {
			level = slog.LevelWarn
		}
		g.log.LogAttrs(r.Context(), level, "http request", as...)
	})
}

// resolveObserver is the HTTP resolve middleware's Observer: it records
// each request's Result and error, as the resolver returned them, for the
// request's log line, warns about masqueraded clients, and passes the
// observation on to the configured Observer.
type resolveObserver struct{ g *Gateway }

func (o resolveObserver) ObserveResolve(ctx context.Context, res clientip.Result, err error) {
	g := o.g
	if l, ok := ctx.Value(reqLogKey{}).(*reqLog); ok {
		l.res, l.resErr, l.resolved = res, err, true
	}
	if res.Masqueraded {
		g.masq.warn(res.Client, "http")
		g.met.masqueraded(ctx, "http")
	}
	if g.cfg.Observer != nil {
		g.cfg.Observer.ObserveResolve(ctx, res, err)
	}
}

func (o resolveObserver) ObserveDeny(ctx context.Context, res clientip.Result, err error) {
	if o.g.cfg.Observer != nil {
		o.g.cfg.Observer.ObserveDeny(ctx, res, err)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *Gateway) httpError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	logOf(r).problem = msg
	writeJSON(w, code, map[string]string{"error": msg})
}

func (g *Gateway) router() (http.Handler, error) {
	resolve, err := middleware.New(middleware.Config{
		Trust:    g.httpTrust,
		Observer: resolveObserver{g},
		OnError: func(w http.ResponseWriter, r *http.Request, _ clientip.Result, err error) {
			g.httpError(w, r, http.StatusBadRequest, "cannot tell who the client is: "+middleware.OutcomeOf(err).String())
		},
	})
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Use(g.accessLog, resolve, g.refuseCrossOrigin)
	if g.allow != nil {
		sr, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{
			Allow:    g.cfg.Allow,
			Observer: g.cfg.Observer,
			OnDeny: func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) {
				logOf(r).err = err
				g.met.message(r.Context(), "http", "refused")
				g.httpError(w, r, http.StatusForbidden, "client not allowed: "+middleware.OutcomeOf(err).String())
			},
		})
		if err != nil {
			return nil, err
		}
		r.Use(sr.Handler)
	}
	r.Post("/v1/telemetry", g.ingest)
	r.Get("/v1/whoami", g.whoami)
	return r, nil
}

// refuseCrossOrigin answers 403 to a POST a browser makes for a page of
// another site (Sec-Fetch-Site, or an Origin other than the Host): a page
// must not use a browser inside the allowlist to send readings, as the
// WebSocket listener's origin check keeps it from opening MQTT sessions.
// Devices send neither header and pass.
func (g *Gateway) refuseCrossOrigin(next http.Handler) http.Handler {
	var cop http.CrossOriginProtection // no trusted origins
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			g.met.message(r.Context(), "http", "refused")
			g.httpError(w, r, http.StatusForbidden, "cross-origin browser request refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Gateway) startHTTP() error {
	h, err := g.router()
	if err != nil {
		return err
	}
	if g.httpLn, err = net.Listen("tcp", g.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("gateway: HTTP listener: %w", err)
	}
	readTimeout := g.cfg.HTTPReadTimeout
	if readTimeout <= 0 {
		readTimeout = 30 * time.Second
	}
	g.httpSrv = &http.Server{Handler: h, ReadHeaderTimeout: min(10*time.Second, readTimeout), ReadTimeout: readTimeout, IdleTimeout: 2 * time.Minute}
	g.serve(g.httpSrv, g.httpLn)
	return nil
}

// ingest accepts one reading: 201 when written, 200 when it was already
// durable (a retry), 400 with the reason when it is not a valid reading,
// 413 when too large, 429 when the client is over its rate, 503 when the
// sink cannot take it. Nothing is written unless the whole body is valid.
//
// Every request is charged to the client's rate, valid or not, as every
// MQTT PUBLISH is: a client over its rate gets 429 before its body is read,
// so that invalid bodies cost the gateway no more than the rate allows. A
// masqueraded client (the node's address) is charged by the device its
// reading names, as an MQTT client is by its client id, and so only once
// the body is read; a body that names no device is charged to the node.
func (g *Gateway) ingest(w http.ResponseWriter, r *http.Request) {
	g.gc.reading()
	ctx := r.Context()
	l := logOf(r)
	res := l.res
	key := ratelimit.Key{Prefix: clientip.RateLimitKey(res.Client)}
	if !res.Masqueraded && !g.chargeHTTP(w, r, key) {
		return
	}
	rd, status, outcome, msg := g.readReading(w, r)
	if res.Masqueraded {
		if status == 0 {
			key.Identity = rd.Device // not the node as a whole: see README
		}
		if !g.chargeHTTP(w, r, key) {
			return
		}
	}
	if status != 0 {
		if outcome != "" {
			g.met.message(ctx, "http", outcome)
		}
		g.httpError(w, r, status, msg)
		return
	}
	l.device, l.id = rd.Device, rd.Key()
	rec := &sink.Record{ID: rd.Key(), Device: rd.Device, Seq: rd.Seq, Received: time.Now().UTC(), Protocol: "http", Payload: rd.Compact, Provenance: provenance(res)}
	out, err := g.submitAndWait(ctx, rec)
	switch {
	case err == nil:
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The client hung up while its reading waited for the group
		// commit: not a failure of the sink, and the reading may well be
		// written (a retry is recognised as a duplicate).
		g.met.message(context.WithoutCancel(ctx), "http", "canceled")
		l.canceled = true
		l.problem = "the client went away while its reading waited for the sink; the reading may still be written"
		return
	case errors.Is(err, sink.ErrTooLarge):
		g.met.message(ctx, "http", "invalid")
		g.httpError(w, r, http.StatusRequestEntityTooLarge, err.Error())
		return
	default:
		g.met.message(ctx, "http", "sink_error")
		g.log.Error("sink append failed", "id", rec.ID, "error", err)
		g.httpError(w, r, http.StatusServiceUnavailable, "the reading could not be stored; retry")
		return
	}
	l.dup = out.Duplicate
	code := http.StatusCreated
	if out.Duplicate {
		code = http.StatusOK
		g.met.message(ctx, "http", "duplicate")
	} else {
		g.met.message(ctx, "http", "accepted")
	}
	writeJSON(w, code, map[string]any{"id": rec.ID, "duplicate": out.Duplicate})
}

// chargeHTTP charges one request to key's bucket and answers 429, with the
// RateLimit fields and Retry-After, when it is over its rate.
func (g *Gateway) chargeHTTP(w http.ResponseWriter, r *http.Request, key ratelimit.Key) bool {
	d := g.limiter.Reserve(key, 0)
	if d.Allowed {
		return true
	}
	g.met.message(r.Context(), "http", "rate_limited")
	ratelimit.SetHeaders(w.Header(), "ingest", g.limiter.Limit(), d)
	g.httpError(w, r, http.StatusTooManyRequests, "rate limit exceeded")
	return false
}

// readReading reads and parses the request's body. When it is not a valid
// reading it returns the status to answer, the outcome to count (none for
// a body that could not be read) and the message.
func (g *Gateway) readReading(w http.ResponseWriter, r *http.Request) (rd reading.Reading, status int, outcome, msg string) {
	limit := g.cfg.MaxPayload
	if limit <= 0 {
		limit = reading.DefaultMaxBytes
	}
	// A body announced larger than the limit is refused before it is read:
	// for a request that asks for "Expect: 100-continue", reading would
	// answer 100 Continue and invite the whole body (RFC 9110 §10.1.1).
	var body []byte
	var err error = &http.MaxBytesError{Limit: int64(limit)}
	if r.ContentLength <= int64(limit) {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return rd, http.StatusRequestEntityTooLarge, "invalid", fmt.Sprintf("%v: limit %d bytes", reading.ErrTooLarge, limit)
		}
		return rd, http.StatusBadRequest, "", "reading the body: " + err.Error()
	}
	if rd, err = reading.Parse(body, limit); err != nil {
		return rd, http.StatusBadRequest, "invalid", err.Error()
	}
	return rd, 0, "", ""
}

// whoami answers with what the gateway sees of the caller, layer by layer.
func (g *Gateway) whoami(w http.ResponseWriter, r *http.Request) {
	res := logOf(r).res
	out := map[string]any{"socket_peer": res.Peer.String(), "client_source": res.Source.String(), "masqueraded": res.Masqueraded}
	if res.Client.IsValid() {
		out["client"] = res.Client.String()
	}
	if res.Header != "" {
		out["header"] = res.Header
	}
	if res.Via.IsValid() {
		out["via"] = res.Via.String()
	}
	writeJSON(w, http.StatusOK, out)
}

// sideTimeout bounds each request to the admin and kube health servers,
// headers and body, and (as their IdleTimeout is zero) the wait for the next
// request on a kept-alive connection: probes and scrapes take milliseconds,
// and a peer that idles or trickles must not hold a descriptor the device
// listeners share.
const sideTimeout = 5 * time.Second

func (g *Gateway) startAdmin() error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := g.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ready": true})
	})
	if g.cfg.Metrics != nil {
		mux.Handle("GET /metrics", g.cfg.Metrics)
	}
	if err := g.mountExplain(mux); err != nil {
		return fmt.Errorf("gateway: explain: %w", err)
	}
	var err error
	if g.adminLn, err = net.Listen("tcp", g.cfg.AdminAddr); err != nil {
		return fmt.Errorf("gateway: admin listener: %w", err)
	}
	g.adminSrv = &http.Server{Handler: mux, ReadHeaderTimeout: sideTimeout, ReadTimeout: sideTimeout}
	g.serve(g.adminSrv, g.adminLn)
	return nil
}

// startKubeHealth serves a kube-proxy-compatible healthCheckNodePort answer
// for this gateway alone (hostNetwork or node-local deployments behind a
// load balancer that probes it), accepting an optional PROXY header as AWS
// NLB health checks with proxy protocol send.
func (g *Gateway) startKubeHealth() error {
	ns, name, ok := strings.Cut(g.cfg.KubeService, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("gateway: kube health service %q: want namespace/name", g.cfg.KubeService)
	}
	g.endpoints = new(trafficpolicy.Registry)
	g.kubeEP = g.cfg.KubeEndpoint
	if !g.kubeEP.IsValid() {
		g.kubeEP, _ = netip.ParseAddrPort(g.MQTTAddr())
	}
	hs, err := trafficpolicy.NewHealthServer(trafficpolicy.HealthConfig{
		Namespace: ns, Name: name, Endpoints: g.endpoints,
		ProxyHealthy: func() bool { return g.Ready() == nil },
	})
	if err != nil {
		return err
	}
	tcp, err := net.Listen("tcp", g.cfg.KubeHealthAddr)
	if err != nil {
		return fmt.Errorf("gateway: kube health listener: %w", err)
	}
	pl, err := trafficpolicy.OptionalProxyHeader(tcp, 0)
	if err != nil {
		tcp.Close()
		return err
	}
	g.kubeLn = pl
	g.kubeSrv = &http.Server{Handler: hs, ReadHeaderTimeout: sideTimeout, ReadTimeout: sideTimeout}
	g.serve(g.kubeSrv, g.kubeLn)
	return nil
}
