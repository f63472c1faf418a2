package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/sourceip/sourceip/internal/version"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// scope is the gateway's instrumentation scope; its version is the examples
// module's ("(devel)" for a build from a checkout).
const (
	scope       = "github.com/sourceip/sourceip/examples/telemetry-gateway"
	scopeModule = "github.com/sourceip/sourceip/examples"
)

// instruments are the gateway's own metrics. Attributes are low-cardinality
// names only (protocol, outcome, reason), never addresses or client ids.
type instruments struct {
	conns      metric.Int64Counter
	msgs       metric.Int64Counter
	clients    metric.Int64UpDownCounter
	throttled  metric.Int64Counter
	masq       metric.Int64Counter
	commit     metric.Float64Histogram
	batch      metric.Int64Histogram
	sinkErrors metric.Int64Counter

	mu   sync.Mutex
	sets map[[3]string]metric.MeasurementOption // cached attribute sets

	mqttAccepted metric.MeasurementOption // the per-reading hot path, looked up once
	meter        metric.Meter
}

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	m := mp.Meter(scope, metric.WithInstrumentationVersion(version.Module(scopeModule)))
	in := &instruments{sets: make(map[[3]string]metric.MeasurementOption)}
	var err error
	if in.conns, err = m.Int64Counter("gateway.connections",
		metric.WithDescription("MQTT connections by outcome: accepted, refused, proxy_rejected, tls_failed, connect_failed, websocket_refused"),
		metric.WithUnit("{connection}")); err != nil {
		return nil, err
	}
	if in.msgs, err = m.Int64Counter("gateway.messages",
		metric.WithDescription("Telemetry readings by protocol and outcome: accepted, duplicate, invalid, refused, rate_limited, canceled (the client went away while its reading waited for the sink; it may be written), sink_error"),
		metric.WithUnit("{message}")); err != nil {
		return nil, err
	}
	if in.clients, err = m.Int64UpDownCounter("gateway.mqtt.clients",
		metric.WithDescription("Connected MQTT clients"), metric.WithUnit("{client}")); err != nil {
		return nil, err
	}
	if in.throttled, err = m.Int64Counter("gateway.ratelimit.throttled",
		metric.WithDescription("MQTT readings delayed by the per-client rate limit"), metric.WithUnit("{message}")); err != nil {
		return nil, err
	}
	if in.masq, err = m.Int64Counter("gateway.masqueraded",
		metric.WithDescription("Connections and requests whose resolved client is a masquerading node"), metric.WithUnit("{connection}")); err != nil {
		return nil, err
	}
	if in.commit, err = m.Float64Histogram("gateway.sink.commit.duration",
		metric.WithDescription("Time to write and fsync one sink batch"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1)); err != nil {
		return nil, err
	}
	if in.batch, err = m.Int64Histogram("gateway.sink.batch.records",
		metric.WithDescription("Records written and fsync'ed together"), metric.WithUnit("{record}"),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)); err != nil {
		return nil, err
	}
	if in.sinkErrors, err = m.Int64Counter("gateway.sink.errors",
		metric.WithDescription("Sink write or fsync failures"), metric.WithUnit("{error}")); err != nil {
		return nil, err
	}
	in.mqttAccepted = in.attrs([3]string{"mqtt", "accepted", ""})
	in.meter = m
	return in, nil
}

// observeIdle reports idle() as gateway.mqtt.idle: the MQTT connections
// waiting in the server's epoll set without a goroutine.
func (in *instruments) observeIdle(idle func() int64) error {
	_, err := in.meter.Int64ObservableGauge("gateway.mqtt.idle",
		metric.WithDescription("MQTT connections idle in the server's epoll set, without a goroutine or a read buffer"),
		metric.WithUnit("{client}"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(idle())
			return nil
		}))
	return err
}

func (in *instruments) attrs(k [3]string) metric.MeasurementOption {
	in.mu.Lock()
	defer in.mu.Unlock()
	o, ok := in.sets[k]
	if !ok {
		var kv []attribute.KeyValue
		for i, name := range [3]string{"protocol", "outcome", "reason"} {
			if k[i] != "" {
				kv = append(kv, attribute.String(name, k[i]))
			}
		}
		o = metric.WithAttributeSet(attribute.NewSet(kv...))
		in.sets[k] = o
	}
	return o
}

func (in *instruments) connection(ctx context.Context, outcome, reason string) {
	in.conns.Add(ctx, 1, in.attrs([3]string{"mqtt", outcome, reason}))
}

func (in *instruments) message(ctx context.Context, protocol, outcome string) {
	if protocol == "mqtt" && outcome == "accepted" {
		in.msgs.Add(ctx, 1, in.mqttAccepted)
		return
	}
	in.msgs.Add(ctx, 1, in.attrs([3]string{protocol, outcome, ""}))
}

func (in *instruments) masqueraded(ctx context.Context, protocol string) {
	in.masq.Add(ctx, 1, in.attrs([3]string{protocol, "", ""}))
}

// onCommit is the sink's OnCommit.
func (in *instruments) onCommit(records, _ int, d time.Duration, err error) {
	ctx := context.Background()
	if err != nil {
		in.sinkErrors.Add(ctx, 1)
		return
	}
	in.commit.Record(ctx, d.Seconds())
	in.batch.Record(ctx, int64(records))
}
