package ranges

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sourceip/sourceip/internal/enumtext"
)

// Provenance says where a refresher's current set came from.
type Provenance uint8

const (
	// ProvenanceNone: the refresher has no set (no snapshot covers its
	// source, no disk copy, no successful fetch yet). Its Current is empty,
	// so it trusts nothing.
	ProvenanceNone Provenance = iota
	// ProvenanceSnapshot: the set embedded in the package ([Snapshot]).
	ProvenanceSnapshot
	// ProvenanceDisk: the last-good copy the refresher wrote to its
	// CacheFile.
	ProvenanceDisk
	// ProvenanceNetwork: fetched from the source's locations (or confirmed
	// by them with 304 Not Modified) since the refresher started.
	ProvenanceNetwork
)

var provenanceNames = [...]string{
	ProvenanceNone:     "none",
	ProvenanceSnapshot: "snapshot",
	ProvenanceDisk:     "disk",
	ProvenanceNetwork:  "network",
}

// String returns "none", "snapshot", "disk" or "network".
func (p Provenance) String() string { return enumtext.String(provenanceNames[:], p, "Provenance") }

// MarshalText implements [encoding.TextMarshaler] with the names String
// returns.
func (p Provenance) MarshalText() ([]byte, error) {
	return enumtext.Marshal(provenanceNames[:], p, "Provenance", errUnknownProvenance)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String
// returns.
func (p *Provenance) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(p, provenanceNames[:], text, "Provenance", errUnknownProvenance)
}

var errUnknownProvenance = errors.New("ranges: unknown provenance")

// Status is a refresher's state at one moment: what it serves, how old that
// is, and how its refreshes have gone. Its counters only grow; exporters
// (such as otelsourceip) turn them into metrics.
type Status struct {
	// Source identifies the source ([Source.String]).
	Source string
	// Provenance says where the current set came from.
	Provenance Provenance
	// Prefixes is the number of prefixes in the current set.
	Prefixes int
	// Confirmed is when the current set was last known to be the
	// provider's list: the snapshot's Date, the disk copy's last
	// confirmation, or the last fetch that returned it or 304 Not Modified.
	Confirmed time.Time
	// Age is the time since Confirmed (never negative), as of the status.
	Age time.Duration

	// LastAttempt is when the last refresh started, LastSuccess when one
	// last fetched or confirmed an acceptable set. Zero until then.
	LastAttempt, LastSuccess time.Time
	// LastError is the last refresh's error (nil if it succeeded) and
	// LastErrorTime when the last error happened. A refusal by a guard or by
	// OnUpdate counts as an error.
	LastError     error
	LastErrorTime time.Time
	// ConsecutiveFailures counts the refreshes that failed since the last
	// success.
	ConsecutiveFailures int
	// NextRefresh is when Run will refresh next; zero before Run's first
	// refresh.
	NextRefresh time.Time

	// Pending is the number of prefixes of a set the shrink, growth or
	// total growth guard refused and that [Refresher.AcceptPending] would
	// install; 0 if none. PendingChange says how it differs from the current
	// set.
	Pending       int
	PendingChange Change

	// Drift says how the current set differs from the baseline that
	// RefresherConfig.MaxTotalGrowth measures from: its Growth approaches
	// MaxTotalGrowth as a feed grows, which is worth an alert before the
	// guard holds a set.
	Drift Change

	// CacheError is the last error reading or writing the disk copy, nil
	// if none.
	CacheError error

	// Counters since the refresher was created.
	Attempts   uint64 // refreshes started
	Updates    uint64 // new sets installed
	Unchanged  uint64 // fetches that returned the current set or 304 Not Modified
	Failures   uint64 // refreshes that failed to fetch or parse
	Rejections uint64 // sets refused by a guard or by OnUpdate
}

// LogValue implements [slog.LogValuer] with the status's main fields.
func (s Status) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("source", s.Source),
		slog.String("provenance", s.Provenance.String()),
		slog.Int("prefixes", s.Prefixes),
		slog.Duration("age", s.Age),
	}
	if !s.LastSuccess.IsZero() {
		attrs = append(attrs, slog.Time("last_success", s.LastSuccess))
	}
	if s.LastError != nil {
		attrs = append(attrs, slog.String("last_error", s.LastError.Error()))
	}
	if s.Drift != (Change{}) {
		attrs = append(attrs, slog.String("drift", s.Drift.String()))
	}
	if s.Pending > 0 {
		attrs = append(attrs, slog.Int("pending", s.Pending), slog.String("pending_change", s.PendingChange.String()))
	}
	return slog.GroupValue(attrs...)
}
