package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/chain"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewRefusesUnsafeConfig: a configuration that asks for client
// certificates without a way to verify them is refused at New (attack
// trial: mTLS failed open), and so are values that make no sense.
func TestNewRefusesUnsafeConfig(t *testing.T) {
	cert, err := pki.SelfSigned("gateway.test")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	tlsWith := func(auth tls.ClientAuthType, cas *x509.CertPool) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: auth, ClientCAs: cas}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // "" when New succeeds
	}{
		{"no client certificates", nil, ""},
		{"verified client certificates", func(c *Config) { c.TLS = tlsWith(tls.RequireAndVerifyClientCert, pool) }, ""},
		{"required without ClientCAs", func(c *Config) { c.TLS = tlsWith(tls.RequireAndVerifyClientCert, nil) }, "without ClientCAs would verify client certificates against the system roots"},
		{"optional without ClientCAs", func(c *Config) { c.TLS = tlsWith(tls.VerifyClientCertIfGiven, nil) }, "without ClientCAs"},
		{"any certificate", func(c *Config) { c.TLS = tlsWith(tls.RequireAnyClientCert, pool) }, "accepts client certificates without verifying them"},
		{"requested, never verified", func(c *Config) { c.TLS = tlsWith(tls.RequestClientCert, nil) }, "accepts client certificates without verifying them"},
		{"unknown client auth", func(c *Config) { c.TLS = tlsWith(tls.ClientAuthType(42), pool) }, "TLS ClientAuth 42: unknown"},
		{"TLS at the load balancer beside WebSocket", func(c *Config) { c.TLS, c.LBTLS, c.WSAddr = nil, &chain.LBTLSConfig{}, "127.0.0.1:0" }, "LBTLS and WSAddr contradict"},
		{"NaN rate", func(c *Config) { c.RateLimit = math.NaN() }, "RateLimit NaN"},
		{"negative rate", func(c *Config) { c.RateLimit = -1 }, "RateLimit -1"},
		{"negative burst", func(c *Config) { c.RateBurst = -1 }, "RateBurst -1"},
		{"negative payload", func(c *Config) { c.MaxPayload = -1 }, "MaxPayload -1"},
		{"wildcard topic prefix", func(c *Config) { c.TopicPrefix = "#" }, `TopicPrefix "#": contains an MQTT wildcard`},
		{"negative timeout", func(c *Config) { c.ConnectTimeout = -1 }, "negative duration"},
		{"no sink", func(c *Config) { c.Sink.Path = "" }, "Sink.Path are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{MQTTAddr: "127.0.0.1:0", TLS: tlsWith(tls.NoClientCert, nil),
				Sink: sink.Config{Path: filepath.Join(t.TempDir(), "t.jsonl")}, Logger: slog.New(slog.DiscardHandler)}
			if tt.mutate != nil {
				tt.mutate(&cfg)
			}
			g, err := New(cfg)
			if tt.want == "" {
				require.NoError(t, err)
				assert.NoError(t, g.Shutdown(t.Context(), 0))
				return
			}
			require.ErrorContains(t, err, tt.want)
			assert.NoFileExists(t, cfg.Sink.Path, "the sink is not opened")
		})
	}
}

func TestCheckTopicPrefix(t *testing.T) {
	for p, ok := range map[string]bool{
		"telemetry/": true, "a": true, "sensors/düsseldorf/": true,
		"": false, "#": false, "+/": false, "tele#": false, "$SYS/": false, "a\x00": false, "\xff": false,
	} {
		assert.Equal(t, ok, CheckTopicPrefix(p) == nil, "%q", p)
	}
}
