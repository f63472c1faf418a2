package version

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormat(t *testing.T) {
	lib := func(version string, replace *debug.Module) []*debug.Module {
		return []*debug.Module{{Path: "github.com/pires/go-proxyproto", Version: "v0.15.0"}, {Path: Library, Version: version, Replace: replace}}
	}
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"released library command",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Library, Version: "v0.1.0"}},
			"v0.1.0, go1.26.8 linux/amd64"},
		{"pseudo-version stamped from a dirty checkout",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Library, Version: "v0.1.1-0.20261203070000-1b41743abcde+dirty"}},
			"v0.1.1-0.20261203070000-1b41743abcde+dirty, go1.26.8 linux/amd64"},
		{"(devel) with a VCS revision",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Library, Version: "(devel)"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "1b41743abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) revision 1b41743abcde modified, go1.26.8 linux/amd64"},
		{"(devel) without VCS information",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Library}},
			"(devel), go1.26.8 linux/amd64"},
		{"examples with the library replaced by the checkout",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Library + "/examples", Version: "(devel)"},
				Deps: lib("v0.0.0-00010101000000-000000000000", &debug.Module{Path: "../"})},
			"github.com/sourceip/sourceip/examples (devel), library github.com/sourceip/sourceip (devel) replaced by ../, go1.26.8 linux/amd64"},
		{"examples with a released library",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Library + "/examples", Version: "v0.1.0"}, Deps: lib("v0.1.0", nil)},
			"github.com/sourceip/sourceip/examples v0.1.0, library github.com/sourceip/sourceip v0.1.0, go1.26.8 linux/amd64"},
		{"library replaced by a fork",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "v1.0.0"},
				Deps: lib("v0.1.0", &debug.Module{Path: "example.com/fork", Version: "v0.1.1"})},
			"example.com/app v1.0.0, library github.com/sourceip/sourceip v0.1.0 replaced by example.com/fork v0.1.1, go1.26.8 linux/amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, format(&tt.bi, "linux/amd64"))
		})
	}
}

// TestString: a test binary has build information; its main module is the
// library.
func TestString(t *testing.T) {
	s := String()
	assert.True(t, strings.HasPrefix(s, "(devel)") || strings.HasPrefix(s, "v"), s)
	assert.Contains(t, s, ", go1.")
}

// TestModule: the version an instrumentation scope reports (a newcomer's
// finding: the gateway's metrics said otel_scope_version="v0.0.0-00010101000000-000000000000",
// the placeholder the examples module requires the library at before
// replacing it with the checkout).
func TestModule(t *testing.T) {
	const examples = Library + "/examples"
	bi := func(main debug.Module, deps ...*debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: main, Deps: deps}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		path string
		want string
	}{
		{"library replaced by the checkout", bi(debug.Module{Path: examples, Version: "(devel)"},
			&debug.Module{Path: Library, Version: zeroPseudo, Replace: &debug.Module{Path: "../", Version: "(devel)"}}), Library, "(devel)"},
		{"library replaced by a directory without a version", bi(debug.Module{Path: examples},
			&debug.Module{Path: Library, Version: "v0.1.0", Replace: &debug.Module{Path: "../"}}), Library, "(devel)"},
		{"released library", bi(debug.Module{Path: "example.com/app", Version: "v1.0.0"},
			&debug.Module{Path: Library, Version: "v0.1.0"}), Library, "v0.1.0"},
		{"library replaced by a fork", bi(debug.Module{Path: "example.com/app"},
			&debug.Module{Path: Library, Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.1.1"}}), Library, "v0.1.1"},
		{"zero pseudo-version without a replacement", bi(debug.Module{Path: "example.com/app"},
			&debug.Module{Path: Library, Version: zeroPseudo}), Library, "(devel)"},
		{"main module from a checkout", bi(debug.Module{Path: examples, Version: "(devel)"}), examples, "(devel)"},
		{"main module without a version", bi(debug.Module{Path: examples}), examples, "(devel)"},
		{"main module stamped from its VCS", bi(debug.Module{Path: examples, Version: "v0.1.1-0.20261203070000-1b41743abcde+dirty"}),
			examples, "v0.1.1-0.20261203070000-1b41743abcde+dirty"},
		{"released main module", bi(debug.Module{Path: Library, Version: "v0.2.0"}), Library, "v0.2.0"},
		{"module not in the program", bi(debug.Module{Path: "example.com/app", Version: "v1.0.0"}), Library, "(devel)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, moduleVersion(tt.bi, tt.path))
		})
	}
	got := Module(Library) // a test binary's main module is the library
	assert.NotEmpty(t, got)
	assert.NotEqual(t, zeroPseudo, got)
}
