package middleware

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sourceip/sourceip/clientip"
)

var office = clientip.MustParsePrefixSet("198.51.100.0/24, 2001:db8::/32")

func TestSourceRangesCheck(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{Allow: office})
	if err != nil {
		t.Fatal(err)
	}
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
			err := p.Check(tc.res, tc.err)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
			} else if err == nil {
				t.Fatalf("Check admitted %v", tc.res)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("Check = %v, does not match %v", err, w)
				}
			}
			if got := OutcomeOf(err); got != tc.outcome {
				t.Errorf("OutcomeOf = %v, want %v", got, tc.outcome)
			}
		})
	}
}

func TestSourceRangesZeroAdmitsNobody(t *testing.T) {
	p, err := NewSourceRanges(SourceRangesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "198.51.100.7", "::1"} {
		if err := p.Check(clientip.Result{Client: netip.MustParseAddr(a), Source: clientip.SourceSocket}, nil); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("zero policy: Check(%s) = %v, want ErrNotAllowed", a, err)
		}
	}
}

func TestSourceRangesZeroValue(t *testing.T) {
	var p SourceRanges
	mw, _ := New(Config{Resolver: testResolver(t)})
	rec := httptest.NewRecorder()
	mw(p.Handler(echo)).ServeHTTP(rec, request("198.51.100.7:5000"))
	if rec.Code != http.StatusForbidden {
		t.Errorf("zero SourceRanges: %d %q, want 403", rec.Code, rec.Body.String())
	}
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
		{name: "without the resolve middleware", req: request("198.51.100.7:5000"), mount: false,
			wantCode: 403, wantBody: "forbidden: the client address could not be determined\n", wantErr: ErrNoResult},
	}
	// The masqueraded node must be refused even when its range is allowed.
	allow := office.Union(clientip.MustParsePrefixSet("192.168.0.0/16"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			p, err := NewSourceRanges(SourceRangesConfig{Allow: allow, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			h := p.Handler(echo)
			if tc.mount {
				mw, err := New(Config{Resolver: testResolver(t)})
				if err != nil {
					t.Fatal(err)
				}
				h = mw(h)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tc.req)
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Errorf("response = %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			got := obs.take()
			if tc.wantErr == nil {
				if len(got) != 0 {
					t.Errorf("observed %+v for an admitted request", got)
				}
				return
			}
			if rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
			}
			if len(got) != 1 || got[0].kind != "deny" || !errors.Is(got[0].err, tc.wantErr) {
				t.Errorf("observed %+v, want one deny with %v", got, tc.wantErr)
			}
		})
	}
}

func TestSourceRangesOnDeny(t *testing.T) {
	var gotErr error
	var gotRes clientip.Result
	p, _ := NewSourceRanges(SourceRangesConfig{Allow: office, OnDeny: func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) {
		gotRes, gotErr = res, err
		http.NotFound(w, r)
	}})
	mw, _ := New(Config{Resolver: testResolver(t)})
	rec := httptest.NewRecorder()
	mw(p.Handler(echo)).ServeHTTP(rec, request("10.0.0.1:5000", "203.0.113.9"))
	if rec.Code != http.StatusNotFound || !errors.Is(gotErr, ErrNotAllowed) || gotRes.Client != addr("203.0.113.9") {
		t.Errorf("OnDeny: code %d, err %v, res %v", rec.Code, gotErr, gotRes)
	}
}

func TestSourceRangesCheckRequest(t *testing.T) {
	p, _ := NewSourceRanges(SourceRangesConfig{Allow: office})
	r := request("198.51.100.7:5000")
	if err := p.CheckRequest(r); !errors.Is(err, ErrUnresolved) || !errors.Is(err, ErrNoResult) {
		t.Errorf("CheckRequest without a Result = %v, want ErrUnresolved and ErrNoResult", err)
	}
	res, err := testResolver(t).ResolveRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckRequest(r.WithContext(clientip.NewContext(r.Context(), res))); err != nil {
		t.Errorf("CheckRequest = %v, want nil", err)
	}
}

func TestSourceRangesAllocs(t *testing.T) {
	p, _ := NewSourceRanges(SourceRangesConfig{Allow: office})
	in := clientip.Result{Client: netip.MustParseAddr("198.51.100.7"), Source: clientip.SourceSocket}
	out := clientip.Result{Client: netip.MustParseAddr("203.0.113.9"), Source: clientip.SourceSocket}
	if n := testing.AllocsPerRun(100, func() { p.Check(in, nil) }); n != 0 {
		t.Errorf("admitting Check allocates %v", n)
	}
	if n := testing.AllocsPerRun(100, func() { p.Check(out, nil) }); n != 0 {
		t.Errorf("ErrNotAllowed Check allocates %v", n)
	}
	r := request("198.51.100.7:5000")
	r = r.WithContext(clientip.NewContext(r.Context(), in))
	h := p.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) }); n != 0 {
		t.Errorf("admitting Handler allocates %v", n)
	}
}
