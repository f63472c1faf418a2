package otelsourceip

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/version"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
)

// ScopeName is the instrumentation scope of this package's tracer and meter:
// its import path.
const ScopeName = "github.com/sourceip/sourceip/middleware/otelsourceip"

// Names of the instruments and of the span this package records.
const (
	ResolutionsName          = "sourceip.resolutions"
	MasqueradeDetectionsName = "sourceip.masquerade.detections"
	ProxyRejectionsName      = "sourceip.proxyproto.rejections"
	PolicyDenialsName        = "sourceip.policy.denials"
	RejectSpanName           = "sourceip.proxyproto.reject"
	ProxyShedName            = "sourceip.proxyproto.shed"
	ProxyAcceptErrorsName    = "sourceip.proxyproto.accept_errors"
	ProxyPendingName         = "sourceip.proxyproto.pending"
	ProxyUnreportedName      = "sourceip.proxyproto.unreported"
)

// Option configures [New].
type Option interface{ apply(*config) }

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider; nil, or no option, means the
// global one (otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithTracerProvider sets the TracerProvider; nil, or no option, means the
// global one (otel.GetTracerProvider) at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// Instrumentation records resolutions, masquerade detections, policy denials
// and PROXY refusals as metrics and span attributes. It implements
// [middleware.Observer]; pass its ObserveProxyRejection method as
// proxyproto.Config.OnReject, hand each PROXY listener to ObserveListener,
// each trust store to ObserveStore and each range refresher to
// ObserveRefresher. It is safe for concurrent use.
type Instrumentation struct {
	tracer trace.Tracer
	meter  metric.Meter

	resolutions metric.Int64Counter
	masquerades metric.Int64Counter
	rejections  metric.Int64Counter
	denials     metric.Int64Counter
	decisions   metric.Int64Counter

	// The measurement options of each policy rule seen.
	rules rules

	// Read from proxyproto.Listener.Stats when the meter collects.
	shed         metric.Int64ObservableCounter
	acceptErrors metric.Int64ObservableCounter
	pending      metric.Int64ObservableUpDownCounter
	unreported   metric.Int64ObservableCounter

	// Read from range refreshers and trust stores when the meter collects.
	trust trustInstruments

	// Measurement options built once, indexed by source, outcome and reason,
	// so that recording builds no attribute set.
	resolveOpts [][][]metric.AddOption // [source][outcome]
	masqOpts    [][]metric.AddOption   // [source]
	denyOpts    [][][]metric.AddOption // [source][outcome]
	rejectOpts  [numReasons][]metric.AddOption
}

const (
	numReasons = int(proxyproto.ReasonInvalid) + 1
	numShed    = len(proxyproto.Stats{}.Shed)
)

var _ middleware.Observer = (*Instrumentation)(nil)

// New returns an Instrumentation that records through the configured (or
// global) providers, under the scope [ScopeName] with semconv v1.43.0's schema
// URL and, as the scope's version, the version of the module
// github.com/sourceip/sourceip in the running program's build information
// ("(devel)" when it says none: a checkout, or the library replaced by a
// directory). It fails only when the meter refuses to create an instrument.
func New(opts ...Option) (*Instrumentation, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	v := version.Module(version.Library)
	in := &Instrumentation{
		tracer: c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(v), trace.WithSchemaURL(semconv.SchemaURL)),
	}
	m := c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(v), metric.WithSchemaURL(semconv.SchemaURL))
	var err, e error
	in.resolutions, e = m.Int64Counter(ResolutionsName,
		metric.WithDescription("Client address resolutions, by the layer the client came from and the outcome."),
		metric.WithUnit("{resolution}"))
	err = errors.Join(err, e)
	in.masquerades, e = m.Int64Counter(MasqueradeDetectionsName,
		metric.WithDescription("Resolutions that landed on a masquerading node address, by the layer it came from."),
		metric.WithUnit("{detection}"))
	err = errors.Join(err, e)
	in.rejections, e = m.Int64Counter(ProxyRejectionsName,
		metric.WithDescription("Connections a PROXY protocol listener refused, by reason."),
		metric.WithUnit("{connection}"))
	err = errors.Join(err, e)
	in.denials, e = m.Int64Counter(PolicyDenialsName,
		metric.WithDescription("Requests or connections a source-range policy refused, by reason and by the layer the client came from."),
		metric.WithUnit("{denial}"))
	err = errors.Join(err, e)
	in.decisions, e = m.Int64Counter(PolicyDecisionsName,
		metric.WithDescription("Decisions of a policy, admissions and refusals, by the rule that decided and the outcome."),
		metric.WithUnit("{decision}"))
	err = errors.Join(err, e)
	in.shed, e = m.Int64ObservableCounter(ProxyShedName,
		metric.WithDescription("Connections from untrusted peers a PROXY protocol listener closed on arrival, unread, because a pending budget was spent, by reason."),
		metric.WithUnit("{connection}"))
	err = errors.Join(err, e)
	in.acceptErrors, e = m.Int64ObservableCounter(ProxyAcceptErrorsName,
		metric.WithDescription("Errors of a PROXY protocol listener's inner Accept, such as running out of file descriptors."),
		metric.WithUnit("{error}"))
	err = errors.Join(err, e)
	in.pending, e = m.Int64ObservableUpDownCounter(ProxyPendingName,
		metric.WithDescription("Connections a PROXY protocol listener holds while they wait for their header or for Accept, by whether the peer is a trusted upstream."),
		metric.WithUnit("{connection}"))
	err = errors.Join(err, e)
	in.unreported, e = m.Int64ObservableCounter(ProxyUnreportedName,
		metric.WithDescription("Connections a PROXY protocol listener refused without calling OnReject, because MaxOnReject calls were already running; they are missing from sourceip.proxyproto.rejections."),
		metric.WithUnit("{connection}"))
	err = errors.Join(err, e, in.trust.create(m))
	if err != nil {
		return nil, err
	}
	in.meter = m

	opt := func(kv ...attribute.KeyValue) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	in.resolveOpts, in.masqOpts, in.denyOpts = make([][][]metric.AddOption, numSources), make([][]metric.AddOption, numSources), make([][][]metric.AddOption, numSources)
	for s := range numSources {
		src := SourceKey.String(clientip.Source(s).String())
		in.masqOpts[s] = opt(src)
		in.resolveOpts[s], in.denyOpts[s] = make([][]metric.AddOption, numOutcomes), make([][]metric.AddOption, numOutcomes)
		for o := range numOutcomes {
			out := middleware.Outcome(o).String()
			in.resolveOpts[s][o] = opt(src, OutcomeKey.String(out))
			in.denyOpts[s][o] = opt(src, ReasonKey.String(out))
		}
	}
	for r := range numReasons {
		in.rejectOpts[r] = opt(ReasonKey.String(proxyproto.Reason(r).String()))
	}
	in.rules.overflow = newRuleOpts(OverflowRule)
	return in, nil
}

// ObserveResolve records one resolution: it counts it in
// sourceip.resolutions by source and outcome, counts a masqueraded result in
// sourceip.masquerade.detections, and, when ctx carries a recording span, sets
// [SpanAttributes] on it. It implements [middleware.Observer]; code that
// resolves connections calls it with the connection's context, for example
// in.ObserveResolve(ctx, res, err) after middleware.ResultFromConn.
func (in *Instrumentation) ObserveResolve(ctx context.Context, res clientip.Result, err error) {
	s, o := sourceIndex(res.Source), middleware.OutcomeOf(err)
	in.resolutions.Add(ctx, 1, in.resolveOpts[s][outcomeIndex(o)]...)
	if res.Masqueraded {
		in.masquerades.Add(ctx, 1, in.masqOpts[s]...)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(SpanAttributes(res, err)...)
	}
}

// ObserveDeny records one policy denial, err being what
// middleware.Policy.Check returned: it counts it in sourceip.policy.denials
// by reason and source, and by sourceip.rule when err names the rule that
// refused (a *middleware.Denial), and, when ctx carries a recording span,
// sets sourceip.reason (and sourceip.rule) on it. It implements
// [middleware.Observer].
func (in *Instrumentation) ObserveDeny(ctx context.Context, res clientip.Result, err error) {
	s, o := sourceIndex(res.Source), middleware.OutcomeOf(err)
	rule, named := middleware.RuleOf(err)
	var ro *ruleOpts
	if named {
		ro = in.rules.of(rule)
		in.denials.Add(ctx, 1, ro.deny[s][verdictIndex(o)]...)
	} else {
		in.denials.Add(ctx, 1, in.denyOpts[s][outcomeIndex(o)]...)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(ReasonKey.String(o.String()))
		if named {
			span.SetAttributes(ro.span)
		}
	}
}

// ObserveProxyRejection records one connection a proxyproto.Listener refused;
// its signature fits proxyproto.Config.OnReject. It counts the connection in
// sourceip.proxyproto.rejections by reason and records a span named
// sourceip.proxyproto.reject, a new root of kind server that starts when the
// connection was accepted and ends now, with status Error, the socket's
// network.peer.* and network.local.* addresses, sourceip.reason and
// error.type set to the reason, and network.transport (tcp, or unix for a
// Unix-domain peer). Such connections never reach a handler, so
// this span is their only trace; pass a TracerProvider that drops it
// (go.opentelemetry.io/otel/trace/noop) to keep only the counter.
func (in *Instrumentation) ObserveProxyRejection(rej proxyproto.Rejection) {
	ctx := context.Background()
	r := int(rej.Reason)
	reason := rej.Reason.String()
	if r < numReasons {
		in.rejections.Add(ctx, 1, in.rejectOpts[r]...)
	} else {
		in.rejections.Add(ctx, 1, metric.WithAttributes(ReasonKey.String(reason)))
	}
	now := time.Now()
	attrs := make([]attribute.KeyValue, 0, 7)
	if rej.Peer.IsValid() {
		attrs = append(attrs, semconv.NetworkTransportTCP,
			semconv.NetworkPeerAddress(rej.Peer.Addr().String()),
			semconv.NetworkPeerPort(int(rej.Peer.Port())))
	} else {
		attrs = append(attrs, semconv.NetworkTransportUnix)
	}
	if rej.Local.IsValid() {
		attrs = append(attrs,
			semconv.NetworkLocalAddress(rej.Local.Addr().String()),
			semconv.NetworkLocalPort(int(rej.Local.Port())))
	}
	attrs = append(attrs, ReasonKey.String(reason), semconv.ErrorTypeKey.String(reason))
	_, span := in.tracer.Start(ctx, RejectSpanName,
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(now.Add(-rej.Duration)),
		trace.WithAttributes(attrs...))
	span.SetStatus(codes.Error, reason)
	span.End(trace.WithTimestamp(now))
}

// ObserveListener reports l's counters from [proxyproto.Listener.Stats]
// each time the meter collects: sourceip.proxyproto.shed by sourceip.reason
// (a [proxyproto.ShedReason]: "untrusted_budget", "source_budget"),
// sourceip.proxyproto.accept_errors, sourceip.proxyproto.pending by
// sourceip.trusted, and sourceip.proxyproto.unreported (refusals not
// reported to OnReject because Config.MaxOnReject calls were running). name, when not empty, is set as sourceip.listener on all
// of them, to tell several listeners apart; it should be a fixed name such
// as "mqtt" or "health", never an address. Call Unregister on the result
// when l is closed. Collecting does not allocate beyond what the meter does.
func (in *Instrumentation) ObserveListener(name string, l *proxyproto.Listener) (metric.Registration, error) {
	opt := func(kv ...attribute.KeyValue) []metric.ObserveOption { return observeOpts(ListenerKey, name, kv...) }
	var shedOpts [numShed][]metric.ObserveOption
	for r := range shedOpts {
		shedOpts[r] = opt(ReasonKey.String(proxyproto.ShedReason(r).String()))
	}
	all := opt()
	trusted, untrusted := opt(TrustedKey.Bool(true)), opt(TrustedKey.Bool(false))
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := l.Stats()
		for r, v := range st.Shed {
			o.ObserveInt64(in.shed, int64(v), shedOpts[r]...)
		}
		o.ObserveInt64(in.acceptErrors, int64(st.AcceptErrors), all...)
		o.ObserveInt64(in.pending, int64(st.Pending-st.PendingUntrusted), trusted...)
		o.ObserveInt64(in.pending, int64(st.PendingUntrusted), untrusted...)
		o.ObserveInt64(in.unreported, int64(st.Unreported), all...)
		return nil
	}, in.shed, in.acceptErrors, in.pending, in.unreported)
}
