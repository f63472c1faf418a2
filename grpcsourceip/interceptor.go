package grpcsourceip

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/ratelimit"
)

// Config configures an [Interceptor].
type Config struct {
	// Trust resolves each RPC's client (see [clientip.Trust]; a
	// *clientip.Resolver is a static Trust). Required: it holds the trust
	// configuration, and there is no safe default for it. Its configured
	// header (clientip.Config.Header) names the one metadata key that is
	// read: "X-Forwarded-For" reads x-forwarded-for, "Forwarded" reads
	// forwarded, and so on.
	Trust clientip.Trust

	// Policy, when not nil, judges each RPC's resolution, failures
	// included, before the rate limit and the handler; see [Policy]. Nil
	// admits every client that resolves and refuses the others with
	// InvalidArgument, except a masqueraded result
	// ([clientip.ErrMasqueraded]), which goes on flagged, as the HTTP
	// middleware lets it.
	Policy Policy

	// RateLimit, when its Store is set, limits the RPCs of each client:
	// one token per unary RPC and one per stream, taken after the Policy
	// admitted the RPC. Its zero value limits nothing.
	RateLimit RateLimit

	// Observer, when not nil, is told the outcome of each resolution
	// (ObserveResolve, once per RPC) and of each Policy refusal
	// (ObserveDeny). An otelsourceip.Instrumentation puts the same span
	// attributes and counters on gRPC's server spans as on HTTP's. Nil
	// observes nothing.
	Observer middleware.Observer
}

// RateLimit configures the rate limit of an [Interceptor]. It is
// [ratelimit.HTTP]'s decision applied to RPCs.
type RateLimit struct {
	// Store holds the buckets: a *ratelimit.Limiter for one process, a
	// shared store (ratelimit/redisstore) for replicas. Nil: no limit.
	Store ratelimit.Store

	// Keyer turns the client into its bucket's key; the zero Keyer keys
	// IPv4 clients by address and IPv6 clients by /64 (6to4, Teredo and
	// NAT64 clients by the IPv4 address they carry).
	Keyer clientip.Keyer

	// Identity, when not nil, narrows each client's bucket to one per (key,
	// identity); method is the RPC's full method name. It must return an
	// identity the client cannot choose freely — a verified client
	// certificate, say, from the peer's credentials.TLSInfo — or a client
	// escapes its limit by minting identities. Nil: one bucket per key.
	Identity func(ctx context.Context, method string, res clientip.Result) string

	// RefuseMasqueraded refuses RPCs whose client resolved to a
	// masquerading node with PermissionDenied. When false (the default)
	// they are limited on the node's key, which every client behind that
	// node shares; see ratelimit.HTTPConfig.RefuseMasqueraded.
	RefuseMasqueraded bool
}

// Interceptor resolves the client of each RPC from the connection's layers
// and the forwarding metadata under one trust configuration, judges it with
// a [Policy], limits it, and hands the [clientip.Result] to the service in
// the RPC's context ([clientip.FromContext]). Install its Unary and Stream
// methods on a grpc.Server:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary), grpc.ChainStreamInterceptor(in.Stream))
//
// An RPC it refuses never reaches the handler and ends with a status whose
// message names the kind of refusal and never anything the client wrote:
//
//   - InvalidArgument: the chain cannot be read (a malformed or forged
//     forwarding entry behind a trusted proxy, a second single-address
//     value, every hop trusted, …), or the Policy refused the RPC because
//     of that (middleware.ErrUnresolved);
//   - PermissionDenied: the Policy refused the client (not allowed,
//     masqueraded, or an error of its own), or the rate limit refused a
//     masqueraded client (RateLimit.RefuseMasqueraded);
//   - ResourceExhausted: the rate limit refused the RPC; the status carries
//     a google.rpc.RetryInfo detail and the trailer [PushbackKey] with the
//     time until the client's bucket holds a token;
//   - Unavailable: the rate limit's Store could not decide.
//
// An Interceptor is safe for concurrent use.
type Interceptor struct {
	cfg   Config
	names headerCache
}

// New returns an Interceptor for cfg, or an error wrapping
// [ErrInvalidConfig] when cfg.Trust is missing, or a RateLimit Store is set
// whose Limit is invalid or with a Keyer whose prefix lengths are out of
// range.
func New(cfg Config) (*Interceptor, error) {
	if cfg.Trust == nil || cfg.Trust.Resolver() == nil {
		return nil, fmt.Errorf("%w: Trust is required", ErrInvalidConfig)
	}
	if s := cfg.RateLimit.Store; s != nil {
		if err := s.Limit().Valid(); err != nil {
			return nil, fmt.Errorf("%w: the RateLimit Store's limit: %w", ErrInvalidConfig, err)
		}
		if err := cfg.RateLimit.Keyer.Valid(); err != nil {
			return nil, fmt.Errorf("%w: RateLimit: %w", ErrInvalidConfig, err)
		}
	}
	return &Interceptor{cfg: cfg}, nil
}

// Resolve resolves the client of the RPC whose context is ctx, under the
// resolver the Trust returns now: the connection's layers as
// [TransportFromContext] reads them, then every value of the metadata key
// of the resolver's configured header, in the order they arrived, as that
// header's lines. No other metadata is read. It makes one allocation when
// that key is present (gRPC's copy of its values) and none otherwise,
// unless it fails.
func (in *Interceptor) Resolve(ctx context.Context) (clientip.Result, error) {
	return resolve(ctx, in.cfg.Trust.Resolver(), &in.names)
}

// Unary is a grpc.UnaryServerInterceptor: it resolves, judges and limits
// the RPC, and calls handler with a context carrying the Result, or
// returns the refusal's status without calling it. It allocates once for
// the context that carries the Result, and once more when the call carries
// the forwarding header's key (see Resolve); a rate limit in a
// *ratelimit.Limiter adds none for a client whose bucket it holds. An
// Observer's and a Policy's own allocations come on top.
func (in *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := in.admit(ctx, info.FullMethod, nil)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor: it resolves, judges and limits
// the stream once, before handler, and hands handler a stream whose
// Context carries the Result, or returns the refusal's status without
// calling it.
func (in *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := in.admit(ss.Context(), info.FullMethod, ss)
	if err != nil {
		return err
	}
	return handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
}

// serverStream is a stream whose Context is the interceptor's.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

// admit is the body of Unary and Stream: it returns the context to serve
// the RPC with, or the status to refuse it with. ss is the stream, for the
// trailer of a refusal; nil for a unary RPC.
func (in *Interceptor) admit(ctx context.Context, method string, ss grpc.ServerStream) (context.Context, error) {
	res, err := in.Resolve(ctx)
	resolved := err == nil || errors.Is(err, clientip.ErrMasqueraded)
	if resolved {
		ctx = clientip.NewContext(ctx, res)
	}
	if in.cfg.Observer != nil {
		in.cfg.Observer.ObserveResolve(ctx, res, err)
	}
	if p := in.cfg.Policy; p != nil {
		if perr := p.Check(method, res, err); perr != nil {
			if in.cfg.Observer != nil {
				in.cfg.Observer.ObserveDeny(ctx, res, perr)
			}
			return nil, policyStatus(perr)
		}
	} else if !resolved {
		return nil, unresolvedStatus(err)
	}
	if in.cfg.RateLimit.Store != nil {
		if err := in.limit(ctx, method, ss, res, err); err != nil {
			return nil, err
		}
	}
	return ctx, nil
}

// limit takes a token for the RPC from its client's bucket, or returns the
// status to refuse it with.
func (in *Interceptor) limit(ctx context.Context, method string, ss grpc.ServerStream, res clientip.Result, err error) error {
	rl := &in.cfg.RateLimit
	switch {
	case err == nil:
	case errors.Is(err, clientip.ErrMasqueraded):
		if rl.RefuseMasqueraded {
			return masqueradedStatus()
		}
	default:
		// A Policy admitted a client it cannot name; there is no bucket
		// to charge, and the proxy's would be everyone's.
		return unresolvedStatus(err)
	}
	k, ok := ratelimit.KeyFor(rl.Keyer, res.Client)
	if !ok {
		return unresolvedStatus(err)
	}
	if rl.Identity != nil {
		k.Identity = rl.Identity(ctx, method, res)
	}
	d, err := rl.Store.Take(ctx, k, time.Now(), 1, 0)
	switch {
	case err != nil:
		return unavailableStatus()
	case !d.Allowed:
		if ss != nil {
			ss.SetTrailer(pushback(d.RetryAfter))
		} else {
			grpc.SetTrailer(ctx, pushback(d.RetryAfter))
		}
		return limitedStatus(d)
	}
	return nil
}
