package netns

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The sweep deletes only namespaces of the lab's scheme: another program's
// namespaces, even with a similar name, never match.
func TestNameScheme(t *testing.T) {
	for _, tag := range []string{"", "i", "n", "k"} {
		name := Prefix(os.Getpid(), tag) + "n1"
		m := nsNameRE.FindStringSubmatch(name)
		if assert.NotNil(t, m, name) {
			assert.Equal(t, name[4:4+len(m[1])], m[1])
		}
	}
	for _, name := range []string{"plab", "plab-n1", "plabx1-n1", "plab12ab-n1", "plab12-N1", "xplab12-n1", "plab12-n1 x", "cni-1234"} {
		assert.Nil(t, nsNameRE.FindStringSubmatch(name), name)
	}
}
