package middleware

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// FuzzResolve sends hostile RemoteAddr and X-Forwarded-For values through the
// middleware and checks its promises: every request is either served with a
// Result in its context or refused with 400 and one of the fixed reasons; a
// served client is never a trusted proxy (unless flagged as a masquerading
// node), is the peer or appears in the header, and the caller's request is
// never modified.
func FuzzResolve(f *testing.F) {
	for _, s := range []struct{ remote, xff string }{
		{"203.0.113.9:5000", "6.6.6.6"},
		{"10.0.0.1:5000", "6.6.6.6, 198.51.100.7, 10.0.0.2"},
		{"10.0.0.1:5000", "198.51.100.7, <script>alert(1)</script>"},
		{"[fd00::1]:5000", "2001:db8::7, ::ffff:10.0.0.3"},
		{"192.168.1.10:5000", ""},
		{"10.0.0.1:5000", "0.0.0.0"},
		{"10.0.0.1:5000", "198.51.100.7:80, [2001:db8::1]:443"},
		{"not-an-address", "1.2.3.4"},
		{"10.0.0.1:5000", strings.Repeat("10.0.0.9,", 40)},
	} {
		f.Add(s.remote, s.xff)
	}
	r := testResolver(f)
	trusted := r.Config().TrustedProxies
	reasons := map[string]bool{}
	for o := range Outcome(len(outcomeNames)) {
		reasons["cannot determine the client address: "+o.explain("")+"\n"] = true
		reasons["cannot determine the client address: "+o.explain("X-Forwarded-For")+"\n"] = true
	}
	var got clientip.Result
	var served bool
	mw, err := New(Config{Trust: r})
	require.NoError(f, err)
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, served = clientip.FromContext(r.Context())
	}))
	f.Fuzz(func(t *testing.T, remote, xff string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		if xff != "" {
			req.Header["X-Forwarded-For"] = []string{xff}
		}
		ctx := req.Context()
		got, served = clientip.Result{}, false
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, remote, req.RemoteAddr, "the caller's request was modified")
		require.True(t, req.Context() == ctx, "the caller's request was modified")
		switch rec.Code {
		case http.StatusOK:
			require.True(t, served, "served without a Result")
			require.True(t, got.Client.IsValid(), "served without a client: %v", got)
			if !got.Masqueraded {
				require.False(t, trusted.Contains(got.Client), "client %v is a trusted proxy", got.Client)
			}
			if got.Source == clientip.SourceSocket {
				require.Equal(t, got.Peer.Addr().Unmap().WithZone(""), got.Client, "a socket client is the peer")
			} else {
				require.True(t, containsAddr(xff, got.Client), "client %v does not appear in %q", got.Client, xff)
			}
		case http.StatusBadRequest:
			require.False(t, served, "a refused request reached the handler")
			require.True(t, reasons[rec.Body.String()], "400 body %q is not one of the fixed reasons", rec.Body.String())
		default:
			require.Failf(t, "unexpected status", "%d", rec.Code)
		}
	})
}

// containsAddr reports whether one of the comma-separated entries of list is
// a, possibly IPv4-mapped, bracketed or with a port.
func containsAddr(list string, a netip.Addr) bool {
	for e := range strings.SplitSeq(list, ",") {
		e = strings.TrimSpace(e)
		if strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
			e = e[1 : len(e)-1]
		}
		b, err := netip.ParseAddr(e)
		if err != nil {
			ap, err := netip.ParseAddrPort(e)
			if err != nil {
				continue
			}
			b = ap.Addr()
		}
		if b.Unmap() == a {
			return true
		}
	}
	return false
}
