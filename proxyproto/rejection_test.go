package proxyproto

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A Rejection logs as one group; a Rejection without an error, such as the
// zero value or one a caller built to test its OnReject callback, logs
// without the error instead of panicking in Err.Error.
func TestRejectionLogValue(t *testing.T) {
	tests := []struct {
		name string
		r    Rejection
		want string
	}{
		{"zero value (nil Err)", Rejection{},
			"rej.peer=unix rej.local=unix rej.trusted=false rej.version=0 rej.reason=no_header rej.duration=0s"},
		{"timeout", Rejection{Peer: ap("192.0.2.1:5"), Local: ap("192.0.2.10:8883"), Trusted: true, Version: 2,
			Reason: ReasonTimeout, Err: fmt.Errorf("%w after 3 bytes", ErrTimeout), Duration: time.Second},
			`rej.peer=192.0.2.1:5 rej.local=192.0.2.10:8883 rej.trusted=true rej.version=2 rej.reason=timeout ` +
				`rej.error="` + ErrTimeout.Error() + ` after 3 bytes" rej.duration=1s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.NotPanics(t, func() { tt.r.LogValue() }, "LogValue")
			assert.Equal(t, tt.want, logAttrs("rej", tt.r))
		})
	}
}
