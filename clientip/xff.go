package clientip

import "strings"

// listIter walks the elements of a comma-separated header list from the right,
// across all of the header's lines (later lines first), skipping empty elements
// and trimming optional white space, as RFC 9110 §5.6.1 asks of list-based
// fields. Repeated lines are one list in order: "a, b" + "c" is a, b, c. It
// reads only as far as the caller asks and does not allocate.
type listIter struct {
	lines []string
	line  int // index of the line being read
	end   int // end of its unread part; -1 once the line is used up
}

func newListIter(lines []string) listIter {
	it := listIter{lines: lines, line: len(lines) - 1, end: -1}
	if it.line >= 0 {
		it.end = len(lines[it.line])
	}
	return it
}

// next returns the next element from the right.
func (it *listIter) next() (string, bool) {
	for it.line >= 0 {
		l := it.lines[it.line]
		for it.end >= 0 {
			i := strings.LastIndexByte(l[:it.end], ',')
			e := trimOWS(l[i+1 : it.end])
			it.end = i
			if e != "" {
				return e, true
			}
		}
		it.line--
		if it.line >= 0 {
			it.end = len(it.lines[it.line])
		}
	}
	return "", false
}

// withinBudget reports whether a header's lines fit in max bytes. Each line
// costs its length plus one, so that many empty lines also count; the loop stops
// as soon as the budget is spent.
func withinBudget(lines []string, max int) bool {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
		if n > max {
			return false
		}
	}
	return true
}
