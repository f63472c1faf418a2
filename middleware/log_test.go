package middleware

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// textLogger writes without time, for exact comparisons.
func textLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestLog(t *testing.T) {
	viaPROXY := clientip.Result{
		Client: netip.MustParseAddr("203.0.113.7"), Source: clientip.SourceProxyProtocol, Hop: 1,
		Via: netip.MustParseAddr("10.0.0.5"), Peer: netip.MustParseAddrPort("10.0.0.5:41234"),
		Proxy: netip.MustParseAddrPort("203.0.113.7:5555"),
	}
	malformed := clientip.Result{Peer: netip.MustParseAddrPort("10.0.0.1:4000"), Header: "X-Forwarded-For", Hop: 2}
	tests := []struct {
		name  string
		res   clientip.Result
		err   error
		extra []slog.Attr
		level slog.Level
		want  string
	}{
		{name: "PROXY connection", res: viaPROXY, extra: []slog.Attr{slog.String("client_id", "sensor-17")},
			want: `level=INFO msg="mqtt connect" decision=resolved clientip.client=203.0.113.7 clientip.source=proxy-protocol clientip.hop=1 clientip.via=10.0.0.5 clientip.peer=10.0.0.5:41234 clientip.proxy=203.0.113.7:5555 client_id=sensor-17` + "\n"},
		{name: "failure is a warning with the error", res: malformed,
			err:  &clientip.ChainError{Hop: 2, Header: "X-Forwarded-For", Value: "bogus", Err: clientip.ErrMalformed},
			want: `level=WARN msg="mqtt connect" decision=malformed clientip.source=none clientip.header=X-Forwarded-For clientip.hop=2 clientip.peer=10.0.0.1:4000 error="clientip: malformed address (hop 2 in X-Forwarded-For: \"bogus\")"` + "\n"},
		{name: "policy denial", res: viaPROXY, err: ErrNotAllowed,
			want: `level=WARN msg="mqtt connect" decision=not_allowed clientip.client=203.0.113.7 clientip.source=proxy-protocol clientip.hop=1 clientip.via=10.0.0.5 clientip.peer=10.0.0.5:41234 clientip.proxy=203.0.113.7:5555 error="middleware: client address not in an allowed source range"` + "\n"},
		{name: "below the logger's level", res: viaPROXY, level: slog.LevelWarn, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			Log(context.Background(), textLogger(&buf, tc.level), "mqtt connect", tc.res, tc.err, tc.extra...)
			assert.Equal(t, tc.want, buf.String())
		})
	}
}

func TestLogObserver(t *testing.T) {
	var buf bytes.Buffer
	obs := LogObserver(textLogger(&buf, slog.LevelInfo))
	mw, err := New(Config{Trust: testResolver(t), Observer: obs})
	require.NoError(t, err)
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office, Observer: obs})
	require.NoError(t, err)
	mw(p.Handler(echo)).ServeHTTP(discard{}, request("10.0.0.1:4000", "203.0.113.9"))
	want := `level=INFO msg="client resolve" decision=resolved clientip.client=203.0.113.9 clientip.source=x-forwarded-for clientip.header=X-Forwarded-For clientip.hop=1 clientip.via=10.0.0.1 clientip.peer=10.0.0.1:4000` + "\n" +
		`level=WARN msg="client deny" decision=not_allowed rule=source-ranges clientip.client=203.0.113.9 clientip.source=x-forwarded-for clientip.header=X-Forwarded-For clientip.hop=1 clientip.via=10.0.0.1 clientip.peer=10.0.0.1:4000 error="middleware: client address not in an allowed source range (rule source-ranges)"` + "\n"
	assert.Equal(t, want, buf.String())
}
