package manifest

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/trafficpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

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
			rows := trafficpolicy.FullMatrix()
			if tt.manifest != "" {
				s, err := Parse([]byte(tt.manifest))
				if err != nil {
					t.Fatal(err)
				}
				rows = s.Matrix()
			}
			var b bytes.Buffer
			if err := RenderMatrix(&b, rows); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.file)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs (go test -update rewrites it):\n got:\n%s\nwant:\n%s", tt.file, b.Bytes(), want)
			}
		})
	}
}

func TestRenderMatrixShape(t *testing.T) {
	var b bytes.Buffer
	rows := trafficpolicy.FullMatrix()
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
		if e.Outcome != trafficpolicy.Delivered {
			t.Errorf("FullMatrix row %v is %v; rows assume a local endpoint on an exposed path", e.Case, e.Outcome)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestRenderMatrixWriteError(t *testing.T) {
	if err := RenderMatrix(failWriter{}, trafficpolicy.FullMatrix()); err == nil {
		t.Fatal("RenderMatrix hid a write error")
	}
}

func BenchmarkParse(b *testing.B) {
	data := []byte(gatewayManifest)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderFullMatrix(b *testing.B) {
	rows := trafficpolicy.FullMatrix()
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderMatrix(io.Discard, rows); err != nil {
			b.Fatal(err)
		}
	}
}
