package clientip

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkExplain checks Explain against Resolve on one input: the same Result
// and error, verdicts that follow from where the walk stopped, every entry
// the walk read listed as it read it, and the header's entries as the
// reference walker splits and parses them.
func checkExplain(t *testing.T, cfg Config, tr Transport, h http.Header) {
	r, err := New(cfg)
	require.NoError(t, err)
	res, err := r.Resolve(tr, h)
	x := r.Explain(tr, h)
	msg := []any{"cfg %+v, transport %v, header %q", cfg, tr, h}
	require.Equal(t, res, x.Result, msg...)
	require.Equal(t, err, x.Err, msg...)
	require.Nil(t, r.trace, "Explain changed the Resolver")

	require.NotEmpty(t, x.Steps, msg...)
	require.Equal(t, SourceSocket, x.Steps[0].Layer, msg...)
	at := 0 // steps on the hop where the walk stopped
	for i, s := range x.Steps {
		if i > 0 {
			require.LessOrEqual(t, x.Steps[i-1].Hop, s.Hop, "steps out of order: %+v", x.Steps)
		}
		switch {
		case s.Hop < res.Hop:
			require.Equal(t, VerdictTrusted, s.Verdict, "step %+v before the stop", s)
		case s.Hop > res.Hop:
			require.Equal(t, VerdictUnread, s.Verdict, "step %+v after the stop", s)
		default:
			at++
			v, why := verdictAt(ReasonOf(err))
			require.Equal(t, v, s.Verdict, "step %+v at the stop", s)
			require.Equal(t, why, s.Reason, "step %+v at the stop", s)
			if s.Verdict == VerdictClient || s.Verdict == VerdictMasqueraded {
				require.Equal(t, res.Client, s.Addr, "the step the walk ended on names the client")
			}
		}
		if s.Layer.FromHeader() {
			require.Equal(t, r.header, s.Header)
		}
	}
	require.Positive(t, at, "no step at hop %d: %+v", res.Hop, x.Steps)

	// Every entry the walk read is listed as the walk read it, in order.
	rc := *r
	rc.trace, rc.quads, rc.quads6 = new(trace), false, false
	rc.Resolve(tr, h)
	k := 0
	for _, s := range x.Steps {
		if k < len(rc.trace.steps) && s.Layer.FromHeader() && s.Hop == rc.trace.steps[k].Hop {
			require.Equal(t, rc.trace.steps[k].Entry, s.Entry, "hop %d", s.Hop)
			require.Equal(t, rc.trace.steps[k].Addr, s.Addr, "hop %d", s.Hop)
			k++
		}
	}
	require.Equal(t, len(rc.trace.steps), k, "entries the walk read are missing: %+v; steps %+v", rc.trace.steps, x.Steps)
	// ... and every entry the walk stepped over or ended on came from the walk.
	believed := 0
	for _, s := range x.Steps {
		if s.Layer.FromHeader() && s.Verdict != VerdictUnread && s.Verdict != VerdictFailed {
			believed++
		}
	}
	require.Equal(t, believed, len(rc.trace.steps), "steps the walk did not read: %+v", x.Steps)

	// The header's entries, as the reference walker splits and parses them.
	if r.kind == headerXFF || r.kind == headerForwarded {
		lines := h[r.header]
		var ref []refHop
		ok := true
		if r.kind == headerXFF {
			ref = refXFF(lines)
		} else {
			ref, ok = refForwarded(lines)
		}
		if ok && ReasonOf(err) != ReasonHeaderTooLarge {
			var got []Step
			for _, s := range x.Steps {
				if s.Layer.FromHeader() {
					got = append(got, s)
				}
			}
			listed := min(len(ref), maxEntriesListed, maxHopsLimit)
			if r.kind == headerXFF {
				listed = min(len(ref), maxEntriesListed)
			}
			require.Equal(t, len(ref)-listed, x.Omitted, "omitted entries")
			for i, s := range got {
				if i >= listed {
					// The walk stopped beyond the bound; its step has no entry.
					require.Equal(t, res.Hop, s.Hop)
					break
				}
				require.Equal(t, ref[i].text, s.Entry, "entry %d", i)
				want := ref[i].addr
				if ref[i].fail != ReasonNone && ref[i].fail != ReasonUnspecified {
					want = netip.Addr{}
				}
				require.Equal(t, want, s.Addr, "entry %d %q", i, s.Entry)
			}
		}
	}
}

// explainTransports are the fuzz transports and peers a PROXY listener
// judged untrusted.
var explainTransports = append(append([]Transport(nil), fuzzTransports...),
	Transport{Peer: ap("10.0.0.1:40000"), PeerUntrusted: true},
	Transport{Peer: ap("10.0.0.1:40000"), Proxy: ap("10.0.0.2:1"), PeerUntrusted: true},
	Transport{PeerUntrusted: true},
)

// TestExplainMatchesResolve runs checkExplain on every fuzz seed, under every
// fuzz configuration and transport, in each header: one line, and two.
func TestExplainMatchesResolve(t *testing.T) {
	seeds := append(append([]string(nil), fuzzSeeds...), longSeeds...)
	for _, header := range []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"} {
		for ci, cfg := range fuzzConfigs {
			cfg.Header = header
			for _, tr := range explainTransports {
				for _, s := range seeds {
					checkExplain(t, cfg, tr, http.Header{header: {s}})
					checkExplain(t, cfg, tr, http.Header{header: {s, "10.0.0.9"}})
					checkExplain(t, cfg, tr, http.Header{header: {"198.51.100.3", s}})
				}
				if t.Failed() {
					t.Fatalf("%s, config %d", header, ci)
				}
			}
		}
	}
	// Without a header, and with limits reached.
	for _, cfg := range fuzzConfigs {
		for _, tr := range explainTransports {
			checkExplain(t, cfg, tr, nil)
		}
	}
	long := strings.Repeat("10.1.2.3, ", 80) + "10.0.0.2"
	checkExplain(t, Config{TrustedProxies: private10, Header: "X-Forwarded-For", MaxHops: 64}, fuzzTransports[0], xff(long))
	checkExplain(t, Config{TrustedProxies: private10, Header: "Forwarded", MaxHops: 64}, fuzzTransports[0], fwd(strings.Repeat("for=10.1.2.3, ", 80)))
	checkExplain(t, Config{TrustedProxies: private10, Header: "X-Forwarded-For", MaxHeaderBytes: 16}, fuzzTransports[0], xff(long))
}

func FuzzExplain(f *testing.F) {
	for _, s := range append(fuzzSeeds, longSeeds...) {
		f.Add(s, "", uint8(0))
		f.Add("6.6.6.6", s, uint8(3))
		f.Add(s, "10.0.0.9", uint8(146))
	}
	headers := []string{"X-Forwarded-For", "Forwarded", "X-Real-IP"}
	f.Fuzz(func(t *testing.T, line1, line2 string, sel uint8) {
		cfg := fuzzConfigs[int(sel)%len(fuzzConfigs)]
		cfg.Header = headers[int(sel/48)%len(headers)]
		tr := explainTransports[int(sel/8)%len(explainTransports)]
		lines := []string{line1}
		if sel&0x80 != 0 {
			lines = append(lines, line2)
		}
		checkExplain(t, cfg, tr, http.Header{http.CanonicalHeaderKey(cfg.Header): lines})
	})
}

// stepsOf renders steps compactly for the tests below.
func stepsOf(x Explanation) []string {
	var out []string
	for _, s := range x.Steps {
		line := s.Layer.String() + " " + s.Verdict.String()
		if s.Entry != "" {
			line += " " + s.Entry
		} else if s.Addr.IsValid() {
			line += " " + s.Addr.String()
		}
		if s.Reason != ReasonNone {
			line += " (" + s.Reason.String() + ")"
		}
		out = append(out, line)
	}
	return out
}

func TestExplain(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		t    Transport
		h    http.Header
		want []string
	}{
		{name: "spoof: a direct client's forged X-Forwarded-For is listed unread",
			cfg: xffCfg(), t: Transport{Peer: ap("203.0.113.9:1")}, h: xff("127.0.0.1, 10.0.0.2"),
			want: []string{"socket client 203.0.113.9", "x-forwarded-for unread 10.0.0.2", "x-forwarded-for unread 127.0.0.1"}},
		{name: "spoof: the left of X-Forwarded-For behind two proxies is unread",
			cfg: xffCfg(), t: proxyPeer, h: xff("6.6.6.6, 198.51.100.20", "10.0.0.3"),
			want: []string{"socket trusted 10.0.0.1", "x-forwarded-for trusted 10.0.0.3",
				"x-forwarded-for client 198.51.100.20", "x-forwarded-for unread 6.6.6.6"}},
		{name: "PROXY source from a trusted load balancer",
			cfg: Config{TrustedProxies: lbSet, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.9:2")},
			h:    xff("1.2.3.4"),
			want: []string{"socket trusted 192.0.2.10", "proxy-protocol client 198.51.100.9", "x-forwarded-for unread 1.2.3.4"}},
		{name: "a malformed hop stops the walk; nothing beyond it is read",
			cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7, garbage, 10.0.0.2"),
			want: []string{"socket trusted 10.0.0.1", "x-forwarded-for trusted 10.0.0.2",
				"x-forwarded-for failed garbage (malformed)", "x-forwarded-for unread 198.51.100.7"}},
		{name: "every hop trusted",
			cfg: xffCfg(), t: proxyPeer, h: xff("10.0.0.5, 10.0.0.6"),
			want: []string{"socket trusted 10.0.0.1", "x-forwarded-for trusted 10.0.0.6", "x-forwarded-for trusted 10.0.0.5"}},
		{name: "masquerading node as the socket peer",
			cfg: Config{Masquerade: MustParsePrefixSet("192.0.2.0/28")}, t: Transport{Peer: ap("192.0.2.3:61000")},
			want: []string{"socket masqueraded 192.0.2.3 (masqueraded)"}},
		{name: "a header too large is not listed",
			cfg: Config{TrustedProxies: private10, Header: "X-Forwarded-For", MaxHeaderBytes: 8}, t: proxyPeer, h: xff("198.51.100.7, 10.0.0.2"),
			want: []string{"socket trusted 10.0.0.1", "x-forwarded-for failed (header_too_large)"}},
		{name: "a second value of a single-address header",
			cfg: Config{TrustedProxies: private10, Header: "X-Real-IP"}, t: proxyPeer, h: http.Header{"X-Real-Ip": {"198.51.100.7", "6.6.6.6"}},
			want: []string{"socket trusted 10.0.0.1", "header failed 198.51.100.7 (multiple_values)", "header failed 6.6.6.6 (multiple_values)"}},
		{name: "an untrusted Unix peer",
			cfg: xffCfg(), t: Transport{}, h: xff("198.51.100.7"),
			want: []string{"socket failed (no_address)", "x-forwarded-for unread 198.51.100.7"}},
		{name: "spoof: a peer the PROXY listener judged untrusted stays the client after a trust change",
			cfg: xffCfg(), t: Transport{Peer: ap("10.0.0.1:40000"), PeerUntrusted: true}, h: xff("198.51.100.7"),
			want: []string{"socket client 10.0.0.1", "x-forwarded-for unread 198.51.100.7"}},
		{name: "hop-count mode counts, whatever the addresses",
			cfg: Config{TrustedHops: 2, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("203.0.113.1:1")}, h: xff("6.6.6.6, 198.51.100.7, 203.0.113.2"),
			want: []string{"socket trusted 203.0.113.1", "x-forwarded-for trusted 203.0.113.2",
				"x-forwarded-for client 198.51.100.7", "x-forwarded-for unread 6.6.6.6"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := MustNew(tc.cfg)
			x := r.Explain(tc.t, tc.h)
			assert.Equal(t, tc.want, stepsOf(x))
			res, err := r.Resolve(tc.t, tc.h)
			assert.Equal(t, res, x.Result)
			assert.Equal(t, err, x.Err)
			assert.Equal(t, ReasonOf(err), x.Reason())
			assert.Equal(t, tc.t.PeerUntrusted, x.PeerUntrusted)
		})
	}
}

func TestExplainRequest(t *testing.T) {
	r := MustNew(xffCfg())
	req, _ := http.NewRequest("GET", "http://example/", nil)
	req.RemoteAddr = "10.0.0.1:4000"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.7")
	check := func(req *http.Request, r *Resolver, want []string) {
		t.Helper()
		x := r.ExplainRequest(req)
		res, err := r.ResolveRequest(req)
		assert.Equal(t, res, x.Result)
		assert.Equal(t, err, x.Err)
		assert.Equal(t, want, stepsOf(x))
	}
	check(req, r, []string{"socket trusted 10.0.0.1", "x-forwarded-for client 198.51.100.7", "x-forwarded-for unread 6.6.6.6"})

	lb := MustNew(Config{TrustedProxies: lbSet})
	viaLB := req.Clone(NewTransportContext(req.Context(), Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.9:2")}))
	check(viaLB, lb, []string{"socket trusted 192.0.2.10", "proxy-protocol client 198.51.100.9"})

	garbled := req.Clone(req.Context())
	garbled.RemoteAddr = "not-an-address"
	check(garbled, r, []string{"socket failed not-an-address (no_address)", "x-forwarded-for unread 198.51.100.7", "x-forwarded-for unread 6.6.6.6"})

	unix := req.Clone(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"}))
	check(unix, MustNew(Config{TrustUnixSocket: true, Header: "X-Forwarded-For"}),
		[]string{"socket trusted", "x-forwarded-for client 198.51.100.7", "x-forwarded-for unread 6.6.6.6"})
}

func TestVerdictText(t *testing.T) {
	for v := VerdictNone; v <= VerdictUnread; v++ {
		b, err := v.MarshalText()
		require.NoError(t, err)
		var back Verdict
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, v, back)
	}
	_, err := Verdict(99).MarshalText()
	assert.ErrorIs(t, err, errUnknownName)
	assert.Equal(t, "Verdict(99)", Verdict(99).String())
}

// Resolve stays free of allocations with the trace in the Resolver; Explain
// allocates and is not for every request.
func TestExplainLeavesResolveAlone(t *testing.T) {
	r := MustNew(xffCfg())
	h := xff("198.51.100.7, 10.0.0.2")
	r.Explain(proxyPeer, h)
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.Resolve(proxyPeer, h) }))
}
