// Package enumtext gives the library's enums their text form. Each enum is a
// small unsigned integer type with a table of names indexed by value; String,
// MarshalText and UnmarshalText of every such type call the functions here, so
// they format, refuse and report unknown values the same way everywhere.
//
// It is internal: the names tables belong to the packages that own the types.
package enumtext

import (
	"fmt"
	"strconv"
	"strings"
)

// String returns the name of v, or typ(v), such as "Reason(9)", when v has
// none. It allocates only for a value without a name.
func String[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}

// Marshal returns the name of v, or an error wrapping unknown, such as
// "clientip: unknown name: Reason(9)", when v has none.
func Marshal[T ~uint8](names []string, v T, typ string, unknown error) ([]byte, error) {
	if int(v) >= len(names) {
		return nil, fmt.Errorf("%w: %s(%d)", unknown, typ, uint8(v))
	}
	return []byte(names[v]), nil
}

// Parse returns the value whose name is text, compared exactly (names are
// case-sensitive), or an error wrapping unknown that quotes text and lists
// the names.
func Parse[T ~uint8](names []string, text []byte, typ string, unknown error) (T, error) {
	for i, n := range names {
		if string(text) == n {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q (want one of %s)", unknown, typ, text, strings.Join(names, ", "))
}

// Unmarshal sets *p to the value whose name is text, as Parse finds it, and
// leaves *p alone on error: the body of an UnmarshalText method.
func Unmarshal[T ~uint8](p *T, names []string, text []byte, typ string, unknown error) error {
	v, err := Parse[T](names, text, typ, unknown)
	if err == nil {
		*p = v
	}
	return err
}
