package presets

import "errors"

// Errors reported by [New], [Preset.NewStore], [Preset.NewRefresher] and
// [Preset.Check], wrapped with %w and the context that names what failed
// (which field, which header). Test for them with [errors.Is]. No error
// quotes a value a request carried: a shared secret, or whatever a client
// sent in its place, never reaches a log through an error.
var (
	// ErrInvalidConfig is wrapped by errors from [New] and from the wiring
	// helpers: a missing platform or topology, ranges a platform needs but
	// did not get, a Front Door ID that is not a GUID, a weak shared
	// secret, or a configuration [clientip.New] refuses (wrapped too).
	ErrInvalidConfig = errors.New("presets: invalid configuration")

	// ErrUnknownPlatform is returned by [Platform.UnmarshalText] for a name
	// it does not know.
	ErrUnknownPlatform = errors.New("presets: unknown platform")

	// ErrNoSource is returned by [Preset.NewRefresher] for a preset whose
	// platform publishes no machine-readable range list (Akamai, Fly.io,
	// Google Cloud's load balancers, Cloud Run, Envoy) or, for Azure Front
	// Door, when no service-tags location was configured: there is nothing
	// to refresh, and the ranges in force are the ones the Config gave.
	ErrNoSource = errors.New("presets: no range source to refresh")

	// ErrEdgeIdentityMissing means a request lacks a header the edge adds
	// to every request it forwards: the Front Door ID (X-Azure-FDID) or the
	// configured shared-secret header. The request did not come through
	// your edge, or the edge is not configured to add it.
	ErrEdgeIdentityMissing = errors.New("presets: edge identity header missing")

	// ErrEdgeIdentityMismatch means a request carries the edge-identity
	// header with a value that is not one of the configured ones, or more
	// than once: another tenant's edge (every Front Door profile and every
	// Cloudflare zone connect from the same ranges), or a client that
	// reached the origin without the edge and guessed.
	ErrEdgeIdentityMismatch = errors.New("presets: edge identity header does not match")
)
