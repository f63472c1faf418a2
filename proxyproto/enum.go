package proxyproto

import (
	"errors"

	"github.com/sourceip/sourceip/internal/enumtext"
)

// The package's enums are small integers with fixed lowercase names; these
// give each of them String, MarshalText and UnmarshalText through the
// library's one enum-text helper.

// errUnknownName is wrapped by MarshalText and UnmarshalText of this
// package's enums for a value or a name they do not know.
var errUnknownName = errors.New("proxyproto: unknown name")

func enumString[T ~uint8](v T, names []string, typ string) string {
	return enumtext.String(names, v, typ)
}

func enumMarshal[T ~uint8](v T, names []string, typ string) ([]byte, error) {
	return enumtext.Marshal(names, v, typ, errUnknownName)
}

func enumUnmarshal[T ~uint8](p *T, text []byte, names []string, typ string) error {
	return enumtext.Unmarshal(p, names, text, typ, errUnknownName)
}
