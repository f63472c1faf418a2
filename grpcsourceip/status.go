package grpcsourceip

import (
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/ratelimit"
)

// PushbackKey is the trailer gRPC clients read as a server's retry
// pushback (gRFC A6): the milliseconds to wait before retrying, which a
// client whose retry policy covers RESOURCE_EXHAUSTED honours. A refusal of
// the rate limit carries it beside its RetryInfo detail.
const PushbackKey = "grpc-retry-pushback-ms"

// Status messages. They name a verdict or a clientip.Reason, never anything
// a client wrote.
const (
	msgUnresolved  = "cannot determine the client address: "
	msgRefused     = "client address refused: "
	msgLimited     = "rate limit exceeded"
	msgUnavailable = "rate limiter unavailable"
)

// unresolvedStatus is the status of an RPC whose chain cannot be read:
// InvalidArgument, naming the kind of failure ("malformed", "all_trusted",
// …) from the error's clientip.Reason.
func unresolvedStatus(err error) error {
	name := clientip.ReasonOf(err).String()
	if clientip.ReasonOf(err) == clientip.ReasonNone {
		name = middleware.OutcomeUnresolved.String()
	}
	return status.Error(codes.InvalidArgument, msgUnresolved+name)
}

// policyStatus is the status of an RPC a [Policy] refused with err: a
// refusal because the client cannot be named is InvalidArgument, like an
// unresolvable chain without a policy; every other refusal, the policy's
// own errors included, is PermissionDenied, naming the verdict.
func policyStatus(err error) error {
	switch {
	case errors.Is(err, middleware.ErrNotAllowed), errors.Is(err, clientip.ErrMasqueraded):
	case errors.Is(err, middleware.ErrUnresolved), errors.Is(err, middleware.ErrNoResult),
		clientip.ReasonOf(err) != clientip.ReasonNone:
		return unresolvedStatus(err)
	}
	return status.Error(codes.PermissionDenied, msgRefused+middleware.OutcomeOf(err).String())
}

// masqueradedStatus is the status of an RPC the rate limit refuses because
// its client is a masquerading node (RateLimit.RefuseMasqueraded).
func masqueradedStatus() error {
	return status.Error(codes.PermissionDenied, msgRefused+middleware.OutcomeMasqueraded.String())
}

// limitedStatus is the status of an RPC the rate limit refused:
// ResourceExhausted with a google.rpc.RetryInfo detail saying when the
// client's bucket holds a token again.
func limitedStatus(d ratelimit.Decision) error {
	st, err := status.New(codes.ResourceExhausted, msgLimited).
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)})
	if err != nil { // cannot happen: RetryInfo always marshals
		return status.Error(codes.ResourceExhausted, msgLimited)
	}
	return st.Err()
}

// pushback returns the trailer of a refusal with retry delay d: PushbackKey
// with d in whole milliseconds, rounded up.
func pushback(d time.Duration) metadata.MD {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return metadata.Pairs(PushbackKey, strconv.FormatInt(int64(ms), 10))
}

// unavailableStatus is the status of an RPC the rate limit's Store could
// not decide (a shared store failing closed during an outage).
func unavailableStatus() error {
	return status.Error(codes.Unavailable, msgUnavailable)
}
