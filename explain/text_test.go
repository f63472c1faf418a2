package explain

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/termtext"
)

// checkText fails t when text holds a character a terminal acts on, by
// termtext's rule (whose own test lists them): a control character other
// than a newline or a tab, DEL, a C1 control, a format character such as a
// bidirectional override, a line separator, or invalid UTF-8.
func checkText(t *testing.T, what string, text []byte) {
	t.Helper()
	require.True(t, utf8.Valid(text), "%s is not valid UTF-8:\n%s", what, text)
	for _, c := range string(text) {
		require.True(t, termtext.Inert(c, utf8.RuneLen(c)), "%s holds %U:\n%s", what, c, text)
	}
}

// A RemoteAddr that other middleware rewrote from a client's header (as
// gorilla/handlers.ProxyHeaders does, unchecked) may be a link-local IPv6
// address whose zone is anything at all: netip parses "fe80::1%\x1b[2J".
// The zone reached the socket peer, the summary, the notes and the policy
// checks; clientip now refuses such a peer, and the text rendering would
// escape it all the same.
func TestTextZonedPeerIsEscaped(t *testing.T) {
	for _, remote := range []string{"[fe80::1%\x1b[2J\x1b[H]:80", "fe80::1%\x1b]0;owned\x07", "[fe80::1%\u202e1.0.0.01]:80", "[fe80::1%\r\n]:80"} {
		h, err := New(Config{Trust: clientip.MustNew(xffConfig)})
		require.NoError(t, err)
		req := request(remote, "198.51.100.7")
		rep := h.Report(req)
		// clientip reads no such peer (ErrNoAddress, TestRemoteAddrZone):
		// nothing of the zone reaches the report, and its rendering is
		// safe whatever it holds.
		assert.Empty(t, rep.Socket.Peer.Addr().Zone(), "the peer keeps its zone: %q", remote)
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		checkText(t, "the text rendering of "+remote, text.Bytes())
	}
}

// A Report or Advice decoded from JSON (cmd/sourceip -fetch) holds
// whatever the document held; its text rendering escapes what a terminal
// would act on in every field, not only in those a client writes.
func TestTextDecodedDocumentIsEscaped(t *testing.T) {
	evil := "\x1b[2J\x1b]0;owned\x07\r\u202e\u0085\u200b\u2028\U000E0001"
	rep := Report{
		Schema: Schema, Kind: "request", Summary: evil, Notes: []string{evil},
		Request:  &RequestInfo{Method: "GET", Path: "/", Host: "h", Proto: "HTTP/1.1"},
		Config:   ConfigInfo{Header: evil, TrustedProxies: []netip.Prefix{}},
		Error:    &ErrorInfo{Reason: clientip.ReasonMalformed, Message: evil, Hint: evil},
		Steps:    []Step{{Layer: clientip.SourceSocket, Note: evil, Header: evil}},
		Headers:  []HeaderInfo{{Name: evil, Note: evil, Values: []string{evil}}},
		Proxy:    &ProxyInfo{Version: 2, TLVs: []TLVInfo{{Type: evil, Value: evil}, {Type: evil, Value: evil, Hex: true}}},
		Policy:   &PolicyInfo{Expectation: evil, Checks: []PolicyCheck{{Name: evil, Status: evil, Text: evil}}},
		Recorded: &RecordedInfo{Summary: evil},
	}
	js, err := json.Marshal(&rep)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(js, &back))
	var text bytes.Buffer
	require.NoError(t, back.WriteText(&text))
	checkText(t, "a decoded report", text.Bytes())

	adv := Advice{
		Schema: AdviceSchema, Go: evil + "\n", Preset: evil,
		Current:  ConfigInfo{Header: evil},
		Findings: []Finding{{Kind: FindingProxy, Text: evil}},
		Peers:    []PeerInfo{{Role: evil, Provider: evil, Headers: []HeaderCount{{Name: evil}}, UpstreamClasses: []ClassCount{{Class: evil}}}},
	}
	js, err = json.Marshal(&adv)
	require.NoError(t, err)
	var advBack Advice
	require.NoError(t, json.Unmarshal(js, &advBack))
	text.Reset()
	require.NoError(t, advBack.WriteText(&text))
	checkText(t, "a decoded advice", text.Bytes())
}

// A header value that is not UTF-8, or whose cut at 256 bytes falls inside
// a character, is held as the JSON document carries it (each stray byte
// U+FFFD), so that the report a client such as cmd/sourceip decodes is the
// report served, and renders the same text.
func TestDecodedReportRendersTheSame(t *testing.T) {
	h, err := New(Config{Trust: clientip.MustNew(xffConfig)})
	require.NoError(t, err)
	long := strings.Repeat("a", maxText-1) + "é" + strings.Repeat("b", 10) // é straddles the cut
	req := request("10.0.0.1:40000", "198.51.100.7\xff\xfe, 10.0.0.2", long)
	req.Header.Set("X-Real-IP", long)
	rep := h.Report(req)
	_, back, _ := roundTrip(t, rep)
	assert.Equal(t, rep, back, "the decoded report is the one served")

	assert.Equal(t, strings.Repeat("a", maxText-1)+"…", clip(long), "the cut falls before the character it would split")
	assert.Equal(t, "198.51.100.7\uFFFD\uFFFD", clip("198.51.100.7\xff\xfe"), "one U+FFFD for each stray byte")
	stray := clip(strings.Repeat("\x80", 300))
	assert.True(t, utf8.ValidString(stray))
	assert.Equal(t, strings.Repeat("\uFFFD", maxText-utf8.UTFMax)+"…", stray, "a cut within a few bytes of the bound when no character starts near it")
}

// The socket peer's zone is whatever a rewritten RemoteAddr held: bytes
// that are not UTF-8, or a megabyte of them. The report holds it cut and
// made UTF-8 as other text, so that its JSON document carries it unchanged
// and it stays small (found by FuzzReport).
func TestReportPeerZoneIsText(t *testing.T) {
	h, err := New(Config{Trust: clientip.MustNew(xffConfig)})
	require.NoError(t, err)
	for _, remote := range []string{"[::%\xd10]:0", "[fe80::1%" + strings.Repeat("\xff", 1<<20) + "]:80"} {
		rep := h.Report(request(remote, "198.51.100.7"))
		js, back, text := roundTrip(t, rep)
		assert.Less(t, len(js), 64<<10, "JSON size")
		assert.Equal(t, rep, back, "the decoded report is the one served")
		assert.Less(t, len(text), 64<<10, "text size")
	}
}

// A stray byte in a header entry is held as U+FFFD, which the text shows
// inside the entry's quotes once, not quoted again.
func TestTextStrayByteQuotedOnce(t *testing.T) {
	rep := ReportFor(clientip.MustNew(xffConfig), clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:1")},
		map[string][]string{"X-Forwarded-For": {"198.51.100.7\xff, 10.0.0.2"}})
	var text bytes.Buffer
	require.NoError(t, rep.WriteWalk(&text))
	assert.Contains(t, text.String(), " \"198.51.100.7\uFFFD\" ")
	assert.NotContains(t, text.String(), `\"`)
}

// roundTrip encodes rep as JSON and decodes it, as cmd/sourceip -fetch
// does, and requires the decoded report to render the same text. It
// returns the document, the decoded report and the text.
func roundTrip(t testing.TB, rep Report) (js []byte, back Report, text string) {
	t.Helper()
	js, err := json.Marshal(&rep)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(js, &back))
	var a, b bytes.Buffer
	require.NoError(t, rep.WriteText(&a))
	require.NoError(t, back.WriteText(&b))
	require.Equal(t, a.String(), b.String(), "the decoded document renders the same text")
	return js, back, a.String()
}

// Format characters that are not bidirectional overrides also act on what a
// terminal shows: a zero-width space or a tag character hides text, a line
// separator breaks it. Text that holds only them, without a control
// character beside them, was printed as it was: the printer's rule listed
// the overrides alone, where cmd/sourceip's listed every format character.
// One rule (termtext) now serves both.
func TestTextFormatCharactersAreEscaped(t *testing.T) {
	for _, s := range []string{"zero\u200bwidth", "tag \U000E0001", "line\u2028separator", "soft\u00adhyphen", "bom \ufeff"} {
		rep := Report{Schema: Schema, Kind: "request", Summary: s, Notes: []string{s}}
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		checkText(t, "the rendering of "+strconv.Quote(s), text.Bytes())
	}
}
