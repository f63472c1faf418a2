package manifest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
)

// FuzzParse feeds Parse arbitrary bytes. It must not panic, an error must
// wrap one of the package's sentinels, and every piece splitDocuments cuts
// must hold at most one YAML document by the YAML library's own reading of
// the stream, since the converter reads only the first (a second Service
// after "--- !!map" was once dropped that way).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		gatewayManifest,
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: LoadBalancer, externalTrafficPolicy: Local}\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service"}]}`,
		"---\r\napiVersion: v1\r\nkind: Service\r\n--- # c\n...\n",
		"kind: Deployment\n--- !!map\nkind: Service\n--- {kind: Service}\n--- |\n  text\n",
		"a: &a [*a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse(data)
		if err != nil && !errors.Is(err, ErrInvalidService) && !errors.Is(err, ErrNoService) &&
			!errors.Is(err, ErrManyServices) && !errors.Is(err, ErrMalformedManifest) {
			t.Fatalf("Parse(%q): error %v wraps no sentinel", data, err)
		}
		for _, doc := range splitDocuments(data) {
			if n, ok := yamlDocuments(doc); ok && n > 1 {
				t.Fatalf("splitDocuments(%q): piece %q holds %d documents", data, doc, n)
			}
		}
	})
}

// yamlDocuments counts the documents in a YAML stream, and reports false
// when the stream is not valid YAML.
func yamlDocuments(doc []byte) (int, bool) {
	dec := yamlv2.NewDecoder(bytes.NewReader(doc))
	n := 0
	for {
		var v any
		switch err := dec.Decode(&v); {
		case err == io.EOF:
			return n, true
		case err != nil:
			return n, false
		}
		n++
	}
}
