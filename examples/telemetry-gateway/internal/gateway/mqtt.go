package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/limiter"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/reading"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
)

// Connection is what the gateway knew about one MQTT connection when it
// accepted or refused its CONNECT: every layer, and the decision.
type Connection struct {
	Conn        uint64 // the listener's connection number
	ClientID    string
	MQTTVersion byte // 4 (3.1.1) or 5
	// Facts are the socket and PROXY layers.
	Facts proxyproto.Facts
	// ServerName, TLSVersion and Subject are the TLS layer.
	ServerName string
	TLSVersion uint16
	Subject    string
	// Result and ResolveErr are clientip's answer.
	Result     clientip.Result
	ResolveErr error
	// Refused is nil for an accepted connection, else why it was refused;
	// ConnAck is the CONNACK code sent then.
	Refused error
	ConnAck byte
}

// attrs returns the connection's log fields: one flat field per layer.
func (c *Connection) attrs() []slog.Attr {
	as := make([]slog.Attr, 0, 20)
	as = append(as, slog.Uint64("conn", c.Conn), slog.String("client_id", c.ClientID), slog.Int("mqtt_version", int(c.MQTTVersion)))
	as = appendLayers(as, c.Facts)
	if c.TLSVersion != 0 {
		as = append(as, slog.String("tls_version", tls.VersionName(c.TLSVersion)))
	}
	as = append(as, slog.String("tls_sni", c.ServerName), slog.String("tls_subject", c.Subject))
	as = appendResult(as, c.Result, c.ResolveErr, c.Refused)
	if c.Refused != nil {
		as = append(as, slog.String("outcome", "refused"), slog.String("reason", c.Refused.Error()), slog.String("connack", fmt.Sprintf("0x%02x", c.ConnAck)))
	} else {
		as = append(as, slog.String("outcome", "accepted"))
	}
	return as
}

// appendLayers adds the socket and PROXY layers.
func appendLayers(as []slog.Attr, f proxyproto.Facts) []slog.Attr {
	if f.Peer.IsValid() {
		as = append(as, slog.String("socket_peer", f.Peer.String()))
	}
	if f.Command == proxyproto.CommandNone {
		return append(as, slog.String("proxy", "none"))
	}
	as = append(as, slog.String("proxy", fmt.Sprintf("v%d %s", f.Version, f.Command)))
	if f.Command == proxyproto.CommandProxy {
		as = append(as, slog.String("proxy_source", f.Source.String()), slog.String("proxy_destination", f.Destination.String()))
	}
	return as
}

// appendResult adds clientip's answer: the client, the layer it came from,
// the hop that reported it, the masquerade flag, and the decision: the
// outcome of the policy error when there is one, else of the resolution.
func appendResult(as []slog.Attr, res clientip.Result, err, policy error) []slog.Attr {
	if res.Client.IsValid() {
		as = append(as, slog.String("client", res.Client.String()))
	}
	as = append(as, slog.String("client_source", res.Source.String()))
	if res.Via.IsValid() {
		as = append(as, slog.String("client_via", res.Via.String()))
	}
	if res.Header != "" {
		as = append(as, slog.String("client_header", res.Header))
	}
	decision := err
	if policy != nil {
		decision = policy
	}
	as = append(as, slog.Bool("masqueraded", res.Masqueraded), slog.String("decision", middleware.OutcomeOf(decision).String()))
	if err != nil {
		as = append(as, slog.String("resolve_error", err.Error()))
	}
	return as
}

func provenance(c *Connection) sink.Provenance {
	p := sink.Provenance{
		Source:        c.Result.Source.String(),
		Masqueraded:   c.Result.Masqueraded,
		TLSServerName: c.ServerName,
		TLSSubject:    c.Subject,
		ClientID:      c.ClientID,
		Conn:          c.Conn,
	}
	if c.Result.Client.IsValid() {
		p.Client = c.Result.Client.String()
	}
	if c.Result.Via.IsValid() {
		p.Via = c.Result.Via.String()
	}
	if c.Facts.Peer.IsValid() {
		p.Peer = c.Facts.Peer.String()
	}
	if c.Facts.Command == proxyproto.CommandProxy {
		p.ProxySource, p.ProxyDestination = c.Facts.Source.String(), c.Facts.Destination.String()
	}
	return p
}

// hook is the gateway's mochi hook: it decides at CONNECT, and takes readings
// to the sink before mochi writes PUBACK (mochi's processPublish calls
// OnPublish first and acknowledges only when it returns no error).
type hook struct {
	mqtt.HookBase
	g        *Gateway
	sessions sync.Map // *mqtt.Client -> *session
}

type session struct {
	conn     Connection
	prov     sink.Provenance
	key      limiter.Key
	start    time.Time
	accepted atomic.Uint64
	refused  atomic.Uint64
}

func (h *hook) ID() string { return "telemetry-gateway" }

func (h *hook) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnSessionEstablished, mqtt.OnACLCheck, mqtt.OnPublish, mqtt.OnDisconnect:
		return true
	}
	return false
}

// OnConnect resolves nothing itself: the middleware listener resolved the
// connection's chain when it was accepted. It collects every layer, applies
// the allowlist (and, for a device with a client certificate, requires the
// client id to be the certificate's common name), writes the connection's
// log line, and refuses with
// CONNACK "not authorized" (MQTT 5 reason code 0x87, 3.1.1 return code 5).
// mochi sends no CONNACK when OnConnect fails, so the hook sends it.
//
// An accepted connection gets no session here: mochi may still drop it
// before its session is established (a CONNACK it cannot write, say) and
// then never calls OnDisconnect. OnSessionEstablished records the session.
func (h *hook) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	g := h.g
	c := connectionOf(cl)
	certCN, hasCert := "", false
	if info, ok := chain.InfoFromConn(cl.Net.Conn); ok {
		info.MarkConnected()
		if len(info.State.PeerCertificates) > 0 {
			certCN, hasCert = info.State.PeerCertificates[0].Subject.CommonName, true
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
	if err == nil && hasCert && certCN != cl.ID {
		// A device that proves who it is must not speak for another: its
		// readings' ids are (client id, seq).
		err = fmt.Errorf("client id %q is not the client certificate's common name %q", cl.ID, certCN)
	}
	if err != nil {
		code := packets.ErrNotAuthorized
		if c.MQTTVersion < 5 {
			code = packets.Err3NotAuthorized
		}
		c.Refused, c.ConnAck = err, code.Code
		if g.cfg.Observer != nil {
			g.cfg.Observer.ObserveDeny(ctx, c.Result, err)
		}
		g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt connection", c.attrs()...)
		g.met.connection(ctx, "refused", middleware.OutcomeOf(err).String())
		g.notify(c)
		if err := g.srv.SendConnack(cl, code, false, nil); err != nil {
			g.log.Debug("mqtt connack not sent", "conn", c.Conn, "error", err)
		}
		return code
	}
	level := slog.LevelInfo
	if c.Result.Masqueraded {
		level = slog.LevelWarn
	}
	g.log.LogAttrs(ctx, level, "mqtt connection", c.attrs()...)
	g.met.connection(ctx, "accepted", middleware.OutcomeOf(c.ResolveErr).String())
	g.notify(c)
	return nil
}

// connectionOf collects what the listener and clientip knew about cl's
// connection; the decision fields are left zero.
func connectionOf(cl *mqtt.Client) Connection {
	c := Connection{ClientID: cl.ID, MQTTVersion: cl.Properties.ProtocolVersion}
	if info, ok := chain.InfoFromConn(cl.Net.Conn); ok {
		c.Conn, c.Facts, c.ServerName, c.TLSVersion, c.Subject = info.ID, info.Facts, info.ServerName, info.State.Version, info.Subject()
	}
	c.Result, c.ResolveErr = middleware.ResultFromConn(cl.Net.Conn)
	return c
}

// OnSessionEstablished records the session of a client that OnConnect
// accepted, once mochi has sent its CONNACK and is about to read its
// packets. From here on mochi always calls OnDisconnect when the connection
// ends, so a session (and the clients gauge) lives exactly as long as the
// connection; a connection dropped between OnConnect and here never had
// one. OnPublish, which runs on the read loop, only sees clients that got
// here.
func (h *hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	c := connectionOf(cl)
	s := &session{conn: c, prov: provenance(&c), start: time.Now()}
	s.key = limiter.Key{Prefix: clientip.RateLimitKey(c.Result.Client)}
	if c.Result.Masqueraded {
		// The node's address stands for every client it forwards: limit
		// per device identity under it, never the node as a whole.
		s.key.Identity = cl.ID
	}
	h.sessions.Store(cl, s)
	h.g.met.clients.Add(context.Background(), 1)
}

// admit is the edge policy: the allowlist when there is one; otherwise
// every client that was resolved, including masqueraded ones (which are
// warned about).
func (g *Gateway) admit(res clientip.Result, err error) error {
	if g.allow != nil {
		return g.allow.Check(res, err)
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

func (h *hook) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }

// OnACLCheck lets devices publish under the topic prefix and nothing else:
// the gateway is ingest only, the sink is the consumer.
func (h *hook) OnACLCheck(_ *mqtt.Client, topic string, write bool) bool {
	return write && strings.HasPrefix(topic, h.g.cfg.TopicPrefix)
}

// OnPublish runs on the client's read loop before mochi acknowledges: the
// reading is rate limited, validated and made durable here, and only a nil
// error lets the PUBACK go out. A QoS 0 reading, which nobody acknowledges,
// is queued for the sink without waiting for its fsync.
func (h *hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	g := h.g
	v, _ := h.sessions.Load(cl)
	s, _ := v.(*session)
	if s == nil {
		return pk, packets.ErrRejectPacket
	}
	ctx := context.Background()
	if g.buckets != nil {
		wait, ok := g.buckets.ReserveAt(s.key, time.Now(), g.cfg.RateMaxWait)
		if !ok {
			return h.refuse(ctx, cl, pk, s, "rate_limited", packets.ErrQuotaExceeded, errors.New("rate limit exceeded"))
		}
		if wait > 0 {
			// Slow the device down: mochi reads nothing more from this
			// connection meanwhile, so TCP pushes back.
			g.met.throttled.Add(ctx, 1)
			time.Sleep(wait)
		}
	}
	r, err := reading.Parse(pk.Payload, g.cfg.MaxPayload)
	if err != nil {
		return h.refuse(ctx, cl, pk, s, "invalid", packets.ErrPayloadFormatInvalid, err)
	}
	if r.Device != cl.ID {
		return h.refuse(ctx, cl, pk, s, "refused", packets.ErrNotAuthorized,
			fmt.Errorf("reading names device %q but the MQTT client id is %q", r.Device, cl.ID))
	}
	rec := &sink.Record{
		ID: r.Key(), Device: r.Device, Seq: r.Seq, Received: time.Now().UTC(),
		Protocol: "mqtt", Topic: pk.TopicName, QoS: pk.FixedHeader.Qos,
		Payload: r.Compact, Provenance: s.prov,
	}
	var res sink.Result
	if pk.FixedHeader.Qos == 0 {
		// Nobody waits for an acknowledgement: queue it and read on.
		err = g.sink.Enqueue(ctx, rec)
	} else {
		res, err = g.sink.Append(ctx, rec)
	}
	if err != nil {
		// Not acknowledged: the device keeps the message. Disconnect it so
		// that it sends the message again, to this gateway once the sink
		// works or to another one; readiness already reports the failure.
		g.log.Error("sink append failed", "conn", s.conn.Conn, "client_id", cl.ID, "id", rec.ID, "error", err)
		g.met.message(ctx, "mqtt", "sink_error")
		s.refused.Add(1)
		if cl.Properties.ProtocolVersion == 5 {
			_ = g.srv.DisconnectClient(cl, packets.ErrServerUnavailable)
		} else {
			cl.Stop(err)
		}
		return pk, packets.ErrRejectPacket
	}
	s.accepted.Add(1)
	if res.Duplicate {
		g.met.message(ctx, "mqtt", "duplicate")
		g.log.Debug("mqtt duplicate reading", "conn", s.conn.Conn, "client_id", cl.ID, "id", rec.ID)
	} else {
		g.met.message(ctx, "mqtt", "accepted")
	}
	return pk, nil
}

// refuse turns a rejected reading into MQTT: a PUBACK with reason code for
// MQTT 5 at QoS 1 and 2, nothing at all otherwise (MQTT 3.1.1 has no
// negative acknowledgement; the reading is dropped and logged).
func (h *hook) refuse(ctx context.Context, cl *mqtt.Client, pk packets.Packet, s *session, outcome string, code packets.Code, err error) (packets.Packet, error) {
	g := h.g
	s.refused.Add(1)
	g.met.message(ctx, "mqtt", outcome)
	acked := cl.Properties.ProtocolVersion == 5 && pk.FixedHeader.Qos > 0
	g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt reading refused",
		slog.Uint64("conn", s.conn.Conn), slog.String("client_id", cl.ID), slog.String("client", s.prov.Client),
		slog.String("topic", pk.TopicName), slog.Int("qos", int(pk.FixedHeader.Qos)), slog.String("outcome", outcome),
		slog.String("error", err.Error()), slog.Bool("negative_ack", acked))
	if acked {
		return pk, code
	}
	return pk, packets.ErrRejectPacket
}

func (h *hook) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
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
// knew.
func (g *Gateway) onProxyReject(r proxyproto.Rejection) {
	ctx := context.Background()
	if o, ok := g.cfg.Observer.(interface{ ObserveProxyRejection(proxyproto.Rejection) }); ok {
		o.ObserveProxyRejection(r)
	}
	g.met.connection(ctx, "proxy_rejected", r.Reason.String())
	attrs := []slog.Attr{slog.String("stage", "proxy"), slog.String("socket_peer", r.Peer.String()), slog.String("local", r.Local.String()),
		slog.Bool("trusted_upstream", r.Trusted), slog.String("reason", r.Reason.String()), slog.Duration("after", r.Duration),
		slog.String("error", r.Err.Error())}
	if r.Version != 0 {
		attrs = append(attrs, slog.Int("proxy_version", int(r.Version)))
	}
	g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt connection failed", attrs...)
}

// onChainFailure logs a connection that failed in the TLS handshake or
// before CONNECT, with every layer known by then.
func (g *Gateway) onChainFailure(f chain.Failure) {
	ctx := context.Background()
	reason := "error"
	if f.Timeout {
		reason = "timeout"
	}
	g.met.connection(ctx, string(f.Stage)+"_failed", reason)
	as := []slog.Attr{slog.Uint64("conn", f.Info.ID), slog.String("stage", string(f.Stage)), slog.Bool("timeout", f.Timeout), slog.Duration("after", f.Duration)}
	as = appendLayers(as, f.Info.Facts)
	as = append(as, slog.String("tls_sni", f.Info.ServerName))
	if s := f.Info.Subject(); s != "" {
		as = append(as, slog.String("tls_subject", s))
	}
	res, err := middleware.ResultFromConn(f.Conn)
	as = appendResult(as, res, err, nil)
	as = append(as, slog.String("error", f.Err.Error()))
	g.log.LogAttrs(ctx, slog.LevelWarn, "mqtt connection failed", as...)
	if g.cfg.OnFailure != nil {
		g.cfg.OnFailure(f)
	}
}
