package trafficpolicy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestRenderMatrixGolden(t *testing.T) {
	tests := []struct {
		file     string
		manifest string // "" renders FullMatrix
	}{
		{"matrix_full.md", ""},
		{"matrix_gateway.md", gatewayManifest},
		{"matrix_internal_local.md", "apiVersion: v1\nkind: Service\nmetadata: {name: node-cache}\nspec:\n  internalTrafficPolicy: Local\n  ports: [{port: 53, protocol: UDP}]\n"},
		{"matrix_lb_unknown.md", "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  type: LoadBalancer\n  trafficDistribution: PreferSameNode\n  ports: [{port: 443}]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rows := FullMatrix()
			if tt.manifest != "" {
				s, err := ParseService([]byte(tt.manifest))
				if err != nil {
					t.Fatal(err)
				}
				rows = s.Matrix()
			}
			var b bytes.Buffer
			if err := RenderMatrix(&b, rows); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.file, b.Bytes())
		})
	}
}

func TestRenderMatrixShape(t *testing.T) {
	var b bytes.Buffer
	rows := FullMatrix()
	if err := RenderMatrix(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	cols := strings.Count(lines[0], "|")
	for i, l := range lines[:len(rows)+2] {
		if strings.Count(l, "|") != cols {
			t.Fatalf("line %d has %d cell separators, the header %d: %q", i+1, strings.Count(l, "|"), cols, l)
		}
	}
	for _, e := range rows {
		if e.Outcome != Delivered {
			t.Errorf("FullMatrix row %v is %v; rows assume a local endpoint on an exposed path", e.Case, e.Outcome)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestRenderMatrixWriteError(t *testing.T) {
	if err := RenderMatrix(failWriter{}, FullMatrix()); err == nil {
		t.Fatal("RenderMatrix hid a write error")
	}
}
