package grpcsourceip

import "github.com/sourceip/sourceip/clientip"

// Policy judges each RPC's client before the handler runs. Check is given
// the RPC's full method name ("/pkg.Service/Method") as target and the
// resolution — the Result and the error of [Interceptor.Resolve], which may
// be a failure — and returns nil to admit the RPC or an error to refuse it.
//
// The error decides the status code, tested with [errors.Is] against the
// middleware package's verdicts: middleware.ErrUnresolved (a chain that
// cannot be read), or one of clientip's resolution errors returned as it
// is, is codes.InvalidArgument; middleware.ErrNotAllowed,
// middleware.ErrMasqueraded (or clientip.ErrMasqueraded) and any other
// error are codes.PermissionDenied.
// The status message names the verdict, never the error's text, which may
// hold what a client wrote.
//
// A Policy sees resolution failures and decides about them: it must refuse
// them unless it means to admit clients it cannot name (a health check from
// a trusted hop, on its own method). A *middleware.Policy is a Policy: of
// middleware.TargetNames, its rules name full methods or method prefixes
// ("/pkg.Service/*"), the first that matches decides, and it refuses
// unresolved and masqueraded clients unless the rule admits them;
// middleware.NewSourceRanges is its one-rule allowlist.
//
// Implementations must be safe for concurrent use and should not block.
type Policy interface {
	Check(target string, res clientip.Result, err error) error
}

// PolicyFunc adapts a function to [Policy].
type PolicyFunc func(target string, res clientip.Result, err error) error

// Check calls f.
func (f PolicyFunc) Check(target string, res clientip.Result, err error) error {
	return f(target, res, err)
}
