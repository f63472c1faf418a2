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

// A run's own namespaces are those that carry exactly its pid: the lab
// test's final check once took "plab12" as the prefix of pid 12's names and
// deleted "plab123i-…", the namespaces of another run going at once.
func TestOfPidIsExact(t *testing.T) {
	all := map[string]int{"plab12i-lb": 12, "plab12-n1": 12, "plab123i-lb": 123, "plab1n-sw": 1, "plab120k-iptables": 120}
	assert.Equal(t, []string{"plab12-n1", "plab12i-lb"}, ofPid(all, 12))
	assert.Equal(t, []string{"plab123i-lb"}, ofPid(all, 123))
	assert.Empty(t, ofPid(all, 2))
}
