package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/mochi-mqtt/server/v2/packets"
)

// mochiLogFilter passes mochi's own lines at or above min, except those the
// gateway writes better itself:
//   - "publish packet error", which mochi writes at Error for every reading
//     a hook refuses; the gateway logs those with their layers;
//   - "error processing packet" for a "not authorized" disconnection
//     (the hook ends an MQTT 3.1.1 connection that publishes to a topic it
//     may not), which the hook logged with every layer and the reason.
//
// Other "error processing packet" lines (protocol errors) are passed on with
// the packet's type instead of its "pk" field, where mochi dumps the whole
// packet, payload and all, in one line of several kilobytes.
type mochiLogFilter struct {
	next slog.Handler
	min  slog.Level
}

func (f *mochiLogFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.next.Enabled(ctx, l)
}

func (f *mochiLogFilter) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case "publish packet error":
		return nil
	case "error processing packet":
		out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
		drop := false
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "pk":
				if pk, ok := a.Value.Any().(packets.Packet); ok {
					out.AddAttrs(slog.String("packet", packets.PacketNames[pk.FixedHeader.Type]))
				}
				return true
			case "error":
				if err, ok := a.Value.Any().(error); ok && errors.Is(err, packets.ErrNotAuthorized) {
					drop = true
					return false
				}
			}
			out.AddAttrs(a)
			return true
		})
		if drop {
			return nil
		}
		r = out
	}
	return f.next.Handle(ctx, r)
}

func (f *mochiLogFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return &mochiLogFilter{next: f.next.WithAttrs(as), min: f.min}
}

func (f *mochiLogFilter) WithGroup(name string) slog.Handler {
	return &mochiLogFilter{next: f.next.WithGroup(name), min: f.min}
}
