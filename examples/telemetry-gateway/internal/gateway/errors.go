package gateway

import "github.com/sourceip/sourceip/middleware"

// Why the gateway refuses a client at CONNECT beyond the allowlist. Each
// is a policy refusal: it wraps middleware.ErrNotAllowed, so that the
// connection's line says "decision":"not_allowed" and the metrics count it
// as one, and its text says which rule refused the client.
var (
	// ErrDirectClient: Config.RequireProxy is set and the client reached
	// the gateway directly, not through a trusted load balancer or proxy.
	ErrDirectClient error = &policyError{msg: "gateway: the client connected directly, not through a trusted load balancer"}

	// ErrNoVerifiedCert: with Config.LBTLS, the load balancer did not report
	// a client certificate it verified (or the certificate it forwarded
	// does not verify against the gateway's CA). The error the gateway
	// returns wraps it and chain's reason.
	ErrNoVerifiedCert error = &policyError{msg: "gateway: no client certificate verified at the load balancer"}
)

// policyError is a refusal by one of the gateway's own rules, with its
// cause when there is one.
type policyError struct {
	msg   string
	cause error
}

func (e *policyError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

// Is reports whether target is the sentinel e was made from.
func (e *policyError) Is(target error) bool {
	t, ok := target.(*policyError)
	return ok && t.cause == nil && t.msg == e.msg
}

// Unwrap returns middleware.ErrNotAllowed and the cause.
func (e *policyError) Unwrap() []error {
	if e.cause != nil {
		return []error{middleware.ErrNotAllowed, e.cause}
	}
	return []error{middleware.ErrNotAllowed}
}

// because returns sentinel's refusal with its cause.
func because(sentinel error, cause error) error {
	return &policyError{msg: sentinel.(*policyError).msg, cause: cause}
}
