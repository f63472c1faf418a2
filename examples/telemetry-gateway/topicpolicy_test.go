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
	p, err := parseTopicPolicy([]byte(good), "telemetry/")
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
			_, err := parseTopicPolicy([]byte(tc.json), "telemetry/")
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestReadTopicPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"rules": [{"name": "all", "topic": "telemetry/#", "allow": "loopback"}]}`), 0o600))
	p, err := readTopicPolicy(path, "telemetry/")
	require.NoError(t, err)
	assert.True(t, p.Decide("telemetry/x", clientip.Result{Client: netip.MustParseAddr("127.0.0.1")}, nil).Allowed())
	_, err = readTopicPolicy(filepath.Join(t.TempDir(), "missing.json"), "telemetry/")
	assert.Error(t, err)
	big := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(big, make([]byte, maxConfigFileBytes+1), 0o600))
	_, err = readTopicPolicy(big, "telemetry/")
	assert.ErrorContains(t, err, "larger than")
}

// TestTopicPolicyRuleOutsideThePrefix: a rule whose topic filter matches no
// topic under -topic-prefix never applies, and the policy is refused; it
// was accepted, so a deny rule with a misspelt filter ("Telemetry/#") left
// the default to admit the clients it was written to refuse (found by the
// command review, 2026-12-03).
func TestTopicPolicyRuleOutsideThePrefix(t *testing.T) {
	const misspelt = `{"rules": [{"name": "quarantine", "topic": "Telemetry/#", "deny": "10.66.0.0/16"}],
	 "default": {"allow": "10.0.0.0/8"}}`
	_, err := parseTopicPolicy([]byte(misspelt), "telemetry/")
	require.ErrorContains(t, err, `rule "quarantine": topic filter "Telemetry/#" matches no topic under -topic-prefix "telemetry/"`)

	for _, tc := range []struct {
		filter, prefix string
		matches        bool
	}{
		{"telemetry/#", "telemetry/", true},
		{"telemetry/+/firmware", "telemetry/", true},
		{"#", "telemetry/", true},
		{"+/d1", "telemetry/", true},
		{"+", "telemetry", true},
		{"telemetry/#", "tele", true},
		{"telemetry/#", "telemetry/eu/", true},
		{"telemetry/+/+", "telemetry/eu/", true},
		{"telemetry/eu", "telemetry/eu", true},
		{"other/#", "telemetry/", false},
		{"Telemetry/#", "telemetry/", false},
		{"telemetry", "telemetry/", false},
		{"tel", "tele", false},
		{"telemetry/+", "telemetry/eu/", false},
		{"telemetry/us/#", "telemetry/eu/", false},
		{"+/+", "a/b/c", false},
	} {
		assert.Equal(t, tc.matches, matchesUnder(tc.filter, tc.prefix), "filter %q under prefix %q", tc.filter, tc.prefix)
	}
}
