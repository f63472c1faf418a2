package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

func TestParseTopicPolicy(t *testing.T) {
	const good = `{"rules": [
		{"name": "firmware", "topic": "telemetry/+/firmware", "allow": "10.1.0.0/24"},
		{"name": "fleet", "topic": "telemetry/#", "allow": "10.0.0.0/8, 2001:db8::/32", "deny": "10.66.0.0/16"}],
	 "default": {"allow": ""}}`
	p, err := parseTopicPolicy([]byte(good))
	require.NoError(t, err)
	client := func(a string) clientip.Result {
		return clientip.Result{Client: netip.MustParseAddr(a), Source: clientip.SourceProxyProtocol}
	}
	for _, tc := range []struct {
		topic, client, rule string
		allowed             bool
	}{
		{"telemetry/d1/firmware", "10.1.0.7", "firmware", true},
		{"telemetry/d1/firmware", "10.2.0.7", "firmware", false},
		{"telemetry/d1", "10.2.0.7", "fleet", true},
		{"telemetry/d1", "10.66.0.7", "fleet", false},
		{"other/d1", "10.2.0.7", "default", false},
	} {
		d := p.Decide(tc.topic, client(tc.client), nil)
		assert.Equal(t, tc.rule, d.Rule, "%s from %s", tc.topic, tc.client)
		assert.Equal(t, tc.allowed, d.Allowed(), "%s from %s", tc.topic, tc.client)
	}
	assert.Equal(t, middleware.TargetTopics, p.Targets())

	for _, tc := range []struct{ name, json, want string }{
		{"unknown field", `{"rules": [{"name": "a", "topic": "x", "alow": "10.0.0.0/8"}]}`, "unknown field"},
		{"trailing data", `{"rules": []} {}`, "data after the policy"},
		// json.Decoder.More is false before a closing delimiter, so a stray
		// one slipped through.
		{"trailing closing brace", `{"rules": []}}`, "data after the policy"},
		{"trailing closing bracket", `{"rules": []}]`, "data after the policy"},
		{"default with a topic", `{"default": {"topic": "telemetry/#"}}`, "the default rule has a topic"},
		{"invalid filter", `{"rules": [{"name": "a", "topic": "telemetry/#/x"}]}`, "not an MQTT topic filter"},
		{"overshadowed rule", `{"rules": [{"name": "a", "topic": "telemetry/#"}, {"name": "b", "topic": "telemetry/x"}]}`, "never applies"},
		{"bad prefix", `{"rules": [{"name": "a", "topic": "t", "allow": "10.0.0.0/33"}]}`, "invalid prefix"},
		{"unnamed rule", `{"rules": [{"topic": "t"}]}`, "1 to 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTopicPolicy([]byte(tc.json))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestReadTopicPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"rules": [{"name": "all", "topic": "telemetry/#", "allow": "loopback"}]}`), 0o600))
	p, err := readTopicPolicy(path)
	require.NoError(t, err)
	assert.True(t, p.Decide("telemetry/x", clientip.Result{Client: netip.MustParseAddr("127.0.0.1")}, nil).Allowed())
	_, err = readTopicPolicy(filepath.Join(t.TempDir(), "missing.json"))
	assert.Error(t, err)
	big := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(big, make([]byte, maxConfigFileBytes+1), 0o600))
	_, err = readTopicPolicy(big)
	assert.ErrorContains(t, err, "larger than")
}
