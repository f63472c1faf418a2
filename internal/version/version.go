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

// depVersion is a dependency's version and replacement. A module required
// only to be replaced by a directory carries the zero pseudo-version, which
// says nothing: it reads "(devel)".
func depVersion(d *debug.Module) string {
	v := d.Version
	if v == "" || v == "v0.0.0-00010101000000-000000000000" {
		v = "(devel)"
	}
	if r := d.Replace; r != nil {
		v += " replaced by " + r.Path
		if r.Version != "" {
			v += " " + r.Version
		}
	}
	return v
}
