package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/reading"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ws"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/ratelimit"
)

// Connection is what the gateway knew about one MQTT connection when it
// accepted or refused its CONNECT: every layer, and the decision.
type Connection struct {
	Conn        uint64 // the listener's connection number
	ClientID    string
	MQTTVersion byte // 4 (3.1.1) or 5
	// Transport is "websocket" for MQTT over WebSocket (the client was
	// resolved from the upgrade request), "" for the MQTT listener.
	Transport string
	// Result and ResolveErr are clientip's answer, resolved once when the
	// connection was accepted. Result.Peer is the socket peer and
	// Result.Proxy the PROXY header's source: the only place the gateway
	// reads a connection's addresses from.
	Result     clientip.Result
	ResolveErr error
	// Header is the PROXY header's version, command and destination, which
	// the Result does not carry; its zero value means no header.
	Header ProxyHeader
	// ServerName, TLSVersion and Subject are the TLS layer. With TLS at the
	// load balancer, ServerName is the PROXY header's authority TLV (the SNI
	// the load balancer saw, when it sends it), TLSVersion is zero, Subject
	// is the identity LBTLS established, and LBTLS is what the load balancer
	// reported; it is nil when the gateway terminated TLS.
	ServerName string
	TLSVersion uint16
	Subject    string
	LBTLS      *chain.LBTLS
	// Refused is nil for an accepted connection, else why it was refused
	// (see middleware.OutcomeOf); ConnAck is the CONNACK code sent then.
	Refused error
	ConnAck byte
}

// ProxyHeader is what a PROXY header says beyond the client's address.
type ProxyHeader struct {
	Version     uint8 // 1 or 2; 0 without a header
	Command     proxyproto.Command
	Destination netip.AddrPort // the address the client connected to (PROXY command only)
}

func headerOf(f proxyproto.Facts) ProxyHeader {
	return ProxyHeader{Version: f.Version, Command: f.Command, Destination: f.Destination}
}

// attrs returns the header's log fields: "proxy_header" ("v2 proxy", "v1 local",
// "none") and, for a PROXY command, "proxy_destination".
func (h ProxyHeader) attrs() []slog.Attr {
	if h.Version == 0 {
		return []slog.Attr{slog.String("proxy_header", "none")}
	}
	as := []slog.Attr{slog.String("proxy_header", fmt.Sprintf("v%d %s", h.Version, h.Command))}
	if h.Command == proxyproto.CommandProxy {
		as = append(as, slog.String("proxy_destination", h.Destination.String()))
	}
	return as
}

// decision is the error the connection's line reports: the refusal, else
// clientip's (a masqueraded client is admitted with it).
func (c *Connection) decision() error {
	if c.Refused != nil {
		return c.Refused
	}
	return c.ResolveErr
}

// attrs returns the connection's own log fields; middleware.Log adds the
// decision and clientip's Result (client, source, socket peer, PROXY source).
func (c *Connection) attrs() []slog.Attr {
	as := c.layers(make([]slog.Attr, 0, 12))
	if c.Refused != nil {
		as = append(as, slog.String("outcome", "refused"), slog.String("connack", fmt.Sprintf("0x%02x", c.ConnAck)))
	} else {
		as = append(as, slog.String("outcome", "accepted"))
	}
	return as
}

// layers appends what the connection's layers beyond clientip's Result
// showed: its number, the MQTT client id and version, the PROXY header and
// TLS.
func (c *Connection) layers(as []slog.Attr) []slog.Attr {
	as = append(as, slog.Uint64("conn", c.Conn), slog.String("client_id", c.ClientID), slog.Int("mqtt_version", int(c.MQTTVersion)))
	if c.Transport != "" {
		as = append(as, slog.String("transport", c.Transport))
	}
	as = append(as, c.Header.attrs()...)
	if c.TLSVersion != 0 {
		as = append(as, slog.String("tls_version", tls.VersionName(c.TLSVersion)))
	}
	if c.LBTLS != nil {
		// Who terminated TLS (the socket peer, which sent the header), and
		// what it reported.
		as = append(as, slog.String("tls_terminated_by", addrString(c.Result.Peer.Addr())), slog.Any("lb_tls", c.LBTLS))
	}
	return append(as, slog.String("tls_sni", c.ServerName), slog.String("tls_subject", c.Subject))
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// provenance returns what res says about a reading's sender, for its sink
// record: the client, where it came from, the hop that reported it, the
// socket peer and the PROXY source. Each protocol adds its own layers.
func provenance(res clientip.Result) sink.Provenance {
	p := sink.Provenance{Source: res.Source.String(), Masqueraded: res.Masqueraded, Header: res.Header}
	if res.Client.IsValid() {
		p.Client = res.Client.String()
	}
	if res.Via.IsValid() {
		p.Via = res.Via.String()
	}
	if res.Peer.IsValid() {
		p.Peer = res.Peer.String()
	}
	if res.Proxy.IsValid() {
		p.ProxySource = res.Proxy.String()
	}
	return p
}

// provenance returns the sink provenance of the connection's readings.
func (c *Connection) provenance() sink.Provenance {
	p := provenance(c.Result)
	if c.Header.Command == proxyproto.CommandProxy {
		p.ProxyDestination = c.Header.Destination.String()
	}
	p.TLSServerName, p.TLSSubject, p.ClientID, p.Conn, p.Transport = c.ServerName, c.Subject, c.ClientID, c.Conn, c.Transport
	if c.LBTLS != nil {
		p.TLSTerminatedBy, p.TLSVersion, p.TLSIdentity = addrString(c.Result.Peer.Addr()), c.LBTLS.SSL.Version, c.LBTLS.Identity.String()
	}
	return p
}

// hook is the gateway's ingest.Handler: it decides at CONNECT, and takes
// readings to the sink, acknowledging each once it is durable.
type hook struct {
	g        *Gateway
	sessions sync.Map    // *ingest.Client -> *session
	stopping atomic.Bool // the gateway is shutting down: no read loop waits for room in its ack queue
}

type session struct {
	conn     Connection
	prov     sink.Provenance
	key      ratelimit.Key
	start    time.Time
	acks     *ackQueue
	accepted atomic.Uint64
	refused  atomic.Uint64
	topic    string // the last topic published, so that a device publishing to one topic costs one string
}

// topicOf returns b as a string, the session's last one when b is the same.
func (s *session) topicOf(b []byte) string {
	if string(b) != s.topic {
		s.topic = string(b)
	}
	return s.topic
}

// code is an MQTT 5 reason code and the reason string that goes with it.
type code struct {
	code   byte
	reason string
}

var (
	codeSuccess              = code{}
	codeNotAuthorized        = code{mqttwire.NotAuthorized, "not authorized"}
	codeQuotaExceeded        = code{mqttwire.QuotaExceeded, "quota exceeded"}
	codePayloadFormatInvalid = code{mqttwire.PayloadFormatInvalid, "payload format invalid"}
	codeServerUnavailable    = code{mqttwire.ServerUnavailable, "server unavailable"}
	codeReceiveMaximum       = code{mqttwire.ReceiveMaximumExceeded, "receive maximum exceeded"}
	codeTooLargeToStore      = code{mqttwire.ImplementationSpecificError, "reading too large to store"}
)

// Connect resolves nothing itself: the middleware listener resolved the
// connection's chain when it was accepted. It collects every layer, applies
// the allowlist (and, for a device with a client certificate, requires the
// client id to be the certificate's common name), writes the connection's
// log line, and refuses with
// CONNACK "not authorized" (MQTT 5 reason code 0x87, 3.1.1 return code 5),
// which the server writes.
//
// An accepted connection gets no session here: the server may still drop it
// before it is established (a CONNACK it cannot write, say). Established
// records the session.
func (h *hook) Connect(cl *ingest.Client, _ *mqttwire.Connect) (byte, string) {
	g := h.g
	c := connectionOf(cl)
	certCN, hasCert := "", false
	var lbErr error
	if info, ok := chain.InfoFromConn(cl.Conn); ok {
		info.MarkConnected()
		certCN, hasCert = info.ClientCN()
		if info.LBTLS != nil {
			lbErr = info.LBTLS.Err
		}
	}
	ctx := context.Background()
	if g.cfg.Observer != nil {
		g.cfg.Observer.ObserveResolve(ctx, c.Result, c.ResolveErr)
	}
	if c.Result.Masqueraded {
		g.masq.warn(c.Result.Client, "mqtt")
		g.met.masqueraded(ctx, "mqtt")
	}
	err := g.admit(c.Result, c.ResolveErr)
	if err == nil && g.cfg.LBTLS != nil && !hasCert {
		// TLS at the load balancer: only a client it verified has an identity.
		err = because(ErrNoVerifiedCert, lbErr)
	}
	if err == nil && hasCert && certCN != cl.ID {
		// A device that proves who it is must not speak for another: its
		// readings' ids are (client id, seq).
		err = fmt.Errorf("client id %q is not the client certificate's common name %q", cl.ID, certCN)
	}
	if err != nil {
		c.Refused, c.ConnAck = err, mqttwire.NotAuthorized
		if c.MQTTVersion < 5 {
			c.ConnAck = mqttwire.ConnRefusedNotAuthorized
		}
		if g.cfg.Observer != nil {
			g.cfg.Observer.ObserveDeny(ctx, c.Result, err)
		}
		middleware.Log(ctx, g.log, "mqtt connection", c.Result, c.decision(), c.attrs()...)
		g.met.connection(ctx, "refused", middleware.OutcomeOf(err).String())
		g.notify(c)
		return codeNotAuthorized.code, codeNotAuthorized.reason
	}
	middleware.Log(ctx, g.log, "mqtt connection", c.Result, c.decision(), c.attrs()...) // WARN when masqueraded
	g.met.connection(ctx, "accepted", middleware.OutcomeOf(c.ResolveErr).String())
	g.notify(c)
	cl.Value = h.newSession(cl, c) // Established records it
	return 0, ""
}

// connectionOf collects what the listener and clientip knew about cl's
// connection; the decision fields are left zero.
func connectionOf(cl *ingest.Client) Connection {
	c := Connection{ClientID: cl.ID, MQTTVersion: cl.Version}
	if cl.Listener == wsListenerID {
		c.Transport = "websocket"
	}
	if info, ok := chain.InfoFromConn(cl.Conn); ok {
		c.Conn, c.Header, c.ServerName, c.TLSVersion, c.Subject = info.ID, headerOf(info.Facts), info.ServerName, info.State.Version, info.Subject()
		if c.LBTLS = info.LBTLS; c.LBTLS != nil {
			c.ServerName, _ = info.Facts.TLVs.Authority()
		}
	}
	c.Result, c.ResolveErr = middleware.ResultFromConn(cl.Conn)
	return c
}

// Established records the session of a client that Connect accepted, once
// the server has sent its CONNACK and is about to read its packets. From
// here on the server always calls Disconnected when the connection ends, so
// a session (and the clients gauge) lives exactly as long as the
// connection; a connection dropped between Connect and here never had one.
// Publish only sees clients that got here.
func (h *hook) Established(cl *ingest.Client) {
	s := cl.Value.(*session)
	h.sessions.Store(cl, s)
	if h.stopping.Load() {
		// Shutdown began and may have released the queues it found before
		// this one was stored (stopAll sets stopping, then releases).
		s.acks.release()
	}
	h.g.met.clients.Add(context.Background(), 1)
}

// newSession is the session of a connection Connect accepted, c being what
// Connect knew of it.
func (h *hook) newSession(cl *ingest.Client, c Connection) *session {
	s := &session{conn: c, prov: c.provenance(), start: time.Now(), acks: newAckQueue(cl, int(h.g.cfg.ReceiveMaximum))}
	s.prov.Precompute() // every reading of the connection carries it
	s.key = ratelimit.Key{Prefix: clientip.RateLimitKey(c.Result.Client)}
	if c.Result.Masqueraded {
		// The node's address stands for every client it forwards: limit
		// per device identity under it, never the node as a whole.
		s.key.Identity = cl.ID
	}
	return s
}

// admit is the edge policy: with RequireProxy, no client that reached the
// gateway directly; then the allowlist when there is one, otherwise every
// client that was resolved, including masqueraded ones (which are warned
// about).
func (g *Gateway) admit(res clientip.Result, err error) error {
	if g.cfg.RequireProxy && res.Source == clientip.SourceSocket {
		return ErrDirectClient
	}
	if g.allow != nil {
		return g.allow.Check("", res, err)
	}
	if err != nil && !errors.Is(err, clientip.ErrMasqueraded) {
		return fmt.Errorf("%w: %w", middleware.ErrUnresolved, err)
	}
	return nil
}

func (g *Gateway) notify(c Connection) {
	if g.cfg.OnConnection != nil {
		g.cfg.OnConnection(c)
	}
}

// topicRefusal judges the topic of a PUBLISH: it must lie under the topic
// prefix and, with a topic policy, be admitted for the connection's client
// by the policy's rule for it, whose decision goes to the Observer. It
// returns nil, or the refusal and the rule that made it ("" for the prefix).
func (h *hook) topicRefusal(ctx context.Context, s *session, topic string) (string, error) {
	g := h.g
	if !strings.HasPrefix(topic, g.cfg.TopicPrefix) {
		return "", fmt.Errorf("topic %q is outside the topic prefix %q", topic, g.cfg.TopicPrefix)
	}
	if g.cfg.TopicPolicy == nil {
		return "", nil
	}
	d := g.cfg.TopicPolicy.Decide(topic, s.conn.Result, s.conn.ResolveErr)
	if obs, ok := g.cfg.Observer.(middleware.DecisionObserver); ok {
		obs.ObserveDecision(ctx, s.conn.Result, d)
	}
	if d.Err != nil && g.cfg.Observer != nil {
		g.cfg.Observer.ObserveDeny(ctx, s.conn.Result, d.Err)
	}
	return d.Rule, d.Err
}

// refusal returns the log fields of a refused reading: clientip's Result as
// the middleware renders it, the connection's layers, then as.
func (s *session) refusal(as ...slog.Attr) []slog.Attr {
	out := middleware.Attrs(s.conn.Result, s.conn.ResolveErr)
	out = s.conn.layers(out)
	return append(out, as...)
}

// Publish runs on the client's reading goroutine. The reading is rate
// limited, validated and handed to the store; only a durable reading is
// acknowledged.
//
// A QoS 1 reading is acknowledged by the session's ackQueue once the store
// has answered, in the order the readings arrived, so the goroutine goes on
// to the next reading at once and a device's whole window shares one
// commit. A QoS 0 reading, which nobody acknowledges, is queued without
// waiting. A QoS 2 reading waits for the acknowledgements before it and for
// its own commit, and the server writes its PUBREC with the code returned.
func (h *hook) Publish(cl *ingest.Client, pk *mqttwire.Publish) (byte, string, bool) {
	g := h.g
	s, _ := cl.Value.(*session)
	if s == nil {
		return 0, "", false
	}
	g.gc.reading()
	ctx := context.Background()
	var p *pendingAck
	switch pk.QoS {
	case 1:
		var err error
		if p, err = s.acks.add(pk.PacketID, cl.V5()); err != nil {
			g.log.Warn("mqtt client exceeded the receive maximum", "conn", s.conn.Conn, "client_id", cl.ID, "receive_maximum", g.cfg.ReceiveMaximum)
			cl.Disconnect(codeReceiveMaximum.code, codeReceiveMaximum.reason)
			return 0, "", false
		}
		if p == nil { // a retransmission of a reading still waiting: it gets that one's PUBACK
			return 0, "", false
		}
	case 2:
		s.acks.waitIdle()
	}
	topic := s.topicOf(pk.Topic)
	if rule, err := h.topicRefusal(ctx, s, topic); err != nil {
		return h.refuse(ctx, cl, pk, topic, s, p, refusal{outcome: "forbidden_topic", code: codeNotAuthorized, err: err, rule: rule, end311: true})
	}
	rec, outcome, c, err := h.record(cl, pk, topic, s)
	if err != nil {
		return h.refuse(ctx, cl, pk, topic, s, p, refusal{outcome: outcome, code: c, err: err})
	}
	switch pk.QoS {
	case 0: // nobody waits for an acknowledgement: queue it and read on
		err = g.store.Submit(ctx, rec, nil)
	case 1:
		err = g.store.Submit(ctx, rec, func(res sink.Result, err error) { h.stored(cl, s, p, rec, res, err) })
	default:
		var res sink.Result
		if res, err = g.submitAndWait(ctx, rec); err == nil {
			h.counted(cl, s, rec, res)
			return 0, "", true
		}
	}
	if err != nil {
		if errors.Is(err, sink.ErrTooLarge) {
			// The reading, not the store: refused, and the store and the
			// connection go on.
			return h.refuse(ctx, cl, pk, topic, s, p, refusal{outcome: "invalid", code: codeTooLargeToStore, err: err})
		}
		h.storeFailed(cl, s, rec, err)
		if p != nil {
			s.acks.answer(p, false, codeSuccess)
		}
	}
	return 0, "", false
}

// record rate limits, validates and checks pk, and returns the sink record,
// or the outcome, reason code and error of its refusal.
func (h *hook) record(cl *ingest.Client, pk *mqttwire.Publish, topic string, s *session) (*sink.Record, string, code, error) {
	g := h.g
	d := g.limiter.Reserve(s.key, g.cfg.RateMaxWait)
	if !d.Allowed {
		return nil, "rate_limited", codeQuotaExceeded, errors.New("rate limit exceeded")
	}
	if d.Delay > 0 {
		// Slow the device down: the server reads nothing more from this
		// connection meanwhile, so TCP pushes back.
		g.met.throttled.Add(context.Background(), 1)
		time.Sleep(d.Delay)
	}
	r, err := reading.Parse(pk.Payload, g.cfg.MaxPayload)
	if err != nil {
		return nil, "invalid", codePayloadFormatInvalid, err
	}
	if r.Device != cl.ID {
		return nil, "refused", codeNotAuthorized,
			fmt.Errorf("reading names device %q but the MQTT client id is %q", r.Device, cl.ID)
	}
	return &sink.Record{
		ID: r.Key(), Device: r.Device, Seq: r.Seq, Received: time.Now().UTC(),
		Protocol: "mqtt", Topic: topic, QoS: pk.QoS,
		Payload: r.Compact, Provenance: s.prov,
	}, "", codeSuccess, nil
}

// stored is the store's answer for a QoS 1 reading, on the store's
// goroutine: acknowledge it, or drop the connection without acknowledging.
func (h *hook) stored(cl *ingest.Client, s *session, p *pendingAck, rec *sink.Record, res sink.Result, err error) {
	if err != nil {
		s.acks.drop()
		go h.storeFailed(cl, s, rec, err) // it writes to the client: not on the store's goroutine
		s.acks.answer(p, false, codeSuccess)
		return
	}
	// Counted before the PUBACK can go out: whoever has the acknowledgement
	// finds the reading in the metrics.
	h.counted(cl, s, rec, res)
	s.acks.answer(p, true, codeSuccess)
}

// counted counts a reading the store has.
func (h *hook) counted(cl *ingest.Client, s *session, rec *sink.Record, res sink.Result) {
	g := h.g
	s.accepted.Add(1)
	if res.Duplicate {
		g.met.message(context.Background(), "mqtt", "duplicate")
		g.log.Debug("mqtt duplicate reading", "conn", s.conn.Conn, "client_id", cl.ID, "id", rec.ID)
	} else {
		g.met.message(context.Background(), "mqtt", "accepted")
	}
}

// storeFailed handles a reading the store could not take: it is not
// acknowledged, and the client is disconnected so that it sends the reading
// again, to this gateway once the store works or to another one; readiness
// already reports the failure.
func (h *hook) storeFailed(cl *ingest.Client, s *session, rec *sink.Record, err error) {
	g := h.g
	ctx := context.Background()
	g.log.Error("sink append failed", "conn", s.conn.Conn, "client_id", cl.ID, "id", rec.ID, "error", err)
	g.met.message(ctx, "mqtt", "sink_error")
	s.refused.Add(1)
	s.acks.drop()
	if cl.V5() {
		cl.Disconnect(codeServerUnavailable.code, codeServerUnavailable.reason)
	} else {
		cl.Close(err)
	}
}

// refusal is why a reading is refused: its outcome (the message counter's
// label), the MQTT 5 reason code, the error, the policy rule that refused it
// if one did, and whether an MQTT 3.1.1 client is disconnected for it at QoS
// 1 and 2 (as brokers do for a topic they do not authorise) rather than left
// without an acknowledgement.
type refusal struct {
	outcome string
	code    code
	err     error
	rule    string
	end311  bool
}

// refuse turns a rejected reading into MQTT: a PUBACK (PUBREC at QoS 2) with
// the reason code for MQTT 5 at QoS 1 and 2; for MQTT 3.1.1, which has no
// negative acknowledgement, nothing, or the end of the connection when
// why.end311 says so; at QoS 0 nothing. A QoS 1 refusal takes its place in
// the ackQueue (p) like any other answer; a QoS 2 one is returned to the
// server, which writes the PUBREC (the acknowledgements before it are
// written: Publish waited for them).
func (h *hook) refuse(ctx context.Context, cl *ingest.Client, pk *mqttwire.Publish, topic string, s *session, p *pendingAck, why refusal) (byte, string, bool) {
	g := h.g
	s.refused.Add(1)
	g.met.message(ctx, "mqtt", why.outcome)
	v5, qos := cl.V5(), pk.QoS
	acked := v5 && qos > 0
	end := !v5 && qos > 0 && why.end311
	answer := "none (MQTT 3.1.1 has no negative acknowledgement)"
	switch {
	case acked && qos == 2:
		answer = fmt.Sprintf("PUBREC 0x%02x", why.code.code)
	case acked:
		answer = fmt.Sprintf("PUBACK 0x%02x", why.code.code)
	case end:
		answer = "disconnected (MQTT 3.1.1 has no negative acknowledgement)"
	case qos == 0:
		answer = "none (QoS 0)"
	}
	as := []slog.Attr{slog.String("topic", topic), slog.Int("qos", int(qos)), slog.String("outcome", why.outcome)}
	if why.rule != "" {
		as = append(as, slog.String("rule", why.rule))
	}
	as = append(as, slog.String("error", why.err.Error()), slog.String("answer", answer))
	g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt reading refused", s.refusal(as...)...)
	if p != nil {
		s.acks.answer(p, acked, why.code)
	}
	if end {
		cl.Disconnect(why.code.code, why.code.reason)
	}
	return why.code.code, why.code.reason, acked && qos == 2
}

// Disconnected ends the session of a connection that has ended.
func (h *hook) Disconnected(cl *ingest.Client, err error) {
	v, ok := h.sessions.LoadAndDelete(cl)
	if !ok {
		return
	}
	s := v.(*session)
	g := h.g
	g.met.clients.Add(context.Background(), -1)
	attrs := []slog.Attr{
		slog.Uint64("conn", s.conn.Conn), slog.String("client_id", cl.ID), slog.String("client", s.prov.Client),
		slog.Duration("duration", time.Since(s.start)), slog.Uint64("accepted", s.accepted.Load()), slog.Uint64("refused", s.refused.Load()),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	g.log.LogAttrs(context.Background(), slog.LevelDebug, "mqtt disconnected", attrs...)
}

// onProxyReject logs a connection the PROXY listener refused, with what it
// knew (proxyproto.Rejection's own rendering).
func (g *Gateway) onProxyReject(r proxyproto.Rejection) {
	ctx := context.Background()
	if o, ok := g.cfg.Observer.(interface{ ObserveProxyRejection(proxyproto.Rejection) }); ok {
		o.ObserveProxyRejection(r)
	}
	g.met.connection(ctx, "proxy_rejected", r.Reason.String())
	g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt connection failed", slog.String("stage", "proxy"), slog.Any("rejection", r))
}

// onWSRefuse logs an upgrade request the WebSocket listener refused, with
// clientip's layers as the middleware renders them: a cross-origin request
// or a host the gateway does not answer to at WARN, a request that is not an
// MQTT WebSocket upgrade (an ingress's health check, say) at DEBUG.
func (g *Gateway) onWSRefuse(r ws.Refusal) {
	ctx := context.Background()
	level := slog.LevelWarn
	if errors.Is(r.Err, ws.ErrNotUpgrade) || errors.Is(r.Err, ws.ErrNoSubprotocol) {
		level = slog.LevelDebug
	}
	g.met.connection(ctx, "websocket_refused", r.Reason())
	as := middleware.Attrs(r.Result, r.ResolveErr)
	as = append(as, slog.String("stage", "websocket"), slog.String("transport", "websocket"))
	as = append(as, headerOf(r.Facts).attrs()...)
	as = append(as, slog.String("path", r.Path), slog.String("host", r.Host), slog.String("origin", r.Origin),
		slog.Int("status", r.Status), slog.String("failure", r.Err.Error()))
	g.log.LogAttrs(ctx, level, "mqtt connection failed", as...)
}

// onChainFailure logs a connection that failed in the TLS handshake or
// before CONNECT, with every layer known by then: clientip's Result as the
// middleware renders it, the PROXY header and the TLS layer.
func (g *Gateway) onChainFailure(f chain.Failure) {
	ctx := context.Background()
	reason := "error"
	if f.Timeout {
		reason = "timeout"
	}
	g.met.connection(ctx, string(f.Stage)+"_failed", reason)
	res, err := middleware.ResultFromConn(f.Conn)
	as := middleware.Attrs(res, err)
	as = append(as, slog.Uint64("conn", f.Info.ID), slog.String("stage", string(f.Stage)), slog.Bool("timeout", f.Timeout), slog.Duration("after", f.Duration))
	as = append(as, headerOf(f.Info.Facts).attrs()...)
	as = append(as, slog.String("tls_sni", f.Info.ServerName))
	if s := f.Info.Subject(); s != "" {
		as = append(as, slog.String("tls_subject", s))
	}
	as = append(as, slog.String("failure", f.Err.Error()))
	g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt connection failed", as...)
	if g.cfg.OnFailure != nil {
		g.cfg.OnFailure(f)
	}
}
