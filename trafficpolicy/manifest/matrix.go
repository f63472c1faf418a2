package manifest

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sourceip/sourceip/trafficpolicy"
)

var matrixHeader = []string{
	"Service", "Policy", "Caller", "Path", "Backend sees", "Client survives", "clientip", "Health check", "No local endpoint",
}

// RenderMatrix writes rows as a Markdown table, one row per expectation:
// service type, governing policy, caller, the path the connection takes,
// what the backend's socket sees, where the client address survives, the
// clientip recipe, what health-checks the node, and what happens on a node
// without a local endpoint. Caveats follow the table as numbered notes.
func RenderMatrix(w io.Writer, rows []trafficpolicy.Expectation) error {
	bw := bufio.NewWriter(w)
	writeRow(bw, matrixHeader)
	sep := make([]string, len(matrixHeader))
	for i := range sep {
		sep[i] = "---"
	}
	writeRow(bw, sep)
	var notes []string
	for _, e := range rows {
		recipe := e.Recipe()
		for _, d := range e.Caveats.Notes() {
			n := slices.Index(notes, d)
			if n < 0 {
				notes = append(notes, d)
				n = len(notes) - 1
			}
			recipe += " [" + strconv.Itoa(n+1) + "]"
		}
		writeRow(bw, []string{
			e.Case.Type.String(), e.Policy(), e.Caller(), e.Route(), e.Sees(), e.Survives(), recipe,
			e.Health.Describe(), e.Fallback(),
		})
	}
	if len(notes) > 0 {
		bw.WriteString("\n")
		for i, n := range notes {
			bw.WriteString(strconv.Itoa(i+1) + ". " + upperFirst(n) + ".\n")
		}
	}
	return bw.Flush()
}

func writeRow(w *bufio.Writer, cells []string) {
	w.WriteString("|")
	for _, c := range cells {
		w.WriteString(" ")
		w.WriteString(strings.ReplaceAll(c, "|", `\|`))
		w.WriteString(" |")
	}
	w.WriteString("\n")
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
