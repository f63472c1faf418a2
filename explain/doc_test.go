package explain

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonNames returns the JSON field names of t and of the structs it holds.
func jsonNames(t reflect.Type, seen map[reflect.Type]bool, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != reflect.TypeFor[Report]().PkgPath() {
		return
	}
	seen[t] = true
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = true
		jsonNames(f.Type, seen, out)
	}
}

// The package documentation lists every field of the two JSON documents.
func TestDocListsEveryField(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	names := map[string]bool{}
	seen := map[reflect.Type]bool{}
	jsonNames(reflect.TypeFor[Report](), seen, names)
	jsonNames(reflect.TypeFor[Advice](), seen, names)
	require.NotEmpty(t, names)
	for name := range names {
		assert.Regexp(t, regexp.MustCompile(`\b`+name+`\b`), string(doc), "doc.go does not list the field %q", name)
	}
}
