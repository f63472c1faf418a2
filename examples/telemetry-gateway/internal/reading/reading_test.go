package reading

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
				require.ErrorIs(t, err, tt.wantErr, "Parse(%q)", tt.in)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.device, r.Device)
			assert.Equal(t, tt.seq, r.Seq)
			assert.Equal(t, tt.compact, string(r.Compact))
		})
	}
}

// TestParseRefusesDeepNesting: a reading nested 10,000 deep (20 kB, under
// the payload limit) was accepted, stored and acknowledged, and its record,
// one level deeper, was then beyond encoding/json's limit: the sink counted
// its own line as corrupt when it reopened the file, forgot the id, and
// Summarize and ReadAll could not read it.
func TestParseRefusesDeepNesting(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"device":"d7","seq":1,"n":` + strings.Repeat("[", depth-1) + `"[{\"]"` + strings.Repeat("]", depth-1) + `}`)
	}
	_, err := Parse(nested(MaxDepth), 0)
	require.NoError(t, err, "nested MaxDepth deep, brackets in a string not counted")
	for _, depth := range []int{MaxDepth + 1, 10_000} {
		_, err = Parse(nested(depth), 0)
		assert.ErrorIs(t, err, ErrTooDeep, "nested %d deep", depth)
	}
}

// TestParseRefusesDeviceOrSeqNamedTwice: encoding/json folds case and keeps
// the last of repeated names, so {"device":"victim","Device":"d7",...} from
// client d7 was accepted as d7's, and its payload stored as sent: a consumer
// reading payload["device"] (Python, JavaScript) found "victim", and one that
// refuses repeated fields (serde_json's structs) could not read it at all.
func TestParseRefusesDeviceOrSeqNamedTwice(t *testing.T) {
	for _, in := range []string{
		`{"device":"victim","Device":"d7","seq":1}`,
		`{"device":"victim","device":"d7","seq":1}`,
		`{"dev\u0069ce":"victim","device":"d7","seq":1}`,
		`{"device":"d7","seq":1,"SEQ":2}`,
		`{"device":"d7","seq":1,"ſeq":2}`,
	} {
		_, err := Parse([]byte(in), 0)
		assert.ErrorIs(t, err, ErrNamedTwice, "%s", in)
	}
	r, err := Parse([]byte(`{"Device":"d7","seq":1,"x":{"device":"other","seq":2}}`), 0)
	require.NoError(t, err, "once each at the top, under any case, and again inside a member")
	assert.Equal(t, "d7", r.Device)
}

// TestParseRefusesInvalidUTF8: encoding/json takes bytes that are not UTF-8
// in a string as they are, and so did Parse; the sink then stored them in
// the record, which RFC 8259 §8.1 says is not JSON to exchange: a consumer in
// Python (json.loads of the bytes) or Rust (serde_json) could not read the
// acknowledged reading. Valid UTF-8 still takes the fast way.
func TestParseRefusesInvalidUTF8(t *testing.T) {
	for _, in := range []string{
		`{"device":"d7","seq":1,"s":"` + "\xff" + `"}`,
		`{"device":"d7","seq":1,"s":"` + "\xc3" + `"}`,         // cut short
		`{"device":"d7","seq":1,"s":"` + "\xed\xa0\x80" + `"}`, // a surrogate
		`{"device":"d7","seq":1,"` + "\xc0\xaf" + `":1}`,       // overlong, in a name
	} {
		_, err := Parse([]byte(in), 0)
		assert.ErrorIs(t, err, ErrNotJSON, "%q", in)
		assert.ErrorContains(t, err, "invalid UTF-8 at byte ", "%q", in)
	}
	in := []byte(`{"device":"d7","seq":1,"place":"Zürich 東京 🌡"}`)
	_, ok := parseFast(in)
	assert.True(t, ok, "valid UTF-8 takes the fast way")
	r, err := Parse(in, 0)
	require.NoError(t, err)
	assert.Equal(t, string(in), string(r.Compact))
}

func TestParseSyntaxErrorSaysWhere(t *testing.T) {
	_, err := Parse([]byte(`{"device":"d7","seq":1,}`), 0)
	assert.ErrorContains(t, err, "at byte 24", "the error names the offset")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"device":"d7","seq":3,"v":[1,2]}`))
	f.Add([]byte(`{"device":"d7","seq":3`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b, 0)
		if err != nil {
			return
		}
		require.False(t, bytes.ContainsAny(r.Compact, "\r\n"), "compact form %q holds a line break", r.Compact)
		_, err = Parse(r.Compact, 0)
		require.NoError(t, err, "compact form %q does not parse", r.Compact)
	})
}

// FuzzParseFast pins parseFast to encoding/json: whatever it accepts,
// parseSlow accepts with the same device, seq and compact form.
func FuzzParseFast(f *testing.F) {
	for _, s := range []string{
		`{"device":"d7","seq":3,"v":[1,2]}`,
		"{ \"DEVICE\" : \"d7\" ,\n\"Seq\":0, \"x\":{\"a\":[true,false,null,-1.5e+3,\"\\u00e9\\n\"]}}",
		`{"device":"d7","device":null,"seq":1}`,
		`{"device":"d7","seq":1,"ſeq":2}`,
		`{"device":"d7","seq":01}`,
		`{"device":"d\u0037","seq":1}`,
		`{"device":"d7","seq":1,"s":"` + "\xff\xfe" + `"}`,
		`{"device":"d7","seq":1,"n":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := parseFast(b)
		if !ok {
			return
		}
		slow, err := parseSlow(b)
		require.NoError(t, err, "parseFast accepted %q", b)
		assert.Equal(t, slow.Device, fast.Device, "device of %q", b)
		assert.Equal(t, slow.Seq, fast.Seq, "seq of %q", b)
		assert.Equal(t, string(slow.Compact), string(fast.Compact), "compact form of %q", b)
	})
}

// TestParseFastTakesTheCommonCase checks that the payloads devices send go
// the fast way, and that what encoding/json reads differently does not.
func TestParseFastTakesTheCommonCase(t *testing.T) {
	for _, in := range []string{
		`{"device":"d7","seq":3,"values":{"temp":21.5}}`,
		"{\n  \"device\": \"d-1\",\n  \"seq\": 18446744073709551615,\n  \"ts\": \"2026-01-02T03:04:05Z\"\n}\n",
		`{"Device":"d7","SEQ":3}`,
	} {
		_, ok := parseFast([]byte(in))
		assert.True(t, ok, "%q", in)
	}
	for _, in := range []string{
		`{"device":"d7","device":null,"seq":1}`, // a repeated key: the last one counts
		`{"device":"d7","seq":1,"ſeq":2}`,       // folds to "seq" in encoding/json
		`{"dev\u0069ce":"d7","seq":1}`,          // an escaped key
		`{"device":"d\u0037","seq":1}`,          // an escaped device
		`{"device":"d7","seq":1.0}`,
		`{"device":"d7","seq":1,}`,
		`{"device":"d7","seq":1} x`,
		`null`,
	} {
		_, ok := parseFast([]byte(in))
		assert.False(t, ok, "%q", in)
	}
}

func BenchmarkParse(b *testing.B) {
	in := []byte(`{"device":"dev-00042","seq":123456,"ts":"2026-01-02T03:04:05Z","values":{"temp":21.5,"rh":40}}`)
	for _, bb := range []struct {
		name  string
		parse func([]byte) (Reading, error)
	}{
		{"Parse", func(p []byte) (Reading, error) { return Parse(p, 0) }},
		{"encoding-json", parseSlow},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
