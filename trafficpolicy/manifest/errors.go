package manifest

import "errors"

// Errors reported by [Parse]. They are wrapped with context (which field,
// which document); test for them with [errors.Is].
var (
	// ErrInvalidService is wrapped by errors from [Parse] when the manifest
	// breaks one of the API server's Service rules (an unknown policy value,
	// healthCheckNodePort without type LoadBalancer and
	// externalTrafficPolicy Local, a malformed source range, …).
	ErrInvalidService = errors.New("manifest: invalid Service")

	// ErrNoService means the input holds no document of kind Service.
	ErrNoService = errors.New("manifest: no Service in manifest")

	// ErrManyServices means the input holds more than one Service; ask about
	// them one at a time.
	ErrManyServices = errors.New("manifest: more than one Service in manifest")

	// ErrMalformedManifest is wrapped by errors from [Parse] when a document
	// is not valid YAML or JSON, or a field has the wrong type.
	ErrMalformedManifest = errors.New("manifest: malformed manifest")
)
