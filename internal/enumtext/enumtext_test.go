package enumtext

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type color uint8

var colorNames = []string{"red", "green", "blue"}

var errUnknown = errors.New("test: unknown name")

func TestRoundTrip(t *testing.T) {
	for c := range color(len(colorNames)) {
		b, err := Marshal(colorNames, c, "color", errUnknown)
		require.NoError(t, err)
		assert.Equal(t, String(colorNames, c, "color"), string(b))
		back, err := Parse[color](colorNames, b, "color", errUnknown)
		require.NoError(t, err)
		assert.Equal(t, c, back)
	}
}

func TestUnknownValue(t *testing.T) {
	assert.Equal(t, "color(3)", String(colorNames, color(3), "color"))
	assert.Equal(t, "color(255)", String(colorNames, color(255), "color"))

	_, err := Marshal(colorNames, color(3), "color", errUnknown)
	require.ErrorIs(t, err, errUnknown)
	assert.EqualError(t, err, "test: unknown name: color(3)")
}

func TestUnknownName(t *testing.T) {
	for _, text := range []string{"Red", "red ", "", "purple", "\x00"} {
		v, err := Parse[color](colorNames, []byte(text), "color", errUnknown)
		require.ErrorIs(t, err, errUnknown, "%q", text)
		assert.Zero(t, v)
	}
	_, err := Parse[color](colorNames, []byte("purple"), "color", errUnknown)
	assert.EqualError(t, err, `test: unknown name: color "purple" (want one of red, green, blue)`)
}

func TestUnmarshal(t *testing.T) {
	c := color(2)
	require.NoError(t, Unmarshal(&c, colorNames, []byte("green"), "color", errUnknown))
	assert.Equal(t, color(1), c)
	require.ErrorIs(t, Unmarshal(&c, colorNames, []byte("purple"), "color", errUnknown), errUnknown)
	assert.Equal(t, color(1), c, "an unknown name leaves the value alone")
}

func TestNoAllocs(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = String(colorNames, color(1), "color") }),
		"String of a named value allocates")
	blue := []byte("blue")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = Parse[color](colorNames, blue, "color", errUnknown) }),
		"Parse of a name allocates")
}
