package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"go.opentelemetry.io/otel/metric"
)

// Config configures a Gateway. Addresses are host:port; port 0 picks one.
type Config struct {
	// MQTTAddr is the MQTT-over-TLS listener. Required.
	MQTTAddr string
	// HTTPAddr is the HTTP ingest listener; "" disables HTTP ingest.
	HTTPAddr string
	// AdminAddr serves /livez, /readyz and /metrics; "" disables it.
	AdminAddr string
	// ExplainAllow admits operators who connect to the admin server
	// directly from these addresses to /debug/clientip/conn, the
	// explanation of one open MQTT connection (see the explain package). It
	// reveals the trust configuration; the zero value serves it to no one.
	ExplainAllow clientip.PrefixSet

	// ProxyTrusted are the load balancers that must send a PROXY header;
	// a header from anyone else is refused. Empty: no header is accepted and
	// every client is its socket peer.
	ProxyTrusted clientip.PrefixSet
	// ProxyHeaderless lets trusted load balancers connect without a header
	// (TCP health checks); such connections never name a client and are
	// refused at CONNECT.
	ProxyHeaderless proxyproto.HeaderlessPolicy
	// ProxyHeaderTimeout bounds the PROXY header read; zero is proxyproto's
	// default.
	ProxyHeaderTimeout time.Duration
	// RequireProxy refuses, at CONNECT with "not authorized", an MQTT
	// client that did not come through a trusted hop: one whose resolved
	// client is its socket peer (a device connecting to the gateway
	// directly, past the load balancer). False (the default) serves such a
	// client as itself, which is safe (it cannot claim another address) but
	// leaves keeping it out to the network: see the README's firewalling
	// note.
	RequireProxy bool

	// HTTPTrusted and HTTPHeader are the trusted-proxy chain for HTTP ingest
	// (the ingress controllers and the header they append).
	HTTPTrusted clientip.PrefixSet
	HTTPHeader  string

	// WSAddr is the MQTT-over-WebSocket listener (path /mqtt, subprotocol
	// mqtt; see the ws package), plain HTTP behind an ingress that
	// terminates TLS; "" disables it. Its connections go through the same
	// CONNECT hook, policy, rate limit, log lines and sink provenance as the
	// MQTT listener's, with the client resolved from the upgrade request.
	WSAddr string
	// WSTrusted are the ingress proxies trusted to append WSHeader
	// ("X-Forwarded-For", "Forwarded", …) on the WebSocket listener, and
	// WSProxyTrusted the load balancers in front of it that send a PROXY
	// header (they must). Together they are the WebSocket chain's trusted
	// hops: one clientip trust that its PROXY listener and resolver read.
	WSTrusted      clientip.PrefixSet
	WSHeader       string
	WSProxyTrusted clientip.PrefixSet
	// WSOrigin says how to read an upgrade request's own origin (the
	// headers the trusted ingress writes, such as X-Forwarded-Proto) and
	// which hosts the gateway answers to (AllowedHosts; a request for
	// another is refused with 403). WSAllowedOrigins are the origins,
	// besides the request's own, browsers may open a WebSocket from; an
	// upgrade with any other Origin is refused with 403. Requests without
	// an Origin (devices, not browsers) are not checked against origins.
	WSOrigin         clientip.OriginConfig
	WSAllowedOrigins []clientip.Origin
	// Masquerade are node addresses that stand in for clients
	// (externalTrafficPolicy: Cluster).
	Masquerade clientip.PrefixSet
	// Allow, when not empty, admits only clients resolved inside it, on both
	// MQTT and HTTP; masqueraded and unresolved clients are then refused too.
	Allow clientip.PrefixSet

	// TLS is the MQTT server's TLS configuration. Required unless LBTLS is
	// set. A ClientAuth that asks for client certificates needs a way to
	// verify them (ClientCAs, or VerifyPeerCertificate, VerifyConnection or
	// GetConfigForClient): the gateway takes a certificate's subject for the
	// device's identity, so an unverified one is refused at New.
	TLS *tls.Config
	// LBTLS, instead of TLS, is the mode with no TLS listener of the
	// gateway's own: the load balancers in ProxyTrusted terminate the
	// devices' TLS, require and verify their client certificates, and report
	// them in the PROXY v2 header's SSL TLV (HAProxy: verify required and
	// send-proxy-v2-ssl-cn). A CONNECT whose header does not say that the
	// client presented a certificate the load balancer verified is refused
	// as not authorized. The identity is the certificate the load balancer
	// forwarded, verified again against LBTLS.ClientCAs, or, when it forwards
	// none (or ClientCAs is nil), the common name it reported (weaker: see
	// chain.LBTLSConfig). The client id must be that common name, as on the
	// direct TLS path. The PROXY listener then accepts headers up to
	// proxyproto.MaxHeaderBytesLimit from the load balancers, room for a
	// forwarded certificate.
	LBTLS *chain.LBTLSConfig
	// HandshakeTimeout and ConnectTimeout bound the TLS handshake and the
	// wait for CONNECT; zero means the chain package's defaults.
	HandshakeTimeout, ConnectTimeout time.Duration
	// HTTPReadTimeout bounds reading one HTTP ingest request, headers and
	// body, so that a client trickling its body cannot hold a connection and
	// its goroutine; zero means 30 seconds.
	HTTPReadTimeout time.Duration

	// Sink configures the durable JSON Lines sink (Path is required unless
	// Store is set); New opens it and Shutdown closes it. A zero
	// MaxLineBytes is set to fit the largest MQTT packet the gateway takes
	// (a reading of MaxPayload and a long topic).
	Sink sink.Config
	// Store, when set, replaces the JSON Lines sink: readings go there (a
	// JetStream stream shared by replicas, say), Sink and SinkMinFree are
	// ignored, and Shutdown closes it.
	Store Store
	// IdleGCPercent, when positive, is the collector's target (GOGC) while
	// the gateway takes no readings; while readings flow it is Go's default
	// of 100. The process's whole collector is tuned, so a program that does
	// more than run the gateway should leave it zero (off).
	IdleGCPercent int
	// ReceiveMaximum is how many QoS 1 readings one connection may have
	// waiting for their acknowledgement (announced to MQTT 5 clients, which
	// are disconnected when they exceed it; MQTT 3.1.1 clients are read no
	// further until one is acknowledged). Zero means DefaultReceiveMaximum.
	ReceiveMaximum uint16
	// SinkMinFree is the free space the sink's file system must keep for the
	// gateway to report ready; it is checked at New and every
	// SinkCheckInterval (zero: DefaultSinkCheckInterval). Zero disables the
	// check. FreeSpace, for tests, replaces the statfs(2) that measures it.
	SinkMinFree       uint64
	SinkCheckInterval time.Duration
	FreeSpace         func(path string) (uint64, error)
	// MaxPayload bounds a reading, at most MaxPayloadLimit; zero means
	// reading.DefaultMaxBytes.
	MaxPayload int
	// TopicPrefix is the topic space devices may publish to; "" means
	// "telemetry/". It must be a valid start of an MQTT topic name (see
	// CheckTopicPrefix).
	TopicPrefix string
	// TopicPolicy, when not nil, judges each topic a connected device
	// publishes to under TopicPrefix by the client resolved for its
	// connection, rule by rule (a middleware.Policy of TargetTopics): a
	// refused PUBLISH is dropped (QoS 0), acknowledged with 0x87 not
	// authorized (MQTT 5) or ends the connection (MQTT 3.1.1, which has no
	// negative acknowledgement), and counted as a refused message. Nil: every
	// admitted client may publish anywhere under TopicPrefix.
	TopicPolicy *middleware.Policy

	// RateLimit is the readings per second one client may send (0: no
	// limit), RateBurst the bucket size (zero means 1), and RateMaxWait how
	// long a publisher is slowed down before it is refused. Negative, NaN
	// and infinite values are refused.
	RateLimit   float64
	RateBurst   int
	RateMaxWait time.Duration

	// MasqueradeWarnEvery is how often the warning about one masquerading
	// node is repeated; zero means a minute.
	MasqueradeWarnEvery time.Duration

	// KubeHealthAddr, when set, serves a kube-proxy-compatible health check
	// (trafficpolicy.HealthServer) for node-local deployments, accepting an
	// optional PROXY header; KubeService is its "namespace/name" and
	// KubeEndpoint the endpoint it reports ready (zero: the MQTT address).
	KubeHealthAddr string
	KubeService    string
	KubeEndpoint   netip.AddrPort

	// Logger receives the gateway's lines; nil means slog.Default().
	Logger *slog.Logger
	// MQTTLogLevel is the lowest level of the MQTT server's own lines that
	// is passed on (protocol errors and keep alive expiries, at Debug); the
	// gateway logs every event that matters itself. Zero is Info; use
	// slog.LevelError+1 to silence them.
	MQTTLogLevel slog.Level
	// MeterProvider receives the gateway's metrics; nil means none.
	MeterProvider metric.MeterProvider
	// Metrics, when set, is served on /metrics of the admin server.
	Metrics http.Handler
	// Observer is told of every resolution and refusal, for MQTT and HTTP
	// (the middleware's Observer; otelsourceip implements it), and of every
	// connection the PROXY listener refuses when it also has a method
	// ObserveProxyRejection(proxyproto.Rejection).
	Observer middleware.Observer
	// OnConnection, when set, is called with every MQTT connection's record
	// after its log line (accepted or refused); OnFailure with every
	// connection that failed before CONNECT. For the demo and tests.
	OnConnection func(Connection)
	OnFailure    func(chain.Failure)
}

// Defaults and limits of Config fields.
const (
	// DefaultSinkMinFree is the free space under which the command's
	// gateway reports not ready.
	DefaultSinkMinFree = 64 << 20
	// DefaultSinkCheckInterval is how often free space is checked.
	DefaultSinkCheckInterval = 10 * time.Second
	// MaxPayloadLimit is the largest MaxPayload: MQTT's largest packet
	// (256 MiB) less room for the topic and properties.
	MaxPayloadLimit = 256<<20 - 64<<10
	// DefaultReceiveMaximum is the QoS 1 readings a connection may have
	// waiting: enough to keep a device's window full through a group
	// commit, small enough that 10,000 busy devices queue a bounded amount.
	DefaultReceiveMaximum = 256
)

// check refuses a configuration the gateway cannot serve safely.
func (cfg *Config) check() error {
	var errs []error
	if cfg.MQTTAddr == "" || (cfg.TLS == nil && cfg.LBTLS == nil) || (cfg.Sink.Path == "" && cfg.Store == nil) {
		errs = append(errs, errors.New("MQTTAddr, TLS and Sink.Path are required (or LBTLS instead of TLS, a Store instead of Sink.Path)"))
	}
	if cfg.TLS != nil && cfg.LBTLS != nil {
		errs = append(errs, errors.New("TLS and LBTLS contradict each other: TLS terminates at the gateway or at the load balancer"))
	}
	if cfg.LBTLS != nil && cfg.WSAddr != "" {
		// Connect would refuse every WebSocket device for want of a
		// certificate it cannot present, blaming the load balancer.
		errs = append(errs, errors.New("LBTLS and WSAddr contradict each other: with TLS at the load balancer every CONNECT needs a client certificate it verified, which no MQTT-over-WebSocket connection carries"))
	}
	if err := checkClientAuth(cfg.TLS); err != nil {
		errs = append(errs, err)
	}
	if math.IsNaN(cfg.RateLimit) || math.IsInf(cfg.RateLimit, 0) || cfg.RateLimit < 0 {
		errs = append(errs, fmt.Errorf("RateLimit %v: want a finite number ≥ 0", cfg.RateLimit))
	}
	if cfg.RateBurst < 0 || cfg.RateMaxWait < 0 {
		errs = append(errs, fmt.Errorf("RateBurst %d, RateMaxWait %v: want values ≥ 0", cfg.RateBurst, cfg.RateMaxWait))
	}
	if cfg.MaxPayload < 0 || cfg.MaxPayload > MaxPayloadLimit {
		errs = append(errs, fmt.Errorf("MaxPayload %d: want 0 to %d bytes", cfg.MaxPayload, MaxPayloadLimit))
	}
	if cfg.TopicPolicy != nil && cfg.TopicPolicy.Targets() != middleware.TargetTopics {
		errs = append(errs, fmt.Errorf("TopicPolicy judges %v, not MQTT topics", cfg.TopicPolicy.Targets()))
	}
	if cfg.TopicPrefix != "" {
		if err := CheckTopicPrefix(cfg.TopicPrefix); err != nil {
			errs = append(errs, fmt.Errorf("TopicPrefix %q: %w", cfg.TopicPrefix, err))
		}
	}
	for _, d := range []time.Duration{cfg.ProxyHeaderTimeout, cfg.HandshakeTimeout, cfg.ConnectTimeout, cfg.HTTPReadTimeout, cfg.SinkCheckInterval, cfg.MasqueradeWarnEvery} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("negative duration %v (zero means the default)", d))
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("gateway: %w", errors.Join(errs...))
	}
	return nil
}

// checkClientAuth refuses a TLS configuration that asks for client
// certificates without a way to verify them: RequestClientCert and
// RequireAnyClientCert accept any certificate, and the verifying modes
// without ClientCAs verify against the system roots, where any certificate a
// public CA issued passes. The gateway logs a certificate's subject as the
// device's identity and binds the MQTT client id to its common name, so an
// unverified certificate would let anyone be any device.
func checkClientAuth(c *tls.Config) error {
	if c == nil {
		return nil
	}
	custom := c.VerifyPeerCertificate != nil || c.VerifyConnection != nil || c.GetConfigForClient != nil
	switch c.ClientAuth {
	case tls.NoClientCert:
		return nil
	case tls.RequestClientCert, tls.RequireAnyClientCert:
		if !custom {
			return fmt.Errorf("TLS ClientAuth %v accepts client certificates without verifying them; use VerifyClientCertIfGiven or RequireAndVerifyClientCert with ClientCAs", c.ClientAuth)
		}
	case tls.VerifyClientCertIfGiven, tls.RequireAndVerifyClientCert:
		if c.ClientCAs == nil && !custom {
			return fmt.Errorf("TLS ClientAuth %v without ClientCAs would verify client certificates against the system roots; set ClientCAs to the devices' CA", c.ClientAuth)
		}
	default:
		return fmt.Errorf("TLS ClientAuth %d: unknown", c.ClientAuth)
	}
	return nil
}

// CheckTopicPrefix reports whether p can start the topic names devices
// publish to (MQTT 3.1.1 §4.7, MQTT 5 §4.7): not empty, valid UTF-8 without
// U+0000, no wildcard ('+' or '#': a prefix is matched literally, and no
// topic name contains one), not starting with '$' (reserved for the
// server's topics), and at most 65,535 bytes.
func CheckTopicPrefix(p string) error {
	switch {
	case p == "":
		return errors.New("empty: give the topic space devices publish to, such as telemetry/")
	case len(p) > 65535:
		return errors.New("longer than an MQTT topic can be (65,535 bytes)")
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return errors.New("not valid UTF-8 without U+0000, as MQTT topics must be")
	case strings.ContainsAny(p, "+#"):
		return errors.New("contains an MQTT wildcard (+ or #); it is a literal prefix of topic names, which never contain wildcards")
	case strings.HasPrefix(p, "$"):
		return errors.New("starts with $, which MQTT reserves for the server's own topics")
	}
	return nil
}
