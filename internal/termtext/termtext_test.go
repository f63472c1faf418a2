package termtext

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLine(t *testing.T) {
	for _, s := range []string{"", "198.51.100.7", "tab\there", "é ü 中文", "\uFFFD stands for a stray byte"} {
		assert.True(t, Line(s), "%q", s)
	}
	for _, s := range []string{
		"\x1b[2J", "\a", "\r", "line\nfeed", "DEL \x7f", "C1 \u009b2J", "stray \x9b", "bidi \u202eevil",
		"isolate \u2066", "zero width \u200b", "BOM \ufeff", "tag \U000E0001", "separator \u2028", "soft\u00adhyphen",
	} {
		assert.False(t, Line(s), "%q", s)
	}
}
