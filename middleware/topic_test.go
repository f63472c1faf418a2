package middleware

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The cases of MQTT 5.0 §4.7 (and 3.1.1 §4.7), by the clause they pin.
func TestTopicCovers(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		target string
		want   bool
	}{
		{"§4.7.1.2 # matches the parent level", "sport/tennis/player1/#", "sport/tennis/player1", true},
		{"§4.7.1.2 # matches one level below", "sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
		{"§4.7.1.2 # matches several levels below", "sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
		{"§4.7.1.2 sport/# matches sport", "sport/#", "sport", true},
		{"§4.7.1.2 # alone matches everything", "#", "sport/tennis", true},
		{"§4.7.1.2 # matches an empty first level", "#", "/finance", true},
		{"§4.7.1.3 + matches one level", "sport/tennis/+", "sport/tennis/player1", true},
		{"§4.7.1.3 + does not match two levels", "sport/tennis/+", "sport/tennis/player1/ranking", false},
		{"§4.7.1.3 sport/+ does not match sport", "sport/+", "sport", false},
		{"§4.7.1.3 sport/+ matches sport/ (an empty level)", "sport/+", "sport/", true},
		{"§4.7.1.3 + matches an empty level", "+/+", "/finance", true},
		{"§4.7.1.3 /+ matches /finance", "/+", "/finance", true},
		{"§4.7.1.3 + does not match /finance", "+", "/finance", false},
		{"§4.7.2 # does not match $SYS", "#", "$SYS/broker/clients", false},
		{"§4.7.2 +/monitor/Clients does not match $SYS", "+/monitor/Clients", "$SYS/monitor/Clients", false},
		{"§4.7.2 $SYS/# matches $SYS", "$SYS/#", "$SYS/broker/clients", true},
		{"§4.7.2 $SYS/monitor/+ matches", "$SYS/monitor/+", "$SYS/monitor/Clients", true},
		{"§4.7.2 $ only matters in the first level", "a/+", "a/$x", true},
		{"§4.7.3 levels are case sensitive", "ACCOUNTS", "Accounts", false},
		{"§4.7.3 a space is a character", "accounts payable", "accounts payable", true},
		{"§4.7.3 a leading / makes a distinct empty level", "finance", "/finance", false},
		{"empty levels are levels", "a//b", "a//b", true},
		{"empty level does not match a missing one", "a//b", "a/b", false},
		{"trailing empty level", "a/", "a", false},
		{"literal is not a prefix match", "devices/a", "devices/ab", false},
		// A target with wildcards is a subscription: covered only when every
		// name it matches is.
		{"subscription # inside #", "#", "#", true},
		{"subscription within a # rule", "devices/#", "devices/+/telemetry", true},
		{"subscription wider than a + rule", "devices/+", "devices/#", false},
		{"subscription + inside +", "devices/+/telemetry", "devices/+/telemetry", true},
		{"subscription + not inside a literal", "devices/a/telemetry", "devices/+/telemetry", false},
		{"subscription # not inside a literal", "devices/a", "devices/#", false},
		{"subscription # wider than a/+/#'s parent", "a/+/#", "a/#", false},
		{"subscription a/# inside a/#", "a/#", "a/#", true},
		{"subscription +/# inside #", "#", "+/#", true},
		{"subscription # inside +/#", "+/#", "#", true},
		{"subscription $SYS/# not inside #", "#", "$SYS/#", false},
		{"§4.7.3 \"\" is no topic, so /# stands for no parent and /+/# covers it", "/+/#", "/#", true},
		{"§4.7.3 +/+/# covers /#", "+/+/#", "/#", true},
		{"a/# has a parent, which a/+/# does not match", "a/+/#", "a/#", false},
		{"// is the topic /, which /+/+/# does not match", "/+/+/#", "//#", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, validTopicFilter(tc.filter) && validTopicFilter(tc.target), "invalid case")
			assert.Equal(t, tc.want, topicCovers(tc.filter, tc.target))
			if !strings.ContainsAny(tc.target, "+#") {
				assert.Equal(t, tc.want, refTopicMatch(tc.filter, tc.target), "the reference disagrees")
			}
		})
	}
}

// Two filters overlap when some topic name matches both (MQTT 5.0 §4.7): a
// subscription to one receives a topic the other's rule decides.
func TestTopicOverlaps(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
		// shared is a topic both match, when they overlap.
		shared string
	}{
		{"§4.7.1.2 # overlaps everything not $", "#", "devices/+/firmware", true, "devices/x/firmware"},
		{"§4.7.1.3 + overlaps a literal level", "devices/+/+", "devices/+/firmware", true, "devices/x/firmware"},
		{"§4.7.1.3 literal against +", "devices/d1/+", "devices/+/firmware", true, "devices/d1/firmware"},
		{"§4.7.1.2 a/# overlaps a, its parent", "a/#", "a", true, "a"},
		{"§4.7.1.2 a overlaps a/#", "a", "+/#", true, "a"},
		{"§4.7.1.3 + needs its level", "a/+", "a", false, ""},
		{"different literals", "devices/+/telemetry", "devices/+/firmware", false, ""},
		{"different depths", "+/+", "+/+/+", false, ""},
		{"§4.7.1.3 + matches an empty level", "a/+/c", "a//+", true, "a//c"},
		{"§4.7.2 # does not overlap $SYS", "#", "$SYS/#", false, ""},
		{"§4.7.2 + does not overlap $SYS", "$SYS/+", "+/broker", false, ""},
		{"§4.7.2 $SYS/# overlaps $SYS/+", "$SYS/#", "$SYS/+", true, "$SYS/x"},
		{"§4.7.2 $ only matters in the first level", "a/+", "a/$x", true, "a/$x"},
		{"§4.7.3 /# and + share only \"\", which is no topic", "/#", "+", false, ""},
		{"§4.7.3 /# and +/+ share /", "/#", "+/+", true, "/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, validTopicFilter(tc.a) && validTopicFilter(tc.b), "invalid case")
			assert.Equal(t, tc.want, topicOverlaps(tc.a, tc.b))
			assert.Equal(t, tc.want, topicOverlaps(tc.b, tc.a), "not symmetric")
			if tc.want {
				assert.True(t, refTopicMatch(tc.a, tc.shared) && refTopicMatch(tc.b, tc.shared), "the shared topic")
			}
		})
	}
}

// topicCovers and topicOverlaps agree with the reference matcher on every
// pair of filters of up to three levels drawn from a literal, a '$' level,
// an empty level and the wildcards, over every topic name of up to four
// levels: covers is set inclusion and overlaps is a shared name. Names of
// more levels add nothing a filter of three levels can tell apart.
func TestTopicExhaustive(t *testing.T) {
	var filters, names []string
	// gen appends prefix/level for each level, and what lies below it, to
	// out; the prefix "\x00" stands for none, as "" is an empty level.
	var gen func(prefix string, depth int, levels []string, out *[]string)
	gen = func(prefix string, depth int, levels []string, out *[]string) {
		for _, l := range levels {
			s := l
			if prefix != "\x00" {
				s = prefix + "/" + l
			}
			if validTopicFilter(s) {
				*out = append(*out, s)
			}
			if depth > 1 {
				gen(s, depth-1, levels, out)
			}
		}
	}
	gen("\x00", 3, []string{"a", "$a", "", "+", "#"}, &filters)
	gen("\x00", 4, []string{"a", "$a", "", "b"}, &names)
	match := make(map[string][]bool, len(filters))
	for _, f := range filters {
		m := make([]bool, len(names))
		for i, n := range names {
			m[i] = refTopicMatch(f, n)
		}
		match[f] = m
	}
	for _, a := range filters {
		for _, b := range filters {
			covers, overlaps := true, false
			for i := range names {
				covers = covers && (!match[b][i] || match[a][i])
				overlaps = overlaps || match[b][i] && match[a][i]
			}
			if topicCovers(a, b) != covers {
				t.Errorf("topicCovers(%q, %q) = %v; the names say %v", a, b, !covers, covers)
			}
			if topicOverlaps(a, b) != overlaps {
				t.Errorf("topicOverlaps(%q, %q) = %v; the names say %v", a, b, !overlaps, overlaps)
			}
		}
	}
}

func TestValidTopicFilter(t *testing.T) {
	tests := []struct {
		name string
		f    string
		want bool
	}{
		{"one level", "a", true},
		{"# alone", "#", true},
		{"+ alone", "+", true},
		{"a single /", "/", true},
		{"empty levels", "//", true},
		{"# last", "a/b/#", true},
		{"+ between", "a/+/b", true},
		{"$ topic", "$SYS/#", true},
		{"multibyte UTF-8", "capteurs/température", true},
		{"empty", "", false},
		{"# not last", "a/#/b", false},
		{"# inside a level", "a/b#", false},
		{"+ inside a level", "a/b+/c", false},
		{"+ joined to #", "a/+#", false},
		{"U+0000", "a/\x00", false},
		{"invalid UTF-8", "a/\xff", false},
		{"longest", strings.Repeat("a", maxTopicLen), true},
		{"too long", strings.Repeat("a", maxTopicLen+1), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, validTopicFilter(tc.f))
		})
	}
}

// refTopicMatch is a slow, obviously correct matcher of a filter against a
// topic name: the filter rewritten as a regular expression.
func refTopicMatch(filter, name string) bool {
	levels := strings.Split(filter, "/")
	if strings.HasPrefix(name, "$") && (levels[0] == "+" || levels[0] == "#") {
		return false
	}
	multi := levels[len(levels)-1] == "#"
	if multi {
		levels = levels[:len(levels)-1]
	}
	parts := make([]string, len(levels))
	for i, l := range levels {
		if l == "+" {
			parts[i] = "[^/]*"
		} else {
			parts[i] = regexp.QuoteMeta(l)
		}
	}
	expr := strings.Join(parts, "/")
	switch {
	case multi && len(levels) == 0:
		expr = "(?s:.*)"
	case multi:
		expr += "(?s:/.*)?"
	}
	return regexp.MustCompile("^" + expr + "$").MatchString(name)
}

// FuzzTopicCovers checks topicCovers against the regular-expression
// reference for topic names, and, for a subscription target, that a name the
// target matches is matched by every filter said to cover it; and that
// topicOverlaps is symmetric, implied by topicCovers, and true whenever a
// name matches both filters.
func FuzzTopicCovers(f *testing.F) {
	for _, s := range [][3]string{
		{"sport/#", "sport", "sport"}, {"+/+", "/finance", "/finance"}, {"#", "$SYS/x", "$SYS/x"},
		{"a/+/#", "a/#", "a/b"}, {"devices/#", "devices/+/t", "devices/x/t"}, {"+", "+", ""},
		{"a//b", "a//+", "a//b"}, {"$SYS/+", "$SYS/+", "$SYS/"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, filter, target, name string) {
		if !validTopicFilter(filter) || !validTopicFilter(target) {
			return
		}
		covers, overlaps := topicCovers(filter, target), topicOverlaps(filter, target)
		if overlaps != topicOverlaps(target, filter) {
			t.Fatalf("topicOverlaps(%q, %q) = %v, but not the other way round", filter, target, overlaps)
		}
		if covers && !overlaps {
			t.Fatalf("topicCovers(%q, %q), but they do not overlap", filter, target)
		}
		if !overlaps && validTopicFilter(name) && !strings.ContainsAny(name, "+#") &&
			refTopicMatch(filter, name) && refTopicMatch(target, name) {
			t.Fatalf("topicOverlaps(%q, %q) = false, but %q matches both", filter, target, name)
		}
		if !strings.ContainsAny(target, "+#") {
			if covers != refTopicMatch(filter, target) {
				t.Fatalf("topicCovers(%q, %q) = %v; the reference says %v", filter, target, covers, !covers)
			}
			return
		}
		if covers && validTopicFilter(name) && !strings.ContainsAny(name, "+#") &&
			refTopicMatch(target, name) && !refTopicMatch(filter, name) {
			t.Fatalf("topicCovers(%q, %q), but %q matches the target and not the filter", filter, target, name)
		}
	})
}

func TestTopicNoAllocs(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = validTopicFilter("devices/+/telemetry/#") && topicCovers("devices/+/telemetry/#", "devices/d1/telemetry/temp")
	}))
}
