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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
				require.NoError(t, err)
				rows = s.Matrix()
			}
			var b bytes.Buffer
			require.NoError(t, RenderMatrix(&b, rows))
			path := filepath.Join("testdata", tt.file)
			if *update {
				require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test -update to create it")
			assert.Equal(t, string(want), b.String(), "%s differs (go test -update rewrites it)", tt.file)
		})
	}
}

func TestRenderMatrixShape(t *testing.T) {
	var b bytes.Buffer
	rows := trafficpolicy.FullMatrix()
	require.NoError(t, RenderMatrix(&b, rows))
	lines := strings.Split(b.String(), "\n")
	cols := strings.Count(lines[0], "|")
	for i, l := range lines[:len(rows)+2] {
		require.Equal(t, cols, strings.Count(l, "|"), "line %d has as many cell separators as the header: %q", i+1, l)
	}
	for _, e := range rows {
		assert.Equal(t, trafficpolicy.Delivered, e.Outcome, "FullMatrix row %v; rows assume a local endpoint on an exposed path", e.Case)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestRenderMatrixWriteError(t *testing.T) {
	require.Error(t, RenderMatrix(failWriter{}, trafficpolicy.FullMatrix()), "RenderMatrix hid a write error")
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
