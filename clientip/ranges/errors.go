package ranges

import "errors"

// Errors reported by the parsers, [NewSource], [NewRefresher] and the
// [Refresher]'s methods, wrapped with %w and the context that names what
// failed (which document, which line or entry, which prefix). Test for them
// with [errors.Is].
var (
	// ErrInvalidConfig is wrapped by errors from [NewSource] and
	// [NewRefresher], and by a parser given an unusable filter.
	ErrInvalidConfig = errors.New("ranges: invalid configuration")

	// ErrUnknownProvider is returned by [Provider.UnmarshalText] for a name it
	// does not know.
	ErrUnknownProvider = errors.New("ranges: unknown provider")

	// ErrTooLarge means a document is larger than the limit of its format or
	// the refresher's MaxBytes, or selects more than [MaxPrefixes]
	// prefixes. Nothing of it is used.
	ErrTooLarge = errors.New("ranges: document too large")

	// ErrMalformed means a document is not in its provider's format: not
	// JSON, the wrong JSON shape, a missing required field, an HTML error
	// page in place of a list, text that is not UTF-8, two entries on a line.
	ErrMalformed = errors.New("ranges: malformed document")

	// ErrInvalidPrefix means an entry of a document is not a canonical CIDR
	// prefix of the expected family: garbage, a zone, a prefix length out of
	// range, host bits set (10.0.0.1/8), an IPv4 prefix in an IPv6 field.
	ErrInvalidPrefix = errors.New("ranges: invalid prefix")

	// ErrEmpty means a document (after filtering) holds no prefix. A
	// provider never publishes an empty list; an empty answer is an outage or
	// a filter that names nothing (a misspelt service, region or tag).
	ErrEmpty = errors.New("ranges: no prefixes")

	// ErrTagNotFound means an Azure service-tags document has no value with
	// the requested tag name.
	ErrTagNotFound = errors.New("ranges: service tag not found")

	// ErrAllAddresses means a set holds 0.0.0.0/0 or ::/0, or the whole of
	// an IPv6 prefix whose addresses stand for every IPv4 host: NAT64's
	// 64:ff9b::/96 or 64:ff9b:1::/48, 6to4's 2002::/16, Teredo's 2001::/32
	// (see [CheckSet]). Trusting it would trust every client, or every IPv4
	// client through a translator or tunnel, as a proxy, so it is never
	// accepted.
	ErrAllAddresses = errors.New("ranges: prefix covers every address")

	// ErrTooBroad means a set holds an IPv4 prefix shorter than /8 or an IPv6
	// prefix shorter than /16 — a split 0.0.0.0/0 (0.0.0.0/1 and 128.0.0.0/1)
	// or a wrong list; no provider publishes such a block — or a part of an
	// IPv4-embedding prefix (NAT64, 6to4, Teredo) that stands for more IPv4
	// hosts than a /8 ([CheckSet]).
	ErrTooBroad = errors.New("ranges: prefix too broad")

	// ErrPrivate means a set overlaps loopback, private (RFC 1918, fc00::/7),
	// link-local or CGNAT (100.64.0.0/10) space and the refresher's
	// AllowPrivate is false. A public edge's list never holds such space; a
	// list that does would make internal hosts trusted proxies.
	ErrPrivate = errors.New("ranges: private or local address space")

	// ErrReserved means a set overlaps space no proxy can connect from:
	// 0.0.0.0/8, multicast (224.0.0.0/4, ff00::/8), 240.0.0.0/4 or ::/128.
	ErrReserved = errors.New("ranges: reserved address space")

	// ErrShrink means a fetched set drops more of the current set than
	// RefresherConfig.MaxShrink allows. The current set stays; the refused
	// set waits for [Refresher.AcceptPending].
	ErrShrink = errors.New("ranges: set shrank more than allowed")

	// ErrGrowth means a fetched set adds more to the current set than
	// RefresherConfig.MaxGrowth allows. The current set stays; the refused
	// set waits for [Refresher.AcceptPending].
	ErrGrowth = errors.New("ranges: set grew more than allowed")

	// ErrDrift means a fetched set, though within MaxGrowth of the current
	// set, adds more to the baseline (the set last accepted by a person,
	// else the snapshot or the first set) than
	// RefresherConfig.MaxTotalGrowth allows: a feed growing step by step.
	// The current set stays; the refused set waits for
	// [Refresher.AcceptPending], which makes it the baseline.
	ErrDrift = errors.New("ranges: set grew too far from its baseline")

	// ErrNoPending is returned by [Refresher.AcceptPending] when no refused
	// set is waiting.
	ErrNoPending = errors.New("ranges: no pending set")

	// ErrUpdateRefused means RefresherConfig.OnUpdate returned an error for a
	// new set, so the refresher kept the current one. The hook's error is
	// wrapped too.
	ErrUpdateRefused = errors.New("ranges: update refused by OnUpdate")

	// ErrHTTPStatus means a server answered with a status other than 200 or
	// (to a conditional request) 304.
	ErrHTTPStatus = errors.New("ranges: unexpected HTTP status")

	// ErrRedirect means a server redirected an https request to a non-https
	// location, which a network attacker could then answer.
	ErrRedirect = errors.New("ranges: insecure redirect refused")

	// ErrCache means the refresher's last-good copy on disk could not be
	// read or written, or belongs to another source. The refresher carries
	// on without it.
	ErrCache = errors.New("ranges: unusable cache file")

	// ErrNoData means a refresher has no set at all: no snapshot covers its
	// source, no disk copy was usable and no fetch has succeeded yet.
	ErrNoData = errors.New("ranges: no range data")

	// ErrStale means the current set was last confirmed longer ago than the
	// age a health check allows. The refresher keeps serving it.
	ErrStale = errors.New("ranges: range data is stale")
)
