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
