package presets

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	secret    = "s3cr3t-0f-th3-3dg3-2026"
	secretNew = "n3w-s3cr3t-r0tat3d-2027"
)

func withSecret(cfg Config, values ...string) Config {
	cfg.SharedSecret = SharedSecret{Header: "X-Origin-Verify", Values: values}
	return cfg
}

// TestCheck: the Front Door ID and the shared secret, each required
// exactly once with a configured value; errors are typed.
func TestCheck(t *testing.T) {
	azure := MustNew(withSecret(configFor(AzureFrontDoor, Direct()), secret))
	rotating := MustNew(withSecret(configFor(CloudFront, BehindIngress(ingress)), secret, secretNew))
	plain := MustNew(configFor(Cloudflare, Direct()))
	tests := []struct {
		name    string
		p       *Preset
		h       [][2]string
		wantErr error
	}{
		{"azure: ID and secret", azure, [][2]string{{"X-Azure-FDID", fdid}, {"X-Origin-Verify", secret}}, nil},
		{"azure: ID in upper case", azure, [][2]string{{"X-Azure-FDID", strings.ToUpper(fdid)}, {"X-Origin-Verify", secret}}, nil},
		{"azure: ID missing", azure, [][2]string{{"X-Origin-Verify", secret}}, ErrEdgeIdentityMissing},
		{"azure: another profile's ID", azure, [][2]string{{"X-Azure-FDID", "b1b1b1b1-bbbb-cccc-dddd-e1e1e1e1e1e1"}, {"X-Origin-Verify", secret}}, ErrEdgeIdentityMismatch},
		{"azure: empty ID", azure, [][2]string{{"X-Azure-FDID", ""}, {"X-Origin-Verify", secret}}, ErrEdgeIdentityMismatch},
		{"azure: ID twice, ours second", azure, [][2]string{{"X-Azure-FDID", "b1b1b1b1-bbbb-cccc-dddd-e1e1e1e1e1e1"}, {"X-Azure-FDID", fdid}, {"X-Origin-Verify", secret}}, ErrEdgeIdentityMismatch},
		{"azure: ID twice, both ours", azure, [][2]string{{"X-Azure-FDID", fdid}, {"X-Azure-FDID", fdid}, {"X-Origin-Verify", secret}}, ErrEdgeIdentityMismatch},
		{"azure: right ID, secret missing", azure, [][2]string{{"X-Azure-FDID", fdid}}, ErrEdgeIdentityMissing},
		{"azure: right ID, wrong secret", azure, [][2]string{{"X-Azure-FDID", fdid}, {"X-Origin-Verify", secretNew}}, ErrEdgeIdentityMismatch},
		{"secret: old value while rotating", rotating, [][2]string{{"X-Origin-Verify", secret}}, nil},
		{"secret: new value while rotating", rotating, [][2]string{{"X-Origin-Verify", secretNew}}, nil},
		{"secret: missing", rotating, nil, ErrEdgeIdentityMissing},
		{"secret: empty", rotating, [][2]string{{"X-Origin-Verify", ""}}, ErrEdgeIdentityMismatch},
		{"secret: prefix of the secret", rotating, [][2]string{{"X-Origin-Verify", secret[:len(secret)-1]}}, ErrEdgeIdentityMismatch},
		{"secret: secret and more", rotating, [][2]string{{"X-Origin-Verify", secret + "x"}}, ErrEdgeIdentityMismatch},
		{"secret: other case", rotating, [][2]string{{"X-Origin-Verify", strings.ToUpper(secret)}}, ErrEdgeIdentityMismatch},
		{"secret: with spaces around", rotating, [][2]string{{"X-Origin-Verify", " " + secret}}, ErrEdgeIdentityMismatch},
		{"secret: twice", rotating, [][2]string{{"X-Origin-Verify", secret}, {"X-Origin-Verify", secret}}, ErrEdgeIdentityMismatch},
		{"secret: in a list", rotating, [][2]string{{"X-Origin-Verify", secret + ", " + secretNew}}, ErrEdgeIdentityMismatch},
		{"secret: longer than any secret", rotating, [][2]string{{"X-Origin-Verify", strings.Repeat("a", 10000)}}, ErrEdgeIdentityMismatch},
		{"secret: in another header", rotating, [][2]string{{"X-Origin-Verified", secret}}, ErrEdgeIdentityMissing},
		{"no identity configured", plain, nil, nil},
	}
	require.ErrorIs(t, azure.Check(nil), ErrEdgeIdentityMissing, "no request carries no identity")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			for _, kv := range tc.h {
				r.Header.Add(kv[0], kv[1])
			}
			err := tc.p.Check(r)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			for _, kv := range tc.h {
				if kv[1] != "" {
					assert.NotContains(t, err.Error(), kv[1], "the error quotes no value")
				}
			}
		})
	}
}

// TestHandler: a request without the identity is refused before the
// handler runs; one with it goes on without the secret header, and the
// caller's request keeps it.
func TestHandler(t *testing.T) {
	p := MustNew(withSecret(configFor(AzureFrontDoor, Direct()), secret))
	var seen http.Header
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header
		w.WriteHeader(http.StatusNoContent)
	}))

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Azure-FDID", fdid)
	r.Header.Set("X-Origin-Verify", secret)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusNoContent, w.Code)
	assert.Empty(t, seen.Values("X-Origin-Verify"), "the secret does not reach the handler")
	assert.Equal(t, fdid, seen.Get("X-Azure-FDID"), "the Front Door ID is not a secret")
	assert.Equal(t, secret, r.Header.Get("X-Origin-Verify"), "the caller's request is not modified")

	seen = nil
	r.Header.Set("X-Origin-Verify", "guessed-guessed-guessed")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Nil(t, seen, "the handler did not run")
	assert.NotContains(t, w.Body.String(), "X-Origin-Verify")
	assert.NotContains(t, w.Body.String(), "guessed")

	// Without an identity there is nothing to wrap.
	plain := MustNew(configFor(Cloudflare, Direct()))
	next := http.Handler(&nopHandler{})
	assert.Same(t, next, plain.Handler(next))
}

// TestCheckAllocs: Check costs no allocation on a request that passes.
func TestCheckAllocs(t *testing.T) {
	p := MustNew(withSecret(configFor(AzureFrontDoor, Direct()), secret, secretNew))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Azure-FDID", fdid)
	r.Header.Set("X-Origin-Verify", secretNew)
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.Check(r); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	long := httptest.NewRequest("GET", "/", nil)
	long.Header.Set("X-Azure-FDID", fdid)
	long.Header.Set("X-Origin-Verify", strings.Repeat("x", maxSecretLen))
	allocs = testing.AllocsPerRun(100, func() { _ = p.id.knownSecret(long.Header.Get("X-Origin-Verify")) })
	assert.Zero(t, allocs, "a value as long as a secret may be")
}

// FuzzCheck: no input panics, and only an accepted value passes.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{secret, secretNew, "", secret + "x", strings.ToUpper(secret), "\x00", strings.Repeat("a", 300)} {
		f.Add(s, fdid)
	}
	f.Add(secret, strings.ToUpper(fdid))
	f.Add(secret, "")
	p := MustNew(withSecret(configFor(AzureFrontDoor, Direct()), secret, secretNew))
	f.Fuzz(func(t *testing.T, v, id string) {
		r := &http.Request{Header: http.Header{"X-Origin-Verify": {v}, "X-Azure-Fdid": {id}}}
		err := p.Check(r)
		ok := (v == secret || v == secretNew) && strings.EqualFold(id, fdid)
		if ok != (err == nil) {
			t.Fatalf("Check(%q, %q) = %v", v, id, err)
		}
	})
}

type nopHandler struct{}

func (*nopHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

func BenchmarkCheck(b *testing.B) {
	p := MustNew(withSecret(configFor(AzureFrontDoor, Direct()), secret, secretNew))
	for _, bc := range []struct{ name, value string }{
		{"match", secretNew},
		{"mismatch", strings.ToUpper(secretNew)},
		{"hostile-64KiB", strings.Repeat("a", 64<<10)},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Azure-FDID", fdid)
		r.Header.Set("X-Origin-Verify", bc.value)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = p.Check(r)
			}
		})
	}
	b.Run("match-parallel", func(b *testing.B) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Azure-FDID", fdid)
		r.Header.Set("X-Origin-Verify", secret)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := p.Check(r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkHandler(b *testing.B) {
	p := MustNew(withSecret(configFor(AzureFrontDoor, Direct()), secret))
	h := p.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Azure-FDID", fdid)
	r.Header.Set("X-Origin-Verify", secret)
	r.Header.Set("User-Agent", "bench")
	r.Header.Set("Accept", "*/*")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
