package ranges

import "fmt"

// The text forms of this package's enums. (The root module is growing one
// shared enum-text helper; these small generics stand in for it.)

func enumString[E ~uint8](e E, names []string, typ string) string {
	if int(e) < len(names) {
		return names[e]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(e))
}

// enumMarshal returns e's name; skip is a value without a text form (-1
// for none).
func enumMarshal[E ~uint8](e E, names []string, skip int, unknown error) ([]byte, error) {
	if int(e) >= len(names) || int(e) == skip {
		return nil, fmt.Errorf("%w: %d", unknown, uint8(e))
	}
	return []byte(names[e]), nil
}

func enumUnmarshal[E ~uint8](e *E, text []byte, names []string, skip int, unknown error) error {
	for i, n := range names {
		if i != skip && string(text) == n {
			*e = E(i)
			return nil
		}
	}
	return fmt.Errorf("%w %q", unknown, truncate(string(text)))
}
