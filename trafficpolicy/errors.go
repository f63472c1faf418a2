package trafficpolicy

import "errors"

// Errors reported by this package. They are wrapped with context (which field,
// which document, which target); test for them with [errors.Is].
var (
	// ErrMissingAddresses means an [Expectation] needs an address set the
	// [Network] does not have (for example the load balancers' addresses for a
	// PROXY-protocol load balancer), so no safe clientip configuration can be
	// built.
	ErrMissingAddresses = errors.New("trafficpolicy: address set needed for the clientip configuration is empty")

	// ErrUnknownValue is wrapped by UnmarshalText of this package's enums
	// for a spelling they do not know.
	ErrUnknownValue = errors.New("trafficpolicy: unknown value")

	// ErrInvalidConfig is wrapped by errors from [NewHealthServer] and
	// [NewProber].
	ErrInvalidConfig = errors.New("trafficpolicy: invalid configuration")

	// ErrUnknownTarget means [Prober.ObserveAt] was given a target the prober
	// was not configured with.
	ErrUnknownTarget = errors.New("trafficpolicy: unknown probe target")
)
