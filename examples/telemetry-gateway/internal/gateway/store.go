package gateway

import (
	"context"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
)

// Store is where the gateway puts accepted readings: the JSON Lines sink
// (*sink.Sink, the default) or a shared one such as JetStream (package
// jetstream), which replicas behind one load balancer need so that a
// redelivery reaching another replica is still recognised.
//
// Submit must answer every record it accepted exactly once, without
// blocking the caller for the commit: with a nil error once the record is
// durable (Result.Duplicate when an identical id already was), or with the
// error that kept it from being stored; the gateway acknowledges a reading
// only after a nil answer. A record the store can never hold is refused by
// Submit with an error wrapping sink.ErrTooLarge: the gateway refuses the
// reading (MQTT 5 PUBACK 0x83, HTTP 413) instead of taking the store for
// failed and disconnecting its device, which would send it again for ever.
// done must be called from a goroutine that does not wait for the gateway.
// Healthy returns nil while the store accepts records (readiness reports its
// error), Stats its counters, and Close answers what is pending and releases
// the store.
type Store interface {
	sink.Submitter
	Healthy() error
	Stats() sink.Stats
	Close() error
}

var _ Store = (*sink.Sink)(nil)

// submitAndWait is Submit for a caller that waits: HTTP ingest and MQTT QoS 2.
func (g *Gateway) submitAndWait(ctx context.Context, rec *sink.Record) (sink.Result, error) {
	return sink.Append(ctx, g.store, rec)
}
