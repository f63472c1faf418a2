// Package version says which code a program of this repository runs, from
// the build information the Go toolchain embeds (module versions, VCS
// revision), for the programs' -version flags.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Library is the library's module path.
const Library = "github.com/sourceip/sourceip"

// String returns the running program's version in one line: its module's
// version (with the module path unless it is the library's), the library's
// version when the library is a dependency, and the Go toolchain and
// platform, for example
//
//	v0.1.0, go1.26.8 linux/amd64
//	github.com/sourceip/sourceip/examples (devel), library github.com/sourceip/sourceip (devel) replaced by ../, go1.26.8 linux/amd64
//
// A module built from a checkout reads "(devel)", or, when the toolchain
// stamped it, the pseudo-version it derives from the VCS revision
// ("+dirty" for uncommitted changes); a module fetched with
// go install …@v0.1.0 reads v0.1.0.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information), " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	return format(bi, runtime.GOOS+"/"+runtime.GOARCH)
}

func format(bi *debug.BuildInfo, platform string) string {
	var b strings.Builder
	if bi.Main.Path != Library {
		b.WriteString(bi.Main.Path + " ")
	}
	b.WriteString(mainVersion(bi))
	if bi.Main.Path != Library {
		for _, d := range bi.Deps {
			if d.Path == Library {
				b.WriteString(", library " + Library + " " + depVersion(d))
			}
		}
	}
	b.WriteString(", " + bi.GoVersion + " " + platform)
	return b.String()
}

// mainVersion is the main module's version, with the VCS revision when the
// version says only "(devel)".
func mainVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	if v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return v
	}
	v += " revision " + rev[:min(12, len(rev))]
	if modified == "true" {
		v += " modified"
	}
	return v
}

// Module returns the version of the module at path in the running program:
// its version when it is the main module or a dependency required at a
// version, the replacement's version when it is replaced by another
// module, and "(devel)" when that says nothing: a main module built from a
// checkout without a stamped version, a dependency replaced by a directory
// (whose required version is the zero pseudo-version
// v0.0.0-00010101000000-000000000000, or a placeholder), a module the
// program does not contain, or a program without build information. It is
// meant for OpenTelemetry instrumentation scopes, which should name the code
// that recorded a metric, or say honestly that the version is unknown.
func Module(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return devel
	}
	return moduleVersion(bi, path)
}

const devel = "(devel)"

func moduleVersion(bi *debug.BuildInfo, path string) string {
	if bi.Main.Path == path {
		if bi.Main.Version == "" {
			return devel
		}
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		if r := d.Replace; r != nil {
			if r.Version == "" || r.Version == devel { // a directory
				return devel
			}
			return r.Version
		}
		if d.Version == "" || d.Version == zeroPseudo {
			return devel
		}
		return d.Version
	}
	return devel
}

// zeroPseudo is the version a go.mod requires a module at when it is only
// there to be replaced by a directory.
const zeroPseudo = "v0.0.0-00010101000000-000000000000"

// depVersion is a dependency's version and replacement. A module required
// only to be replaced by a directory carries the zero pseudo-version, which
// says nothing: it reads "(devel)".
func depVersion(d *debug.Module) string {
	v := d.Version
	if v == "" || v == zeroPseudo {
		v = devel
	}
	if r := d.Replace; r != nil {
		v += " replaced by " + r.Path
		if r.Version != "" {
			v += " " + r.Version
		}
	}
	return v
}
