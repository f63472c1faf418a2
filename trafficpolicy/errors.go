package trafficpolicy

import "errors"

// Errors reported by this package. They are wrapped with context (which field,
// which document, which target); test for them with [errors.Is].
var (
	// ErrInvalidService is wrapped by errors from [ParseService] when the
	// manifest breaks one of the API server's Service rules (an unknown
	// policy value, healthCheckNodePort without type LoadBalancer and
	// externalTrafficPolicy Local, a malformed source range, …).
	ErrInvalidService = errors.New("trafficpolicy: invalid Service")

	// ErrNoService means the input holds no document of kind Service.
	ErrNoService = errors.New("trafficpolicy: no Service in manifest")

	// ErrManyServices means the input holds more than one Service; ask about
	// them one at a time.
	ErrManyServices = errors.New("trafficpolicy: more than one Service in manifest")

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

// ErrMalformedManifest is wrapped by errors from [ParseService] when a
// document is not valid YAML or JSON, or a field has the wrong type.
var ErrMalformedManifest = errors.New("trafficpolicy: malformed manifest")
