package main

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sourceip/sourceip/internal/termtext"
)

// What -fetch prints comes from the endpoint, which may be hostile or
// compromised: every string of its document, not only what a client wrote,
// is the endpoint's choice. A terminal acts on control characters (ESC and
// CSI sequences can move the cursor, rewrite what was printed, set the
// window title or, on some terminals, answer back into the shell), and
// bidirectional and other format characters reorder or hide text. So before
// anything fetched is printed, each character termtext does not call inert
// becomes an escape.

// escapeJSON returns the fetched JSON document b with every character that
// is not inert written as a JSON escape (\u001b; \ufffd for a byte that is
// not UTF-8, which is how encoding/json decodes it), and with carriage
// returns dropped. It relies on b being valid JSON, which the caller has
// decoded: raw control characters are then only whitespace between tokens
// (a carriage return, dropped, changes nothing), and every other such
// character is inside a string, where the escape stands for the same
// character. The document therefore decodes as before.
func escapeJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == '\r':
		case termtext.Inert(r, size):
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default: // an invalid byte is RuneError, U+FFFD
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// escapeText returns text b with every character that is not inert written
// as a Go escape (\x1b, \r, \u202e; \x9b for a byte that is not UTF-8).
func escapeText(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case termtext.Inert(r, size):
			out = append(out, b[i:i+size]...)
		case size == 1 && r == utf8.RuneError:
			out = fmt.Appendf(out, `\x%02x`, b[i])
		default:
			q := strconv.QuoteRuneToASCII(r)
			out = append(out, q[1:len(q)-1]...)
		}
		i += size
	}
	return out
}
