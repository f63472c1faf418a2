package explain

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// checkText fails t when text holds a byte a terminal acts on: a control
// character other than a newline or a tab, DEL, a C1 control, a bidirectional
// override, or invalid UTF-8.
func checkText(t *testing.T, what string, text []byte) {
	t.Helper()
	require.True(t, utf8.Valid(text), "%s is not valid UTF-8:\n%s", what, text)
	for _, c := range string(text) {
		bad := c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f && c <= 0x9f || c >= 0x202a && c <= 0x202e || c >= 0x2066 && c <= 0x2069
		require.False(t, bad, "%s holds %U:\n%s", what, c, text)
	}
}

// A RemoteAddr that other middleware rewrote from a client's header (as
// gorilla/handlers.ProxyHeaders does, unchecked) may be a link-local IPv6
// address whose zone is anything at all: netip parses "fe80::1%\x1b[2J".
// The zone reaches the socket peer, the summary, the notes and the policy
// checks; the text rendering escapes it.
func TestTextZonedPeerIsEscaped(t *testing.T) {
	for _, remote := range []string{"[fe80::1%\x1b[2J\x1b[H]:80", "fe80::1%\x1b]0;owned\x07", "[fe80::1%\u202e1.0.0.01]:80", "[fe80::1%\r\n]:80"} {
		h, err := New(Config{Trust: clientip.MustNew(xffConfig)})
		require.NoError(t, err)
		req := request(remote, "198.51.100.7")
		rep := h.Report(req)
		require.NotEmpty(t, rep.Socket.Peer.Addr().Zone(), "the peer keeps its zone: %q", remote)
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		checkText(t, "the text rendering of "+remote, text.Bytes())
		assert.Contains(t, text.String(), "socket:  peer [fe80::1%")
	}
}

// A Report or Advice decoded from JSON (cmd/sourceip -fetch) holds
// whatever the document held; its text rendering escapes what a terminal
// would act on in every field, not only in those a client writes.
func TestTextDecodedDocumentIsEscaped(t *testing.T) {
	evil := "\x1b[2J\x1b]0;owned\x07\r\u202e\u0085"
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
