package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bareSkipAllowed are the conditions under which a test of this repository
// may skip without [Unavailable]: they are about how the tests were run
// (-short, the race detector), not about a real part missing here.
var bareSkipAllowed = map[string]bool{
	"testing.Short()": true,
	"raceEnabled":     true,
}

// TestEverySkipGoesThroughUnavailable: every test of every module of the
// repository that skips does so through [Unavailable] (directly or through
// Require, RequireRoot, NewNetns, StartHAProxy, StartNginx, StartRedis), so
// that SOURCEIP_E2E=require makes it fail and scripts/test lists it. A bare
// Skip, Skipf or SkipNow is allowed only in the body of an if on one of
// bareSkipAllowed's conditions (the project charter: a test that needs a
// real part fails instead of skipping when SOURCEIP_E2E=require is set).
func TestEverySkipGoesThroughUnavailable(t *testing.T) {
	_, self, _, ok := runtime.Caller(0)
	require.True(t, ok)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	unavailable := filepath.Join(filepath.Dir(self), "e2e.go")
	fset := token.NewFileSet()
	var bare []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || path == unavailable {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if !importsTesting(f) {
			return nil
		}
		files++
		for _, call := range bareSkips(f) {
			bare = append(bare, fset.Position(call.Pos()).String())
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 50, "the walk found the repository's tests")
	assert.Empty(t, bare, "skips that SOURCEIP_E2E=require cannot turn into failures: call e2e.Unavailable (or Require, RequireRoot) instead")
}

func importsTesting(f *ast.File) bool {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"testing"` {
			return true
		}
	}
	return false
}

// bareSkips returns the calls of a method named Skip, Skipf or SkipNow in f
// that are not in the body of an if on an allowed condition.
func bareSkips(f *ast.File) []*ast.CallExpr {
	var calls []*ast.CallExpr
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			if bareSkipAllowed[types.ExprString(n.Cond)] {
				for _, c := range []ast.Node{n.Init, n.Else} {
					if c != nil {
						ast.Inspect(c, visit)
					}
				}
				return false
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Skip", "Skipf", "SkipNow":
					calls = append(calls, n)
				}
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return calls
}

// TestBareSkips: the check above finds a bare skip, also in a closure and
// in the else branch of an allowed if, and lets the allowed ones pass.
func TestBareSkips(t *testing.T) {
	const src = `package p

import "testing"

func TestA(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if raceEnabled {
		t.Skip("race")
	} else if missing() {
		t.Skipf("no %s", "haproxy")
	}
	t.Run("x", func(t *testing.T) { t.SkipNow() })
	if missing() {
		t.Skip("missing")
	}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p_test.go", src, 0)
	require.NoError(t, err)
	var lines []int
	for _, c := range bareSkips(f) {
		lines = append(lines, fset.Position(c.Pos()).Line)
	}
	assert.Equal(t, []int{12, 14, 16}, lines)
}
