package trafficpolicy

import (
	"fmt"
	"strconv"
)

// The enums of this package are small unsigned integers with a table of
// names; these helpers give them String, MarshalText and UnmarshalText.

func enumString[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}

func enumMarshal[T ~uint8](names []string, v T, typ string) ([]byte, error) {
	if int(v) >= len(names) {
		return nil, fmt.Errorf("%w: %s(%d)", ErrUnknownValue, typ, uint8(v))
	}
	return []byte(names[v]), nil
}

func enumUnmarshal[T ~uint8](names []string, text []byte, typ string) (T, error) {
	for i, n := range names {
		if string(text) == n {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q", ErrUnknownValue, typ, text)
}
