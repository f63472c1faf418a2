package proxyproto

import "fmt"

// The package's enums are small integers with fixed lowercase names. These
// helpers give each of them the same String, MarshalText and UnmarshalText.

func enumString[T ~uint8](v T, names []string, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

func enumMarshal[T ~uint8](v T, names []string, typ string) ([]byte, error) {
	if int(v) >= len(names) {
		return nil, fmt.Errorf("proxyproto: unknown %s %d", typ, uint8(v))
	}
	return []byte(names[v]), nil
}

func enumUnmarshal[T ~uint8](p *T, text []byte, names []string, typ string) error {
	for i, n := range names {
		if string(text) == n {
			*p = T(i)
			return nil
		}
	}
	return fmt.Errorf("proxyproto: unknown %s %q (want one of %q)", typ, text, names)
}
