package gateway

import (
	"context"
	"log/slog"
)

// levelFilter passes the MQTT server's own lines (protocol errors, keep
// alive expiries) at or above min.
type levelFilter struct {
	next slog.Handler
	min  slog.Level
}

func (f *levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.next.Enabled(ctx, l)
}

func (f *levelFilter) Handle(ctx context.Context, r slog.Record) error {
	return f.next.Handle(ctx, r)
}

func (f *levelFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelFilter{next: f.next.WithAttrs(as), min: f.min}
}

func (f *levelFilter) WithGroup(name string) slog.Handler {
	return &levelFilter{next: f.next.WithGroup(name), min: f.min}
}
