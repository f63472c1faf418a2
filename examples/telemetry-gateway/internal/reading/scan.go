package reading

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxFastDepth is the deepest nesting parseFast handles; deeper payloads go
// to parseSlow, which refuses them.
const maxFastDepth = MaxDepth

// parseFast is Parse for the payloads devices send: one pass over the bytes
// that validates the JSON, removes insignificant white space and picks out
// the top-level "device" and "seq" members, instead of encoding/json's
// three (validity scan, reflective decode, Compact).
//
// It decides only what it is sure encoding/json decides alike: ok is false
// for anything else (invalid JSON, a top-level key that is not plain ASCII
// or appears twice, a device or seq that is not a valid one, nesting deeper
// than maxFastDepth), and then parseSlow decides, with its error messages.
// FuzzParseFast pins that whenever ok is true, parseSlow returns the same
// Reading.
func parseFast(payload []byte) (r Reading, ok bool) {
	s := scanner{in: payload, out: make([]byte, 0, len(payload))}
	s.space()
	if s.i >= len(s.in) || s.in[s.i] != '{' {
		return Reading{}, false
	}
	var h head
	if !s.object(&h) {
		return Reading{}, false
	}
	s.space()
	if s.i != len(s.in) || !h.hasDevice || !h.hasSeq {
		return Reading{}, false
	}
	return Reading{Device: h.device, Seq: h.seq, Compact: s.out}, true
}

// head is what parseFast found of the top-level members it needs.
type head struct {
	device            string
	seq               uint64
	hasDevice, hasSeq bool
}

// member records a top-level member, and reports false when parseFast
// must leave the payload to encoding/json. encoding/json matches field names
// case-insensitively (with Unicode folding, hence plain ASCII keys only
// here), lets a repeated key override an earlier one (or a null reset it),
// and decodes escapes in strings.
func (h *head) member(key []byte, plain bool, val []byte) bool {
	if !plain {
		return false
	}
	switch {
	case strings.EqualFold(string(key), "device"):
		if h.hasDevice || len(val) < 2 || val[0] != '"' {
			return false
		}
		d := val[1 : len(val)-1]
		if !validDevice(string(d)) { // also excludes escapes
			return false
		}
		h.device, h.hasDevice = string(d), true
	case strings.EqualFold(string(key), "seq"):
		if h.hasSeq {
			return false
		}
		for _, c := range val {
			if c < '0' || c > '9' {
				return false
			}
		}
		seq, err := strconv.ParseUint(string(val), 10, 64)
		if err != nil {
			return false
		}
		h.seq, h.hasSeq = seq, true
	}
	return true
}

// scanner validates JSON (RFC 8259, strings in UTF-8) and appends it to out
// without insignificant white space, as json.Compact does.
type scanner struct {
	in    []byte
	i     int
	out   []byte
	depth int
}

func (s *scanner) space() {
	for s.i < len(s.in) {
		switch s.in[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value after optional white space.
func (s *scanner) value() bool {
	s.space()
	if s.i >= len(s.in) {
		return false
	}
	switch c := s.in[s.i]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// object scans an object at s.in[s.i] == '{'; h, when not nil, is given
// each member.
func (s *scanner) object(h *head) bool {
	if empty, ok := s.open('}'); empty || !ok {
		return ok
	}
	for {
		s.space()
		if s.i >= len(s.in) || s.in[s.i] != '"' {
			return false
		}
		k := len(s.out)
		plain, ok := s.str()
		if !ok {
			return false
		}
		key := s.out[k+1 : len(s.out)-1]
		s.space()
		if s.i >= len(s.in) || s.in[s.i] != ':' {
			return false
		}
		s.out = append(s.out, ':')
		s.i++
		s.space()
		v := len(s.out)
		if !s.value() {
			return false
		}
		if h != nil && !h.member(key, plain, s.out[v:]) {
			return false
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

// open scans the opening bracket at s.in[s.i] and, when end follows, the
// empty object or array (empty); ok is false when it nests too deep.
func (s *scanner) open(end byte) (empty, ok bool) {
	if s.depth++; s.depth > maxFastDepth {
		return false, false
	}
	s.out = append(s.out, s.in[s.i])
	s.i++
	s.space()
	if s.i < len(s.in) && s.in[s.i] == end {
		s.out = append(s.out, end)
		s.i++
		s.depth--
		return true, true
	}
	return false, true
}

// array scans an array at s.in[s.i] == '['.
func (s *scanner) array() bool {
	if empty, ok := s.open(']'); empty || !ok {
		return ok
	}
	for {
		if !s.value() {
			return false
		}
		if more, ok := s.next(']'); !more {
			return ok
		}
	}
}

// next scans what follows a member or element: a comma (more), or end, which
// closes the object or array (ok).
func (s *scanner) next(end byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.in) {
		return false, false
	}
	switch c := s.in[s.i]; c {
	case ',', end:
		s.out = append(s.out, c)
		s.i++
		if c == end {
			s.depth--
			return false, true
		}
		return true, true
	}
	return false, false
}

// str scans a string at s.in[s.i] == '"' and reports whether it is plain:
// printable ASCII without escapes.
func (s *scanner) str() (plain, ok bool) {
	start := s.i
	s.i++
	plain = true
	for s.i < len(s.in) {
		c := s.in[s.i]
		switch {
		case c == '"':
			s.i++
			s.out = append(s.out, s.in[start:s.i]...)
			return plain, true
		case c < 0x20:
			return false, false
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.in) {
				return false, false
			}
			switch s.in[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.in) {
					return false, false
				}
				for _, h := range s.in[s.i+2 : s.i+6] {
					if !isHex(h) {
						return false, false
					}
				}
				s.i += 6
			default:
				return false, false
			}
		case c < 0x7f:
			s.i++
		default:
			plain = false
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRune(s.in[s.i:])
				if r == utf8.RuneError && size == 1 {
					return false, false
				}
				s.i += size
			} else {
				s.i++
			}
		}
	}
	return false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
	start := s.i
	if s.in[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.in) && s.in[s.i] == '0':
		s.i++
	case s.i < len(s.in) && '1' <= s.in[s.i] && s.in[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.in) && s.in[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.in) && (s.in[s.i] == 'e' || s.in[s.i] == 'E') {
		s.i++
		if s.i < len(s.in) && (s.in[s.i] == '+' || s.in[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	s.out = append(s.out, s.in[start:s.i]...)
	return true
}

// digits scans one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.in) && '0' <= s.in[s.i] && s.in[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *scanner) literal(lit string) bool {
	if len(s.in)-s.i < len(lit) || string(s.in[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.out = append(s.out, lit...)
	s.i += len(lit)
	return true
}
