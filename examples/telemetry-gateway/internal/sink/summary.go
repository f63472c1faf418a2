package sink

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
)

// Summary is what Summarize found in a sink file.
type Summary struct {
	Lines      int            // complete lines
	Unique     int            // distinct ids
	Duplicates int            // lines whose id appeared on an earlier line
	Invalid    int            // lines that are not a record
	Torn       bool           // the file ends inside a line
	Count      map[string]int // id -> lines
}

// Summarize reads a sink file and counts its records by id, so tests and
// operators can check that every acknowledged message is there exactly once
// and see how many were redelivered.
func Summarize(r io.Reader) (Summary, error) {
	sum := Summary{Count: make(map[string]int)}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] != '\n' {
			sum.Torn = true
			return sum, nil
		}
		if len(line) > 0 {
			sum.Lines++
			var rec struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(line, &rec) != nil || rec.ID == "" {
				sum.Invalid++
			} else {
				sum.Count[rec.ID]++
				if sum.Count[rec.ID] == 1 {
					sum.Unique++
				} else {
					sum.Duplicates++
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return sum, nil
		}
		if err != nil {
			return sum, err
		}
	}
}

// SummarizeFile is Summarize of the named file.
func SummarizeFile(path string) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	return Summarize(f)
}

// ReadAll decodes every record of a sink file.
func ReadAll(r io.Reader) ([]Record, error) {
	var out []Record
	dec := json.NewDecoder(r)
	for {
		var rec Record
		if err := dec.Decode(&rec); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}
