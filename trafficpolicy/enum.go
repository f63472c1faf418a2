package trafficpolicy

import "github.com/sourceip/sourceip/internal/enumtext"

// The enums of this package are small unsigned integers with a table of
// names; these give them String, MarshalText and UnmarshalText through the
// library's one enum-text helper, with errors that wrap ErrUnknownValue.

func enumString[T ~uint8](names []string, v T, typ string) string {
	return enumtext.String(names, v, typ)
}

func enumMarshal[T ~uint8](names []string, v T, typ string) ([]byte, error) {
	return enumtext.Marshal(names, v, typ, ErrUnknownValue)
}

func enumUnmarshal[T ~uint8](names []string, text []byte, typ string) (T, error) {
	return enumtext.Parse[T](names, text, typ, ErrUnknownValue)
}
