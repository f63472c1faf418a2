package middleware

import (
	"context"
	"log/slog"

	"github.com/sourceip/sourceip/clientip"
)

// Attrs returns the attributes of one log line about a resolution or a
// policy decision: "decision", the [Outcome] of err; "rule", when err is a
// [Policy]'s [Denial], the rule that refused; "clientip", a group with
// every layer of res (client, source, header, hop, via, socket peer, PROXY
// source, masquerade flag; see [clientip.Result.LogValue]); and "error" when
// err is not nil. The error text may quote, truncated, a header entry the
// client wrote.
func Attrs(res clientip.Result, err error) []slog.Attr {
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("decision", OutcomeOf(err).String()))
	if rule, ok := RuleOf(err); ok {
		attrs = append(attrs, slog.String("rule", rule))
	}
	attrs = append(attrs, slog.Any("clientip", res))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	return attrs
}

// Log writes one line to l with msg, [Attrs] of res and err, and extra
// attributes such as the request's method and path or a connection's MQTT
// client id. The level is Info when err is nil and Warn otherwise (including a
// masqueraded result). Nothing is computed when l does not log at that level.
//
//	middleware.Log(ctx, logger, "mqtt connect", res, err, slog.String("client_id", id))
//
// writes, with a text handler:
//
//	level=INFO msg="mqtt connect" decision=resolved clientip.client=203.0.113.7 clientip.source=proxy-protocol clientip.hop=1 clientip.via=10.0.0.5 clientip.peer=10.0.0.5:41234 clientip.proxy=203.0.113.7:5555 client_id=sensor-17
func Log(ctx context.Context, l *slog.Logger, msg string, res clientip.Result, err error, extra ...slog.Attr) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	if !l.Enabled(ctx, level) {
		return
	}
	l.LogAttrs(ctx, level, msg, append(Attrs(res, err), extra...)...)
}

// LogObserver returns an [Observer] that writes one line per observation
// with [Log]: "client resolve" for each resolution and "client deny" for each
// refusal. A nil logger means slog.Default() at the time of each call.
func LogObserver(l *slog.Logger) Observer { return logObserver{l} }

type logObserver struct{ l *slog.Logger }

func (o logObserver) logger() *slog.Logger {
	if o.l == nil {
		return slog.Default()
	}
	return o.l
}

func (o logObserver) ObserveResolve(ctx context.Context, res clientip.Result, err error) {
	Log(ctx, o.logger(), "client resolve", res, err)
}

func (o logObserver) ObserveDeny(ctx context.Context, res clientip.Result, err error) {
	Log(ctx, o.logger(), "client deny", res, err)
}
