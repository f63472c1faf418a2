package gateway

import "github.com/sourceip/sourceip/middleware"

// Why the gateway refuses a client at CONNECT beyond the allowlist. Each
// is a policy refusal: it wraps middleware.ErrNotAllowed, so that the
// connection's line says "decision":"not_allowed" and the metrics count it
// as one, and its text says which rule refused the client.
var (
	// ErrDirectClient: Config.RequireProxy is set and the client reached
	// the gateway directly, not through a trusted load balancer or proxy.
	ErrDirectClient error = &policyError{"gateway: the client connected directly, not through a trusted load balancer"}
)

// policyError is a refusal by one of the gateway's own rules.
type policyError struct{ msg string }

func (e *policyError) Error() string { return e.msg }

// Unwrap returns middleware.ErrNotAllowed.
func (e *policyError) Unwrap() error { return middleware.ErrNotAllowed }
