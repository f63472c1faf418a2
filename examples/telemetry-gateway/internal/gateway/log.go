package gateway

import (
	"context"
	"log/slog"
)

// mochiLogFilter passes mochi's own lines at or above min, except
// "publish packet error", which mochi writes at Error for every reading a hook
// refuses; the gateway logs those itself, with their layers.
type mochiLogFilter struct {
	next slog.Handler
	min  slog.Level
}

func (f *mochiLogFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.next.Enabled(ctx, l)
}

func (f *mochiLogFilter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "publish packet error" {
		return nil
	}
	return f.next.Handle(ctx, r)
}

func (f *mochiLogFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return &mochiLogFilter{next: f.next.WithAttrs(as), min: f.min}
}

func (f *mochiLogFilter) WithGroup(name string) slog.Handler {
	return &mochiLogFilter{next: f.next.WithGroup(name), min: f.min}
}
