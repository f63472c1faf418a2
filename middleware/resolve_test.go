package middleware

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/sourceip/sourceip/clientip"
)

func TestNewRequiresResolver(t *testing.T) {
	mw, err := New(Config{})
	if !errors.Is(err, ErrInvalidConfig) || mw != nil {
		t.Fatalf("New(Config{}) = %v, %v; want nil, ErrInvalidConfig", mw != nil, err)
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		req      *http.Request
		wantCode int
		wantBody string // exact body
		want     string // client in the context ("" when the request is refused)
		src      clientip.Source
		masq     bool
		wantErr  error // error the observer sees
	}{
		{name: "direct client's forged XFF ignored", req: request("203.0.113.9:5000", "6.6.6.6"),
			wantCode: 200, wantBody: "203.0.113.9", want: "203.0.113.9", src: clientip.SourceSocket},
		{name: "rightmost untrusted XFF entry", req: request("10.0.0.1:5000", "6.6.6.6, 198.51.100.7, 10.0.0.2"),
			wantCode: 200, wantBody: "198.51.100.7", want: "198.51.100.7", src: clientip.SourceXForwardedFor},
		{name: "repeated XFF lines merge", req: request("10.0.0.1:5000", "6.6.6.6", "198.51.100.7"),
			wantCode: 200, wantBody: "198.51.100.7", want: "198.51.100.7", src: clientip.SourceXForwardedFor},
		{name: "IPv6 behind IPv6 proxy", req: request("[fd00::1]:5000", "2001:db8::7"),
			wantCode: 200, wantBody: "2001:db8::7", want: "2001:db8::7", src: clientip.SourceXForwardedFor},
		{name: "masqueraded node passes on flagged", req: request("192.168.1.10:5000"),
			wantCode: 200, wantBody: "192.168.1.10", want: "192.168.1.10", src: clientip.SourceSocket, masq: true,
			wantErr: clientip.ErrMasqueraded},
		{name: "malformed hop is 400", req: request("10.0.0.1:5000", "198.51.100.7, <script>"),
			wantCode: 400, wantBody: "cannot determine the client address: malformed address in X-Forwarded-For\n",
			wantErr: clientip.ErrMalformed},
		{name: "all trusted is 400", req: request("10.0.0.1:5000", "10.0.0.2"),
			wantCode: 400, wantBody: "cannot determine the client address: every hop is a trusted proxy\n",
			wantErr: clientip.ErrAllTrusted},
		{name: "trusted peer without header is 400", req: request("10.0.0.1:5000"),
			wantCode: 400, wantBody: "cannot determine the client address: every hop is a trusted proxy\n",
			wantErr: clientip.ErrAllTrusted},
		{name: "unspecified is 400", req: request("10.0.0.1:5000", "0.0.0.0"),
			wantCode: 400, wantBody: "cannot determine the client address: unspecified address in X-Forwarded-For\n",
			wantErr: clientip.ErrUnspecified},
		{name: "unreadable RemoteAddr is 400", req: request("not-an-address"),
			wantCode: 400, wantBody: "cannot determine the client address: the connection has no IP address\n",
			wantErr: clientip.ErrNoAddress},
		{name: "oversized header is 400", req: request("10.0.0.1:5000", strings.Repeat("1.2.3.4, ", 2000)),
			wantCode: 400, wantBody: "cannot determine the client address: forwarding header too large in X-Forwarded-For\n",
			wantErr: clientip.ErrHeaderTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			mw, err := New(Config{Resolver: testResolver(t), Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			before := *tc.req
			rec := httptest.NewRecorder()
			mw(echo).ServeHTTP(rec, tc.req)
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Errorf("response = %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			if tc.wantCode != 200 {
				if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type = %q", ct)
				}
				if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
					t.Error("no X-Content-Type-Options: nosniff")
				}
			}
			// The caller's request is untouched.
			if tc.req.RemoteAddr != before.RemoteAddr || tc.req.Context() != before.Context() {
				t.Error("middleware modified the caller's request")
			}
			got := obs.take()
			if len(got) != 1 || got[0].kind != "resolve" {
				t.Fatalf("observations = %+v, want one resolve", got)
			}
			o := got[0]
			if !errors.Is(o.err, tc.wantErr) || (tc.wantErr == nil) != (o.err == nil) {
				t.Errorf("observed err = %v, want %v", o.err, tc.wantErr)
			}
			if o.res.Client != addr(tc.want) || o.res.Masqueraded != tc.masq {
				t.Errorf("observed result = %v, want %s masqueraded=%v", o.res, tc.want, tc.masq)
			}
			if tc.want != "" {
				if o.res.Source != tc.src {
					t.Errorf("source = %v, want %v", o.res.Source, tc.src)
				}
				if !o.inCtx || o.ctxRes != o.res {
					t.Errorf("observer context carries %v (%v), want the result", o.ctxRes, o.inCtx)
				}
			} else if o.inCtx {
				t.Error("a failed resolution's context carries a Result")
			}
		})
	}
}

func TestResolveOnError(t *testing.T) {
	var gotRes clientip.Result
	var gotErr error
	mw, err := New(Config{
		Resolver: testResolver(t),
		OnError: func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) {
			gotRes, gotErr = res, err
			w.WriteHeader(http.StatusTeapot)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw(echo).ServeHTTP(rec, request("10.0.0.1:5000", "198.51.100.7, bogus"))
	if rec.Code != http.StatusTeapot {
		t.Errorf("code = %d, want 418", rec.Code)
	}
	var ce *clientip.ChainError
	if !errors.As(gotErr, &ce) || !errors.Is(gotErr, clientip.ErrMalformed) || ce.Header != "X-Forwarded-For" || ce.Hop != 1 {
		t.Errorf("OnError err = %#v, want a ChainError for hop 1 of X-Forwarded-For", gotErr)
	}
	if gotRes.Peer.String() != "10.0.0.1:5000" || gotRes.Client.IsValid() {
		t.Errorf("OnError result = %v", gotRes)
	}
}

func TestResolveSetRemoteAddr(t *testing.T) {
	tests := []struct {
		name string
		req  *http.Request
		want string
	}{
		{name: "socket keeps its port", req: request("203.0.113.9:5000"), want: "203.0.113.9:5000"},
		{name: "header client has port 0", req: request("10.0.0.1:5000", "198.51.100.7"), want: "198.51.100.7:0"},
		{name: "IPv6 header client", req: request("[fd00::1]:5000", "2001:db8::7"), want: "[2001:db8::7]:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, set := range []bool{false, true} {
				mw, err := New(Config{Resolver: testResolver(t), SetRemoteAddr: set})
				if err != nil {
					t.Fatal(err)
				}
				orig := tc.req.RemoteAddr
				var seen string
				mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr })).
					ServeHTTP(httptest.NewRecorder(), tc.req)
				want := orig
				if set {
					want = tc.want
				}
				if seen != want {
					t.Errorf("SetRemoteAddr=%v: handler saw RemoteAddr %q, want %q", set, seen, want)
				}
				if tc.req.RemoteAddr != orig {
					t.Errorf("caller's RemoteAddr changed to %q", tc.req.RemoteAddr)
				}
			}
		})
	}
}

// TestResolveAllocs pins the allocation budget: at most three per resolved
// request (context node, boxed Result, request copy), with and without an
// observer, and one more for SetRemoteAddr.
func TestResolveAllocs(t *testing.T) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	w := httptest.NewRecorder()
	tests := []struct {
		name string
		cfg  Config
		req  *http.Request
		max  float64
	}{
		{name: "direct", cfg: Config{}, req: request("203.0.113.9:5000", "6.6.6.6"), max: 2},
		{name: "xff", cfg: Config{}, req: request("10.0.0.1:5000", "6.6.6.6, 198.51.100.7, 10.0.0.2"), max: 2},
		{name: "masqueraded", cfg: Config{}, req: request("192.168.1.10:5000"), max: 2},
		{name: "observer", cfg: Config{Observer: nopObserver{}}, req: request("10.0.0.1:5000", "198.51.100.7"), max: 2},
		{name: "SetRemoteAddr", cfg: Config{SetRemoteAddr: true}, req: request("10.0.0.1:5000", "198.51.100.7"), max: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Resolver = testResolver(t)
			mw, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := mw(noop)
			n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, tc.req) })
			t.Logf("%v allocations per request", n)
			if n > tc.max {
				t.Errorf("%v allocations per request, want at most %v", n, tc.max)
			}
		})
	}
}

// retainedBody is a request body large enough to matter if it leaked.
type retainedBody struct {
	io.Reader
	big [1 << 16]byte
}

func (*retainedBody) Close() error { return nil }

// A context the handler keeps beyond the request (context.WithoutCancel for
// background audit work, say) must not keep the request, and so its body and
// buffers, reachable: the Result's context node holds no pointer back to the
// request copy. Allocating the two together would save an allocation and break
// this.
func TestContextDoesNotRetainRequest(t *testing.T) {
	mw, err := New(Config{Resolver: testResolver(t)})
	if err != nil {
		t.Fatal(err)
	}
	var kept context.Context
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		kept = context.WithoutCancel(r.Context())
	}))
	body := &retainedBody{Reader: strings.NewReader("")}
	collected := weak.Make(body)
	req := request("10.0.0.1:5000", "198.51.100.7")
	req.Body = body
	h.ServeHTTP(httptest.NewRecorder(), req)
	req, body = nil, nil
	runtime.GC()
	runtime.GC()
	if collected.Value() != nil {
		t.Error("the kept context keeps the request's body reachable")
	}
	if res, ok := clientip.FromContext(kept); !ok || res.Client != addr("198.51.100.7") {
		t.Errorf("kept context: %v, %v", res, ok)
	}
	runtime.KeepAlive(kept)
}
