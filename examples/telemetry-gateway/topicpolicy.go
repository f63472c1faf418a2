package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// topicRule is one rule of a -topic-policy file. The prefix sets are
// comma-separated lists of addresses, CIDR prefixes or presets, as the
// address flags take them.
type topicRule struct {
	Name             string             `json:"name"`
	Topic            string             `json:"topic"`
	Allow            clientip.PrefixSet `json:"allow"`
	Deny             clientip.PrefixSet `json:"deny"`
	AdmitMasqueraded bool               `json:"admit_masqueraded"`
	AdmitInternal    bool               `json:"admit_internal"`
}

// topicPolicyFile is the JSON of -topic-policy.
type topicPolicyFile struct {
	Rules   []topicRule `json:"rules"`
	Default topicRule   `json:"default"`
}

func (r topicRule) rule() middleware.Rule {
	return middleware.Rule{Name: r.Name, Target: r.Topic, Allow: r.Allow, Deny: r.Deny,
		AdmitMasqueraded: r.AdmitMasqueraded, AdmitInternal: r.AdmitInternal}
}

// readTopicPolicy reads a -topic-policy file: MQTT topic filters, each with
// the client ranges it admits, the first that covers a topic deciding, and a
// default for the topics no rule covers, which refuses every client unless
// it says otherwise:
//
//	{"rules": [
//	   {"name": "firmware", "topic": "telemetry/+/firmware", "allow": "10.1.0.0/24"},
//	   {"name": "fleet", "topic": "telemetry/#", "allow": "10.0.0.0/8, 2001:db8::/32", "deny": "10.66.0.0/16"}],
//	 "default": {"allow": ""}}
//
// Unknown fields and trailing data are errors, and so is anything
// middleware.NewPolicy refuses (a filter an earlier rule always covers, a
// repeated name) and a filter that matches no topic under prefix, the
// -topic-prefix devices may publish to: such a rule never applies.
func readTopicPolicy(path, prefix string) (*middleware.Policy, error) {
	b, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	return parseTopicPolicy(b, prefix)
}

func parseTopicPolicy(b []byte, prefix string) (*middleware.Policy, error) {
	var file topicPolicyFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the policy")
	}
	if file.Default.Topic != "" {
		return nil, errors.New("the default rule has a topic; it decides what no rule covers")
	}
	cfg := middleware.PolicyConfig{Targets: middleware.TargetTopics, Default: file.Default.rule()}
	for _, r := range file.Rules {
		cfg.Rules = append(cfg.Rules, r.rule())
	}
	p, err := middleware.NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	for _, r := range file.Rules {
		if !matchesUnder(r.Topic, prefix) {
			return nil, fmt.Errorf("rule %q: topic filter %q matches no topic under -topic-prefix %q, so it never applies", r.Name, r.Topic, prefix)
		}
	}
	return p, nil
}

// matchesUnder reports whether the MQTT topic filter f, which
// middleware.NewPolicy has checked, matches any topic name that starts
// with prefix.
func matchesUnder(f, prefix string) bool {
	levels := strings.Split(f, "/")
	p := prefix // what the topic must still start with
	for i, l := range levels {
		switch l {
		case "#":
			return true
		case "+":
			j := strings.IndexByte(p, '/')
			if j < 0 {
				return true // the prefix ends inside the level + matches
			}
			p = p[j:]
		default:
			if len(p) <= len(l) {
				return strings.HasPrefix(l, p) // the topic goes on to complete l
			}
			if !strings.HasPrefix(p, l) {
				return false
			}
			p = p[len(l):]
		}
		// The prefix goes on past this level: it must start the next one,
		// which the filter must have.
		if i == len(levels)-1 || p[0] != '/' {
			return false
		}
		p = p[1:]
	}
	return false
}
