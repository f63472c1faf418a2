package explain

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// fuzzConfigs are the resolver configurations the fuzz targets explain
// under: proxy sets, hop counts, masquerading nodes, IPv6.
var fuzzConfigs = []clientip.Config{
	{TrustedProxies: proxies10},
	{TrustedHops: 1},
	{TrustedHops: 2, TrustedProxies: proxies10},
	{TrustedProxies: proxies10, MaxHops: 3},
	{TrustedProxies: proxies10, TrustUnixSocket: true, Masquerade: clientip.MustParsePrefixSet("192.0.2.0/24, 2001:db8::/64")},
	{TrustedProxies: proxies10, Masquerade: clientip.MustParsePrefixSet("10.0.0.0/16, 198.51.100.0/24")},
	{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8, 2001:db8:1::/48, fe80::/10, fd00::/8, 64:ff9b::/96, 2002::/16")},
	{},
}

var fuzzHeaders = []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "Cf-Connecting-Ip"}

// fuzzRemotes are socket peers as http.Request.RemoteAddr carries them,
// including what other middleware may have rewritten it to.
var fuzzRemotes = []string{
	"10.0.0.1:40000", "[::ffff:10.0.0.1]:40000", "203.0.113.9:1", "[2001:db8:1::5]:443", "[fe80::1%eth0]:8080",
	"192.0.2.7:1", "[64:ff9b::a00:1]:1", "not-an-address", "", "@", "198.51.100.7",
}

// fuzzSeeds are header values from the tests of this package and of
// clientip, and hostile shapes.
var fuzzSeeds = []string{
	"198.51.100.7", "6.6.6.6, 198.51.100.7, 10.0.0.2", "198.51.100.7, not-an-ip, 10.0.0.2", "10.0.0.5",
	"2001:db8:9::1, 2001:db8:1::2", "::ffff:10.0.0.2", "fe80::5%eth0", "[fe80::5%eth0]:8080", "0.0.0.0", "::",
	"for=192.0.2.60;proto=http;by=203.0.113.43", `for="[2001:db8:cafe::17]:4711", for=10.0.0.9`, "for=unknown",
	"for=_hidden", `for="1.1.1.1, for=192.0.2.60`, "\x1b[2J\x1b[H198.51.100.7, 10.0.0.2", "198.51.100.7\n10.0.0.1",
	"\u202e198.51.100.7", "\xff\xfe", strings.Repeat("10.1.2.3, ", 80), "2002:c000:204::1", "64:ff9b::c000:207",
	"192.0.2.3", "198.51.100.7:8080, [2001:db8::7]:443",
}

// checkReport checks a report against the resolution it explains: the
// same answer, verdicts that agree with where the walk stopped, a JSON
// document that decodes to the same report, and text that is safe for a
// terminal and bounded.
func checkReport(t *testing.T, rep Report, cfg clientip.Config, res clientip.Result, err error) {
	t.Helper()
	require.Equal(t, resultInfo(cleanResultPeer(res)), rep.Result, "the report's answer is the resolver's")
	require.Equal(t, err == nil, rep.Error == nil, "the report fails when the resolver does: %v", err)
	if err != nil {
		require.Equal(t, clientip.ReasonOf(err), rep.Error.Reason)
	}
	require.Equal(t, res.Masqueraded, rep.Masqueraded)

	at := 0
	for i, s := range rep.Steps {
		switch {
		case s.Hop < res.Hop:
			require.Equal(t, clientip.VerdictTrusted, s.Verdict, "step %d before the stop: %+v", i, rep.Steps)
		case s.Hop > res.Hop:
			require.Equal(t, clientip.VerdictUnread, s.Verdict, "step %d beyond the stop: %+v", i, rep.Steps)
		default:
			at++
			if s.Verdict == clientip.VerdictClient {
				require.Nil(t, err)
				require.Equal(t, res.Client, s.Address, "the client step names the answer")
				require.Contains(t, s.Note, "client")
			}
		}
		if s.Verdict == clientip.VerdictTrusted {
			require.NotContains(t, s.Note, "the client", "a trusted hop's note: %+v", s)
			if cfg.TrustedHops == 0 && s.Address.IsValid() {
				require.True(t, cfg.TrustedProxies.Contains(s.Address), "a trusted hop outside TrustedProxies: %+v", s)
			}
		}
		if s.Verdict == clientip.VerdictClient && cfg.TrustedHops == 0 && s.Address.IsValid() && !rep.Socket.JudgedUntrusted {
			require.False(t, cfg.TrustedProxies.Contains(s.Address), "a client inside TrustedProxies: %+v", s)
		}
		if s.Hop > 0 && s.Verdict != clientip.VerdictUnread {
			require.NotNil(t, s.DeliveredBy, "a read hop with no deliverer: %+v", s)
			require.True(t, s.DeliveredBy.Trusted, "a hop was read though its deliverer is not trusted: %+v", s)
		}
		if s.Verdict == clientip.VerdictUnread && s.DeliveredBy != nil {
			require.False(t, s.DeliveredBy.Trusted && s.DeliveredBy.Hop < res.Hop, "an unread hop delivered by a trusted one: %+v", s)
		}
	}
	require.Positive(t, at, "no step at the hop where the walk stopped (%d): %+v", res.Hop, rep.Steps)

	js, _, text := roundTrip(t, rep)
	require.True(t, json.Valid(js))
	require.Less(t, len(js), 512<<10, "JSON size")
	require.Less(t, len(text), 256<<10, "text size")
	checkText(t, "the text rendering", []byte(text))
}

func FuzzReport(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, "", fuzzRemotes[i%len(fuzzRemotes)], "mqtt.example.com", uint8(i), uint8(i/3))
		f.Add("10.0.0.9", s, fuzzRemotes[(i+3)%len(fuzzRemotes)], "\x1b[31m", uint8(0x80|i*7), uint8(i))
	}
	f.Add("198.51.100.7", "", "[fe80::1%\x1b[2J]:80", "", uint8(0), uint8(0))
	f.Add("198.51.100.7", "", "fe80::1%\x1b]0;owned\x07", "", uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, line1, line2, remote, tlv string, sel, sel2 uint8) {
		cfg := fuzzConfigs[int(sel)%len(fuzzConfigs)]
		cfg.Header = fuzzHeaders[int(sel/8)%len(fuzzHeaders)]
		if sel2&1 != 0 {
			cfg.Header = ""
		}
		r, err := clientip.New(cfg)
		if err != nil { // a header with nothing trusted to deliver it
			cfg.Header = ""
			r = clientip.MustNew(cfg)
		}
		cfg = r.Config()

		req := httptest.NewRequest("GET", "/debug/clientip", nil)
		req.RemoteAddr = remote
		name := http.CanonicalHeaderKey(fuzzHeaders[int(sel/32)%len(fuzzHeaders)])
		req.Header[name] = []string{line1}
		if sel&0x80 != 0 {
			req.Header[name] = append(req.Header[name], line2)
		}
		if sel2&2 != 0 {
			req.Header.Set("X-Real-Ip", line2)
		}
		if sel2&4 != 0 {
			facts := proxyproto.Facts{Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort("198.51.100.77:1")}
			if sel2&8 != 0 {
				facts.Command = proxyproto.CommandLocal
				facts.Source = netip.AddrPort{}
			}
			if tlvs, err := proxyproto.NewTLVs(proxyproto.TLV{Type: proxyproto.TLVAuthority, Value: tlv}); err == nil {
				facts.TLVs = tlvs
			}
			if ap, err := netip.ParseAddrPort(remote); err == nil {
				facts.Peer = ap
			}
			facts.PeerUntrusted = sel2&16 != 0
			req = req.WithContext(proxyproto.NewContext(req.Context(), facts))
		}
		res, rerr := r.ResolveRequest(req)

		hc := Config{Trust: r}
		if sel2&32 != 0 {
			hc.Policy = &trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: trafficpolicy.ExternalLocal, Path: trafficpolicy.PathLoadBalancer, LB: trafficpolicy.LBProxyProtocol, LocalEndpoint: true}
			hc.Network = trafficpolicy.Network{Nodes: clientip.MustParsePrefixSet("10.1.0.0/24"), LoadBalancers: clientip.MustParsePrefixSet("192.0.2.10/31")}
		}
		h, err := New(hc)
		require.NoError(t, err)
		rep := h.Report(req)
		checkReport(t, rep, cfg, res, rerr)

		// The chain form, as cmd/sourceip builds it.
		tr, _ := clientip.TransportFromContext(req.Context())
		if ap, err := netip.ParseAddrPort(remote); err == nil && !tr.Peer.IsValid() {
			tr.Peer = ap
		}
		res, rerr = r.Resolve(tr, req.Header)
		checkReport(t, ReportFor(r, tr, req.Header), cfg, res, rerr)

		// The Advisor watches the same request, and its advice is a
		// valid configuration, valid JSON and safe text.
		a, err := NewAdvisor(AdvisorConfig{Trust: r, MinClients: 1, Nodes: clientip.MustParsePrefixSet("192.0.2.0/24")})
		require.NoError(t, err)
		for i := range 3 {
			a.ObserveRequestAt(t0.Add(time.Duration(i)*time.Second), req)
		}
		adv := a.Advice()
		_, err = clientip.New(adv.Config)
		require.NoError(t, err, "the proposal is a valid configuration")
		js, err := json.Marshal(&adv)
		require.NoError(t, err)
		require.True(t, json.Valid(js))
		var text bytes.Buffer
		require.NoError(t, adv.WriteText(&text))
		checkText(t, "the advice", text.Bytes())
	})
}

// TestReportMatchesResolve runs the fuzz target's checks over every seed,
// configuration and header, each seed from two of the socket peers.
func TestReportMatchesResolve(t *testing.T) {
	for ci := range fuzzConfigs {
		for hi := range fuzzHeaders {
			cfg := fuzzConfigs[ci]
			cfg.Header = fuzzHeaders[hi]
			r, err := clientip.New(cfg)
			if err != nil { // a header with nothing trusted to deliver it
				cfg.Header = ""
				r = clientip.MustNew(cfg)
			}
			h, err := New(Config{Trust: r})
			require.NoError(t, err)
			for si, s := range fuzzSeeds {
				for li, lines := range [][]string{{s}, {s, "10.0.0.9"}, {"198.51.100.3", s}} {
					for _, remote := range []string{fuzzRemotes[(si+li+ci+hi)%len(fuzzRemotes)], fuzzRemotes[(si+ci)%3]} {
						req := httptest.NewRequest("GET", "/", nil)
						req.RemoteAddr = remote
						req.Header[http.CanonicalHeaderKey(cfg.Header)] = lines
						res, rerr := r.ResolveRequest(req)
						checkReport(t, h.Report(req), r.Config(), res, rerr)
					}
				}
			}
		}
	}
}

// fuzzPeers are the socket peers FuzzAdvisor's traffic comes from:
// internal proxies, public addresses, nodes, IPv4-mapped, NAT64 and Unix.
var fuzzPeers = []netip.AddrPort{
	netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1"),
	netip.MustParseAddrPort("203.0.113.66:1"), netip.MustParseAddrPort("[2001:db8::66]:1"),
	netip.MustParseAddrPort("192.0.2.7:1"), netip.MustParseAddrPort("[::ffff:10.0.0.1]:1"),
	netip.MustParseAddrPort("[64:ff9b::cb00:7142]:1"), {},
}

// FuzzAdvisor feeds an Advisor a sequence of observations driven by ops
// (one byte each: peer, header kind, a PROXY source, which value) and
// checks its advice: a valid configuration, a JSON document that decodes
// to the same advice, safe text, and no trust for a peer that never sent a
// forwarding or PROXY header (unless a proxy names it as the layer behind
// it), nor for a public peer outside every
// platform's ranges that names its clients in forwarding headers only.
func FuzzAdvisor(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, "198.51.100.7", "203.0.113.9, 10.0.0.3")
	f.Add([]byte{0x12, 0x12, 0x12, 0x52, 0x92}, "for=198.51.100.7", "\x1b[2J")
	f.Fuzz(func(t *testing.T, ops []byte, v1, v2 string) {
		if len(ops) > 512 {
			ops = ops[:512]
		}
		a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(clientip.Config{}), MinClients: 1,
			Nodes: clientip.MustParsePrefixSet("192.0.2.0/24")})
		require.NoError(t, err)
		headerless := map[netip.Addr]bool{} // peers that never sent a header
		for i, op := range ops {
			peer := fuzzPeers[int(op)%len(fuzzPeers)]
			h := http.Header{}
			v := v1
			if op&0x80 != 0 {
				v = v2
			}
			switch op >> 3 & 3 {
			case 1:
				h.Set("X-Forwarded-For", v)
			case 2:
				h.Set("Forwarded", v)
			case 3:
				h.Set("X-Real-Ip", v)
			}
			tr := clientip.Transport{Peer: peer}
			if op&0x20 != 0 {
				tr.Proxy = netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 1)
			}
			key := peer.Addr().Unmap()
			if _, seen := headerless[key]; !seen {
				headerless[key] = true
			}
			if len(h) > 0 || tr.Proxy.IsValid() {
				headerless[key] = false
			}
			a.ObserveAt(t0.Add(time.Duration(i)*time.Millisecond), tr, h)
		}
		adv := a.Advice()
		_, err = clientip.New(adv.Config)
		require.NoError(t, err, "the proposal is a valid configuration")
		for _, p := range adv.Peers {
			for _, u := range p.Upstreams {
				delete(headerless, u) // a fixed layer behind a proxy may also connect directly
			}
		}
		for addr, none := range headerless {
			if none && addr.IsValid() {
				require.False(t, adv.Config.TrustedProxies.Contains(addr), "a peer that never sent a header is trusted:\n%s", adv.Go)
			}
		}
		for _, p := range adv.Peers {
			if adv.Config.TrustedProxies.Contains(p.Address) && a.forgeable(&peerStats{addr: p.Address, n: p.Requests, proxy: p.ProxyProtocol}) {
				t.Fatalf("a public peer that names its clients in forwarding headers only is trusted: %+v\n%s", p, adv.Go)
			}
		}
		js, err := json.Marshal(&adv)
		require.NoError(t, err)
		var back Advice
		require.NoError(t, json.Unmarshal(js, &back))
		back.Config = adv.Config
		require.Equal(t, adv, back, "the decoded advice is the one served")
		var text bytes.Buffer
		require.NoError(t, adv.WriteText(&text))
		checkText(t, "the advice", text.Bytes())
	})
}

// FuzzDecodedText renders whatever document decodes, as cmd/sourceip
// -fetch does with an endpoint's answer: no panic, and nothing a terminal
// acts on in the text.
func FuzzDecodedText(f *testing.F) {
	golden, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(f, err)
	for _, name := range golden {
		js, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(js)
	}
	f.Add([]byte(`{"schema":"sourceip.advice/v1","peers":[{"address":"fe80::1%\u001b[2J","role":"\u009b31m","depths":[1,2,3]}],"go":"\u202e"}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		var rep Report
		if json.Unmarshal(js, &rep) == nil {
			var text bytes.Buffer
			require.NoError(t, rep.WriteText(&text))
			checkText(t, "a decoded report", text.Bytes())
		}
		var adv Advice
		if json.Unmarshal(js, &adv) == nil {
			var text bytes.Buffer
			require.NoError(t, adv.WriteText(&text))
			checkText(t, "a decoded advice", text.Bytes())
		}
	})
}
