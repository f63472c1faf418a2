package reading

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		device  string
		seq     uint64
		compact string
		wantErr error
	}{
		{name: "minimal", in: `{"device":"d7","seq":0}`, device: "d7", seq: 0, compact: `{"device":"d7","seq":0}`},
		{name: "extra members kept, whitespace removed", in: "{\n  \"device\": \"d-1\",\n  \"seq\": 18446744073709551615,\n  \"values\": {\"t\": 21.5}\n}\n",
			device: "d-1", seq: 18446744073709551615, compact: `{"device":"d-1","seq":18446744073709551615,"values":{"t":21.5}}`},
		{name: "truncated", in: `{"device":"d7","seq":1`, wantErr: ErrNotJSON},
		{name: "garbage", in: `device=d7`, wantErr: ErrNotJSON},
		{name: "two values", in: `{"device":"d7","seq":1} {}`, wantErr: ErrNotJSON},
		{name: "empty", in: ``, wantErr: ErrNotJSON},
		{name: "array", in: `[{"device":"d7","seq":1}]`, wantErr: ErrNotObject},
		{name: "string", in: `"x"`, wantErr: ErrNotObject},
		{name: "no device", in: `{"seq":1}`, wantErr: ErrDevice},
		{name: "device not a string", in: `{"device":7,"seq":1}`, wantErr: ErrDevice},
		{name: "null", in: `null`, wantErr: ErrNotObject},
		{name: "device with newline", in: `{"device":"d\n7","seq":1}`, wantErr: ErrDevice},
		{name: "device with slash", in: `{"device":"a/b","seq":1}`, wantErr: ErrDevice},
		{name: "device too long", in: `{"device":"` + strings.Repeat("x", 129) + `","seq":1}`, wantErr: ErrDevice},
		{name: "no seq", in: `{"device":"d7"}`, wantErr: ErrSeq},
		{name: "negative seq", in: `{"device":"d7","seq":-1}`, wantErr: ErrSeq},
		{name: "fractional seq", in: `{"device":"d7","seq":1.5}`, wantErr: ErrSeq},
		{name: "string seq", in: `{"device":"d7","seq":"1"}`, wantErr: ErrSeq},
		{name: "seq overflow", in: `{"device":"d7","seq":18446744073709551616}`, wantErr: ErrSeq},
		{name: "too large", in: `{"device":"d7","seq":1,"pad":"` + strings.Repeat("x", DefaultMaxBytes) + `"}`, wantErr: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.in), 0)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %v", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Device != tt.device || r.Seq != tt.seq || string(r.Compact) != tt.compact {
				t.Errorf("Parse = %q %d %s", r.Device, r.Seq, r.Compact)
			}
		})
	}
}

func TestParseSyntaxErrorSaysWhere(t *testing.T) {
	_, err := Parse([]byte(`{"device":"d7","seq":1,}`), 0)
	if err == nil || !strings.Contains(err.Error(), "at byte 24") {
		t.Errorf("error %v does not name the offset", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"device":"d7","seq":3,"v":[1,2]}`))
	f.Add([]byte(`{"device":"d7","seq":3`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b, 0)
		if err != nil {
			return
		}
		for _, c := range r.Compact {
			if c == '\n' || c == '\r' {
				t.Fatalf("compact form %q holds a line break", r.Compact)
			}
		}
		if _, err := Parse(r.Compact, 0); err != nil {
			t.Fatalf("compact form %q does not parse: %v", r.Compact, err)
		}
	})
}
