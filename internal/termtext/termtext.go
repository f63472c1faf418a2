// Package termtext says which characters may reach a terminal as they are.
// A terminal acts on control characters (ESC and CSI sequences move the
// cursor, rewrite what was printed, set the window title or, on some
// terminals, answer back into the shell), and bidirectional and other
// format characters reorder or hide text (Trojan Source, CVE-2021-42574).
// explain's text rendering and cmd/sourceip's -fetch both escape what is
// not inert, by this one rule.
package termtext

import (
	"unicode"
	"unicode/utf8"
)

// Inert reports whether r may reach a terminal as it is. size is r's
// length in its text, so that an invalid byte (utf8.RuneError of size 1)
// is not taken for a well-formed U+FFFD. Tab and line feed are inert; C0
// controls, DEL, C1 controls, an invalid byte (a C1 control to an 8-bit
// terminal), the line and paragraph separators and every format character
// (bidirectional overrides and isolates, zero-width characters, the soft
// hyphen, the BOM, tag characters) are not.
func Inert(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return false
	case r == '\n' || r == '\t':
		return true
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return false
	case r == '\u2028' || r == '\u2029':
		return false
	}
	return !unicode.Is(unicode.Cf, r)
}

// Line reports whether s can be shown as one line as it is: valid UTF-8,
// every character inert, and no line feed.
func Line(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\n' || !Inert(r, size) {
			return false
		}
		i += size
	}
	return true
}
