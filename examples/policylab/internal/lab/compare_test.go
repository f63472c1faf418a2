package lab

import (
	"fmt"
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/stretchr/testify/assert"
)

func nodeAnswer(now, updated string) report.Answer {
	body := fmt.Sprintf(`{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":%q,"healthy":true}}}`, now, now, updated)
	return report.Answer{Code: 200, Headers: fmt.Sprintf("Content-Length: %d\nContent-Type: application/json\nX-Content-Type-Options: nosniff", len(body)), Body: body}
}

// The comparison is byte for byte except for the times a node health body
// carries, whose length may change Content-Length.
func TestSameAnswer(t *testing.T) {
	svc := report.Answer{Code: 200, Headers: "Content-Length: 111\nContent-Type: application/json\nX-Load-Balancing-Endpoint-Weight: 1", Body: "{\n\t\"localEndpoints\": 1\n}"}
	other := svc
	other.Headers = "Content-Length: 111\nContent-Type: application/json\nX-Load-Balancing-Endpoint-Weight: 2"
	kube := nodeAnswer("2026-12-03T07:04:00.20211997Z", "2026-12-03T07:04:00.149174382Z")
	own := nodeAnswer("2026-12-03T07:04:00.3Z", "2026-12-03T07:04:01+01:00")
	badLength := own
	badLength.Headers = kube.Headers
	badTime := nodeAnswer("2026-13-03T07:04:00Z", "2026-12-03T07:04:00Z")
	ineligible := nodeAnswer("2026-12-03T07:04:00Z", "2026-12-03T07:04:00Z")
	ineligible.Code = 503
	tests := []struct {
		name      string
		kube, own report.Answer
		times     bool
		equal     bool
	}{
		{"same service answer", svc, svc, false, true},
		{"another weight", svc, other, false, false},
		{"node answers differing in times only", kube, own, true, true},
		{"times are compared as such without masking", kube, own, false, false},
		{"Content-Length not the body's", kube, badLength, true, false},
		{"a time that does not parse", kube, badTime, true, false},
		{"another status", kube, ineligible, true, false},
		{"an error", kube, report.Answer{Err: "connection refused"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eq, diff := sameAnswer(tt.kube, tt.own, tt.times)
			assert.Equal(t, tt.equal, eq, diff)
			assert.Equal(t, tt.equal, diff == "", diff)
		})
	}
}
