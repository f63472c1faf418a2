package middleware

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

var office = clientip.MustParsePrefixSet("198.51.100.0/24, 2001:db8::/32")

func TestSourceRangesCheck(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office})
	require.NoError(t, err)
	resolved := func(a string) clientip.Result {
		return clientip.Result{Client: netip.MustParseAddr(a), Source: clientip.SourceXForwardedFor}
	}
	malformed := &clientip.ChainError{Hop: 2, Header: "X-Forwarded-For", Value: "x", Err: clientip.ErrMalformed}
	masq := &clientip.ChainError{Hop: 0, Err: clientip.ErrMasqueraded}
	node := clientip.Result{Client: netip.MustParseAddr("198.51.100.9"), Source: clientip.SourceSocket, Masqueraded: true}
	tests := []struct {
		name    string
		res     clientip.Result
		err     error
		want    []error // every error the result must match; nil = admit
		outcome Outcome
	}{
		{name: "inside IPv4 range", res: resolved("198.51.100.7"), outcome: OutcomeResolved},
		{name: "inside IPv6 range", res: resolved("2001:db8::7"), outcome: OutcomeResolved},
		{name: "IPv4-mapped inside", res: resolved("::ffff:198.51.100.7"), outcome: OutcomeResolved},
		{name: "outside", res: resolved("203.0.113.9"), want: []error{ErrNotAllowed}, outcome: OutcomeNotAllowed},
		{name: "IPv4-mapped outside", res: resolved("::ffff:203.0.113.9"), want: []error{ErrNotAllowed}, outcome: OutcomeNotAllowed},
		{name: "resolution failed", err: malformed, want: []error{ErrUnresolved, clientip.ErrMalformed}, outcome: OutcomeUnresolved},
		{name: "all trusted is unresolved", res: clientip.Result{Via: netip.MustParseAddr("198.51.100.1")},
			err: &clientip.ChainError{Err: clientip.ErrAllTrusted}, want: []error{ErrUnresolved, clientip.ErrAllTrusted}, outcome: OutcomeUnresolved},
		{name: "masqueraded node inside the range", res: node, err: masq,
			want: []error{ErrMasqueraded, clientip.ErrMasqueraded}, outcome: OutcomeMasqueraded},
		{name: "masqueraded flag without error", res: node, want: []error{ErrMasqueraded, clientip.ErrMasqueraded}, outcome: OutcomeMasqueraded},
		{name: "masquerade error without flag", res: resolved("198.51.100.7"), err: masq,
			want: []error{ErrMasqueraded}, outcome: OutcomeMasqueraded},
		{name: "zero result without error", want: []error{ErrUnresolved}, outcome: OutcomeUnresolved},
		{name: "connection not from NewListener", err: ErrNoResult, want: []error{ErrUnresolved, ErrNoResult}, outcome: OutcomeUnresolved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Check("", tc.res, tc.err)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err, "Check admitted %v", tc.res)
			}
			for _, w := range tc.want {
				assert.ErrorIs(t, err, w)
			}
			assert.Equal(t, tc.outcome, OutcomeOf(err))
		})
	}
}

// An empty Allow is what an unset flag or environment variable gives: a
// policy that would refuse everyone, so NewSourceRanges refuses it.
func TestNewSourceRangesEmptyAllow(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Nil(t, p)
	_, err = NewSourceRanges(SourceRangesConfig{Allow: clientip.MustParsePrefixSet("")})
	assert.ErrorIs(t, err, ErrInvalidConfig, "an empty parsed set")
	_, err = NewSourceRanges(SourceRangesConfig{Allow: clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")})
	assert.NoError(t, err, "everyone, said explicitly")
}

// The zero Policy, which never went through NewPolicy, fails closed: it
// admits nobody, and names its rule "default".
func TestPolicyZeroValue(t *testing.T) {
	var p Policy
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "198.51.100.7", "::1"} {
		d := p.Decide("/x", clientip.Result{Client: netip.MustParseAddr(a), Source: clientip.SourceSocket}, nil)
		assert.Equal(t, "default", d.Rule)
		err := d.Err
		assert.ErrorIs(t, err, ErrNotAllowed, "Check(%s)", a)
	}
	mw, err := New(Config{Trust: testResolver(t)})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	mw(p.Handler(echo)).ServeHTTP(rec, request("198.51.100.7:5000"))
	assert.Equal(t, http.StatusForbidden, rec.Code, "body %q", rec.Body.String())
}

func TestSourceRangesHandler(t *testing.T) {
	tests := []struct {
		name     string
		req      *http.Request
		mount    bool // behind the resolve middleware
		wantCode int
		wantBody string
		wantErr  error // observed by ObserveDeny; nil = admitted
	}{
		{name: "allowed client via proxy", req: request("10.0.0.1:5000", "198.51.100.7"), mount: true,
			wantCode: 200, wantBody: "198.51.100.7"},
		{name: "allowed client direct", req: request("198.51.100.8:5000"), mount: true,
			wantCode: 200, wantBody: "198.51.100.8"},
		{name: "forged XFF from outside", req: request("203.0.113.9:5000", "198.51.100.7"), mount: true,
			wantCode: 403, wantBody: "forbidden: the client address is not in an allowed source range\n", wantErr: ErrNotAllowed},
		{name: "masqueraded node", req: request("192.168.1.10:5000"), mount: true,
			wantCode: 403, wantBody: "forbidden: the client address was masqueraded by a node and cannot be verified\n", wantErr: ErrMasqueraded},
		{name: "without the resolve middleware or a ConnContext: the server's mistake", req: request("198.51.100.7:5000"), mount: false,
			wantCode: 500, wantBody: "internal server error: the server cannot resolve client addresses\n", wantErr: clientip.ErrNoTrust},
	}
	// The masqueraded node must be refused even when its range is allowed.
	allow := office.Union(clientip.MustParsePrefixSet("192.168.0.0/16"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			p, err := NewSourceRanges(SourceRangesConfig{Allow: allow, Observer: obs})
			require.NoError(t, err)
			h := p.Handler(echo)
			if tc.mount {
				mw, err := New(Config{Trust: testResolver(t)})
				require.NoError(t, err)
				h = mw(h)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.req)
			assert.Equal(t, tc.wantCode, rec.Code)
			assert.Equal(t, tc.wantBody, rec.Body.String())
			got := obs.take()
			if tc.wantErr == nil {
				assert.Empty(t, got, "observed an admitted request")
				return
			}
			assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
			require.Len(t, got, 1)
			assert.Equal(t, "deny", got[0].kind)
			assert.ErrorIs(t, got[0].err, tc.wantErr)
		})
	}
}

func TestSourceRangesOnDeny(t *testing.T) {
	var gotErr error
	var gotRes clientip.Result
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office, OnDeny: func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) {
		gotRes, gotErr = res, err
		http.NotFound(w, r)
	}})
	require.NoError(t, err)
	mw, err := New(Config{Trust: testResolver(t)})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	mw(p.Handler(echo)).ServeHTTP(rec, request("10.0.0.1:5000", "203.0.113.9"))
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.ErrorIs(t, gotErr, ErrNotAllowed)
	assert.Equal(t, addr("203.0.113.9"), gotRes.Client)
}

func TestSourceRangesCheckRequest(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office})
	require.NoError(t, err)
	r := request("198.51.100.7:5000")
	err = p.CheckRequest(r)
	assert.ErrorIs(t, err, ErrUnresolved, "without a Result")
	assert.ErrorIs(t, err, clientip.ErrNoTrust, "without a Result")
	res, err := testResolver(t).ResolveRequest(r)
	require.NoError(t, err)
	assert.NoError(t, p.CheckRequest(r.WithContext(clientip.NewContext(r.Context(), res))))
}

func TestSourceRangesAllocs(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office})
	require.NoError(t, err)
	in := clientip.Result{Client: netip.MustParseAddr("198.51.100.7"), Source: clientip.SourceSocket}
	out := clientip.Result{Client: netip.MustParseAddr("203.0.113.9"), Source: clientip.SourceSocket}
	assert.Zero(t, testing.AllocsPerRun(100, func() { p.Check("", in, nil) }), "admitting Check allocates")
	assert.Zero(t, testing.AllocsPerRun(100, func() { p.Check("", out, nil) }), "ErrNotAllowed Check allocates")
	r := request("198.51.100.7:5000")
	r = r.WithContext(clientip.NewContext(r.Context(), in))
	h := p.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) }), "admitting Handler allocates")
}
