package middleware

import (
	"strings"
	"unicode/utf8"
)

// maxTopicLen is the longest topic name or filter MQTT can carry: a UTF-8
// encoded string with a two-byte length (MQTT 5.0 §1.5.4, 3.1.1 §1.5.3).
const maxTopicLen = 65535

// validTopicFilter reports whether f is a valid MQTT topic filter (MQTT 5.0
// §4.7, 3.1.1 §4.7): one character at least, at most 65535 bytes of UTF-8
// without U+0000, '+' only as a whole level, and '#' only as the whole last
// level. Every valid topic name is a valid filter. It does not allocate.
func validTopicFilter(f string) bool {
	if f == "" || len(f) > maxTopicLen || strings.IndexByte(f, 0) >= 0 || !utf8.ValidString(f) {
		return false
	}
	for {
		level, rest, more := cutLevel(f)
		switch {
		case level == "#":
			return !more
		case len(level) > 1 && strings.ContainsAny(level, "+#"):
			return false
		case !more:
			return true
		}
		f = rest
	}
}

// cutLevel splits a topic at its first '/': the first level, the rest, and
// whether there was a '/'.
func cutLevel(s string) (level, rest string, more bool) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// topicCovers reports whether the filter matches every topic name that
// target stands for: target itself when it is a topic name (as in a
// PUBLISH), and every name it matches when it is a filter (as in a
// SUBSCRIBE). Both must be valid filters. It follows MQTT's matching rules:
// '+' matches one level, empty levels included; '#' matches its parent level
// and every level below it; and a filter whose first level is a wildcard
// matches no topic whose first level begins with '$' (§4.7.2), so "#" does not
// cover "$SYS/broker"; and the empty string is no topic (§4.7.3), so "/#"
// does not stand for its parent "". It does not allocate.
func topicCovers(filter, target string) bool {
	if target[0] == '$' && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	emptyFirst := false // target's first level is empty
	for level := 0; ; level++ {
		fl, frest, fmore := cutLevel(filter)
		if fl == "#" {
			return true
		}
		tl, trest, tmore := cutLevel(target)
		switch {
		case fl == "+":
			if tl == "#" {
				// "#" stands for more than one level, and also for none
				// (its parent) unless the parent is no topic: at the first
				// level, or below an empty first one ("/#"). Only "+/#"
				// covers it, as the rest of the filter, where there is no
				// parent to match.
				return (level == 0 || level == 1 && emptyFirst) && fmore && frest == "#"
			}
		case fl != tl:
			return false // a literal level covers only itself, never a wildcard
		}
		switch {
		case !fmore:
			return !tmore
		case !tmore:
			// The target ends here; "a/#" also matches "a".
			return frest == "#"
		}
		if level == 0 {
			emptyFirst = tl == ""
		}
		filter, target = frest, trest
	}
}

// topicOverlaps reports whether some topic name is matched by both filters a
// and b: whether a subscription to one receives a topic the other matches.
// Both must be valid filters. As in topicCovers, a wildcard first level
// matches no topic whose first level begins with '$' (§4.7.2). It does not
// allocate.
func topicOverlaps(a, b string) bool {
	if a[0] == '$' && (b[0] == '+' || b[0] == '#') || b[0] == '$' && (a[0] == '+' || a[0] == '#') {
		return false
	}
	for first := true; ; first = false {
		al, arest, amore := cutLevel(a)
		bl, brest, bmore := cutLevel(b)
		switch {
		case al == "#" || bl == "#":
			return true
		case al != bl && al != "+" && bl != "+":
			return false
		case !amore && !bmore:
			return true
		case first && (!amore || !bmore) && (al == "" || bl == ""):
			// One ends here and the other's "#" would match only their
			// parent, the empty first level: "" is no topic (§4.7.3).
			return false
		case !amore:
			return brest == "#" // "a" and "a/#"
		case !bmore:
			return arest == "#"
		}
		a, b = arest, brest
	}
}
