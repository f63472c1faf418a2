package clientip

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hdr builds a header from name, value pairs; a repeated name adds a line.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// The deployments of the origin tests.
var (
	xfAll  = OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port", Prefix: "X-Forwarded-Prefix"}
	xfHost = OriginConfig{Host: "X-Forwarded-Host"}
	fwdAll = OriginConfig{Proto: "Forwarded", Host: "Forwarded"}
	direct = Transport{Peer: ap("203.0.113.9:51234")}
)

type originCase struct {
	name    string
	cfg     OriginConfig
	rcfg    *Config    // the resolver's; nil means xffCfg()
	t       *Transport // nil means proxyPeer
	h       http.Header
	tls     bool
	host    string
	want    Origin
	wantErr error
}

func runOriginCases(t *testing.T, tests []originCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rcfg, tr := xffCfg(), proxyPeer
			if tc.rcfg != nil {
				rcfg = *tc.rcfg
			}
			if tc.t != nil {
				tr = *tc.t
			}
			res, err := MustNew(rcfg).Resolve(tr, tc.h)
			if !errors.Is(err, ErrMasqueraded) {
				require.NoError(t, err, "the chain itself must resolve: %v", res)
			}
			o, err := NewOriginReader(tc.cfg)
			require.NoError(t, err)
			got, err := o.Read(res, tc.h, tc.tls, tc.host)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr, "got %+v", got)
				var ce *ChainError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, res.Hop, ce.Hop, "the error names the client's hop")
				assert.Equal(t, Origin{}, got)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
			m, merr := refOrigin(tc.cfg, res, tc.h, tc.tls, tc.host)
			assert.Equal(t, m, got, "the reference model disagrees")
			assert.Equal(t, originKind(merr), originKind(err), "the reference model's error")
		})
	}
}

func TestOriginDirect(t *testing.T) {
	lb := Config{TrustedProxies: lbSet, Header: "X-Forwarded-For"}
	viaPROXY := Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.7:2")}
	forged := hdr("X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example", "X-Forwarded-Port", "8443",
		"X-Forwarded-Prefix", "/evil", "Forwarded", "for=198.51.100.9;proto=https;host=evil.example")
	runOriginCases(t, []originCase{
		{name: "direct client: the request's own origin (TLS is https, the Host, the port kept)", cfg: xfAll, t: &direct,
			tls: true, host: "Example.COM:8443", want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "direct client without TLS: http", cfg: xfAll, t: &direct, host: "example.com", want: Origin{Scheme: "http", Host: "example.com"}},
		{name: "spoof: a direct client's origin headers are never read (gorilla ProxyHeaders trusts X-Forwarded-Host from anyone)",
			cfg: xfAll, t: &direct, h: forged, host: "example.com", want: Origin{Scheme: "http", Host: "example.com"}},
		{name: "spoof: a direct client's Forwarded proto= and host= are never read", cfg: fwdAll, rcfg: &Config{TrustedProxies: private10, Header: "Forwarded"},
			t: &direct, h: forged, host: "example.com", want: Origin{Scheme: "http", Host: "example.com"}},
		{name: "spoof: a client behind an L4 balancer (PROXY protocol) is direct to HTTP; its headers are not read",
			cfg: xfAll, rcfg: &lb, t: &viaPROXY, h: forged, tls: true, host: "example.com", want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "the default port is dropped (https and 443)", t: &direct, tls: true, host: "example.com:443", want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "port 443 over http is not a default", t: &direct, host: "example.com:443", want: Origin{Scheme: "http", Host: "example.com", Port: 443}},
		{name: "no Host (HTTP/1.0): ErrOriginMissing", t: &direct, wantErr: ErrOriginMissing},
		{name: "a malformed Host: ErrOriginMalformed", t: &direct, host: "example.com/evil", wantErr: ErrOriginMalformed},
		{name: "a direct client's Host outside AllowedHosts: ErrHostNotAllowed", cfg: OriginConfig{AllowedHosts: []string{"example.com"}},
			t: &direct, host: "evil.example", wantErr: ErrHostNotAllowed},
		{name: "the zero OriginConfig reads no header from a proxied request either", h: hdr("X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https"),
			host: "example.com", want: Origin{Scheme: "http", Host: "example.com"}},
	})
}

func TestOriginXForwarded(t *testing.T) {
	xff := func(v string, kv ...string) http.Header { return hdr(append([]string{"X-Forwarded-For", v}, kv...)...) }
	runOriginCases(t, []originCase{
		{name: "one setting proxy (nginx proxy_set_header … $scheme): its values", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"), host: "backend:8080",
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "spoof: the client's entries before the edge's appended one (HAProxy add-header) are never read", cfg: xfAll,
			h:    xff("198.51.100.7", "X-Forwarded-Proto", "http", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "two appending hops: the entry k from the right, written by the hop that reported the client", cfg: xfAll,
			h:    xff("198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "example.com, inner.internal"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "spoof: appending hops behind a client that forged its own entries in every list", cfg: xfAll,
			h:    xff("6.6.6.6, 198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "http, https, http", "X-Forwarded-Host", "evil.example, example.com, inner.internal"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "the edge sets, the inner proxy passes it on (one value, k = 1): the one value", cfg: xfAll,
			h: xff("198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"), want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "two entries for a client three hops out (1 < n < k+1): ErrOriginAmbiguous", cfg: xfAll,
			h: xff("198.51.100.7, 10.0.0.2, 10.0.0.3", "X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "example.com"), wantErr: ErrOriginAmbiguous},
		{name: "repeated lines are one list, later lines nearer (RFC 9110 §5.3)", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", "http", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"), want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "empty list elements and OWS are skipped (RFC 9110 §5.6.1)", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", " ,\thttps , ,", "X-Forwarded-Host", "example.com"), want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "the scheme in any case is normalised", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "HTTPS", "X-Forwarded-Host", "example.com"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "a declared X-Forwarded-Proto absent from a proxied request: ErrOriginMissing (never the connection's scheme instead)", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Host", "example.com"), tls: true, wantErr: ErrOriginMissing},
		{name: "a declared X-Forwarded-Host absent: ErrOriginMissing (never the Host instead)", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", "https"), host: "example.com", wantErr: ErrOriginMissing},
		{name: "a declared header present but empty is absent", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", " , ", "X-Forwarded-Host", "example.com"),
			wantErr: ErrOriginMissing},
		{name: "X-Forwarded-Proto not declared: the connection's scheme", cfg: xfHost, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"),
			want: Origin{Scheme: "http", Host: "example.com"}},
		{name: "X-Forwarded-Host not declared: the Host the proxy passed on", cfg: OriginConfig{Proto: "X-Forwarded-Proto"},
			h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example"), host: "example.com", want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "another name for the scheme header (X-Forwarded-Scheme)", cfg: OriginConfig{Proto: "x-forwarded-scheme"},
			h: xff("198.51.100.7", "X-Forwarded-Scheme", "https"), host: "example.com", want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "malformed: a scheme other than http and https", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "javascript", "X-Forwarded-Host", "example.com"),
			wantErr: ErrOriginMalformed},
		{name: "malformed: ws is not an origin scheme", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "wss", "X-Forwarded-Host", "example.com"),
			wantErr: ErrOriginMalformed},
		{name: "an entry left of the client's is never read, malformed or not", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", "bogus, https", "X-Forwarded-Host", "evil.example/x, example.com"), want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "an origin header over 8 KiB: ErrOriginMalformed before it is read", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", strings.Repeat("https, ", 2000)+"https", "X-Forwarded-Host", "example.com"), wantErr: ErrOriginMalformed},

		{name: "X-Forwarded-Port adds the port", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com", "X-Forwarded-Port", "8443"),
			want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "X-Forwarded-Port of the scheme's default is dropped (AWS ALB sets 443)", cfg: OriginConfig{Proto: "X-Forwarded-Proto", Port: "X-Forwarded-Port"},
			h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Port", "443"), host: "example.com", want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "X-Forwarded-Port agreeing with the host's port", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com:8443", "X-Forwarded-Port", "8443"),
			want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "X-Forwarded-Port disagreeing with the host's port: ErrOriginAmbiguous", cfg: xfAll,
			h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com:8443", "X-Forwarded-Port", "443"), wantErr: ErrOriginAmbiguous},
		{name: "X-Forwarded-Port absent: the host's port", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com:8443"),
			want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "X-Forwarded-Port by position, like the others", cfg: xfAll,
			h:    xff("198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "example.com, inner", "X-Forwarded-Port", "8443, 80"),
			want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "malformed: port 0", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com", "X-Forwarded-Port", "0"), wantErr: ErrOriginMalformed},
		{name: "malformed: port above 65535", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com", "X-Forwarded-Port", "65536"), wantErr: ErrOriginMalformed},
		{name: "malformed: a port with a leading zero", cfg: xfAll, h: xff("198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com", "X-Forwarded-Port", "0443"), wantErr: ErrOriginMalformed},

		{name: "a single-address header deployment (CF-Connecting-IP): the edge's one value", cfg: xfAll,
			rcfg: &Config{TrustedProxies: private10, Header: "CF-Connecting-IP"},
			h:    hdr("Cf-Connecting-Ip", "198.51.100.7", "X-Forwarded-Proto", "http", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "behind a PROXY load balancer that trusts its source: k counts header entries only", cfg: xfAll,
			rcfg: &Config{TrustedProxies: private10.Union(lbSet), Header: "X-Forwarded-For"},
			t:    &Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("10.0.0.5:2")},
			h:    xff("198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "example.com, inner"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "a masqueraded client keeps the origin of the hop that reported it", cfg: xfAll,
			rcfg: &Config{TrustedProxies: private10, Header: "X-Forwarded-For", Masquerade: MustParsePrefixSet("192.0.2.0/28")},
			h:    xff("192.0.2.3", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com"), want: Origin{Scheme: "https", Host: "example.com"}},
	})
}

// readXF reads the origin of a request with headers h from the proxy
// 10.0.0.1 under xfAll, and reports whether it was read; when wantErr is not
// nil the error must wrap it.
func readXF(t *testing.T, h http.Header, wantErr error) (Origin, bool) {
	t.Helper()
	res, err := MustNew(xffCfg()).Resolve(proxyPeer, h)
	require.NoError(t, err)
	got, err := MustNewOriginReader(xfAll).Read(res, h, false, "")
	if wantErr != nil {
		require.ErrorIs(t, err, wantErr)
		return got, false
	}
	require.NoError(t, err)
	return got, true
}

func TestOriginHostSyntax(t *testing.T) {
	tests := []struct {
		name, host string
		want       Origin // Scheme https
		wantErr    error
	}{
		{"a name in upper case is lowered", "EXAMPLE.com", Origin{Host: "example.com"}, nil},
		{"an IDNA name arrives as xn-- labels and is kept as such", "xn--bcher-kva.example", Origin{Host: "xn--bcher-kva.example"}, nil},
		{"underscores are accepted (internal service names)", "my_service.internal", Origin{Host: "my_service.internal"}, nil},
		{"a single label", "localhost", Origin{Host: "localhost"}, nil},
		{"IPv4 with a port", "192.0.2.1:8080", Origin{Host: "192.0.2.1", Port: 8080}, nil},
		{"IPv6 literal in canonical text", "[2001:DB8:0:0::1]:8443", Origin{Host: "[2001:db8::1]", Port: 8443}, nil},
		{"a 63-byte label", strings.Repeat("a", 63) + ".example", Origin{Host: strings.Repeat("a", 63) + ".example"}, nil},
		{"malformed: a 64-byte label", strings.Repeat("a", 64) + ".example", Origin{}, ErrOriginMalformed},
		{"malformed: a name over 253 bytes", strings.Repeat("abcdefghi.", 25) + "exampl", Origin{}, ErrOriginMalformed},
		{"malformed: non-ASCII (IDNA is not decoded)", "münchen.example", Origin{}, ErrOriginMalformed},
		{"malformed: a path", "example.com/evil", Origin{}, ErrOriginMalformed},
		{"malformed: user info (open redirect through https://user@evil)", "example.com@evil.example", Origin{}, ErrOriginMalformed},
		{"malformed: percent-encoding", "exa%2emple.com", Origin{}, ErrOriginMalformed},
		{"malformed: a backslash (browsers read it as a slash)", "evil.example\\.example.com", Origin{}, ErrOriginMalformed},
		{"malformed: a space", "example.com evil.example", Origin{}, ErrOriginMalformed},
		{"malformed: a trailing dot", "example.com.", Origin{}, ErrOriginMalformed},
		{"malformed: an empty label", "example..com", Origin{}, ErrOriginMalformed},
		{"malformed: a name ending in a number is IPv4 to a browser (WHATWG URL), and 127.1 is not a dotted quad", "127.1", Origin{}, ErrOriginMalformed},
		{"malformed: a name ending in a hex number", "evil.0x7f", Origin{}, ErrOriginMalformed},
		{"malformed: leading zeros in IPv4 (octal to some parsers)", "010.0.0.1", Origin{}, ErrOriginMalformed},
		{"malformed: an IPv6 zone", "[fe80::1%25eth0]", Origin{}, ErrOriginMalformed},
		{"malformed: IPv6 without brackets", "2001:db8::1", Origin{}, ErrOriginMalformed},
		{"malformed: an empty port", "example.com:", Origin{}, ErrOriginMalformed},
		{"malformed: a second port", "example.com:80:80", Origin{}, ErrOriginMalformed},
		{"malformed: a CRLF", "example.com\r\nSet-Cookie: x=1", Origin{}, ErrOriginMalformed},
		{"malformed: empty", "", Origin{}, ErrOriginMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := hdr("X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https")
			if tc.host != "" {
				h["X-Forwarded-Host"] = []string{tc.host}
			}
			if got, ok := readXF(t, h, tc.wantErr); ok {
				tc.want.Scheme = "https"
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

func TestOriginPrefix(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string
		want    string
		wantErr error
	}{
		{"a prefix loses its trailing slash", []string{"/app/"}, "/app", nil},
		{"several segments", []string{"/a/b-c/d_e~f"}, "/a/b-c/d_e~f", nil},
		{"/ is no prefix", []string{"/"}, "", nil},
		{"an empty header is no prefix", []string{" "}, "", nil},
		{"malformed: relative", []string{"app"}, "", ErrOriginMalformed},
		{"malformed: //evil.example would make a network-path redirect", []string{"//evil.example"}, "", ErrOriginMalformed},
		{"malformed: an empty segment inside", []string{"/a//b"}, "", ErrOriginMalformed},
		{"malformed: ..", []string{"/a/../admin"}, "", ErrOriginMalformed},
		{"malformed: .", []string{"/a/./b"}, "", ErrOriginMalformed},
		{"malformed: percent-encoding (%2e%2e, %2f)", []string{"/a/%2e%2e"}, "", ErrOriginMalformed},
		{"malformed: ; path parameters (..;/ bypasses)", []string{"/a/..;/admin"}, "", ErrOriginMalformed},
		{"malformed: a backslash", []string{"/a\\..\\b"}, "", ErrOriginMalformed},
		{"malformed: a query", []string{"/a?x=1"}, "", ErrOriginMalformed},
		{"malformed: a fragment", []string{"/a#x"}, "", ErrOriginMalformed},
		{"malformed: over 1024 bytes", []string{"/" + strings.Repeat("a", 1024)}, "", ErrOriginMalformed},
		{"ambiguous: a list (hops compose prefixes; no entry is the whole)", []string{"/a,/b"}, "", ErrOriginAmbiguous},
		{"ambiguous: two lines (a client's and an appending proxy's)", []string{"/evil", "/app"}, "", ErrOriginAmbiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := hdr("X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com")
			h["X-Forwarded-Prefix"] = tc.lines
			if got, ok := readXF(t, h, tc.wantErr); ok {
				assert.Equal(t, tc.want, got.Prefix)
			}
		})
	}
}

// Review finding: an ambiguous X-Forwarded-Prefix (several lines, or a
// list) was joined whole into the error's Value: a request with many long
// lines made every refusal copy them all, and an error kept by a log or an
// OnError held the copy, though Error quotes only 64 bytes. The Value is cut
// to 65 bytes, built without copying more, and Error reads as before.
func TestOriginAmbiguousPrefixErrorBounded(t *testing.T) {
	long := "/" + strings.Repeat("a", 4000)
	for name, lines := range map[string][]string{
		"many long lines":  slices.Repeat([]string{long}, 250),
		"one long list":    {long + "," + long},
		"many short lines": slices.Repeat([]string{"/a"}, 10000),
		"lines of nothing": slices.Repeat([]string{""}, 10000),
		"two short lines":  {"/evil", "/app"},
	} {
		t.Run(name, func(t *testing.T) {
			h := hdr("X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com")
			h["X-Forwarded-Prefix"] = lines
			res, err := MustNew(xffCfg()).Resolve(proxyPeer, h)
			require.NoError(t, err)
			_, err = MustNewOriginReader(xfAll).Read(res, h, false, "")
			require.ErrorIs(t, err, ErrOriginAmbiguous)
			var ce *ChainError
			require.ErrorAs(t, err, &ce)
			assert.LessOrEqual(t, len(ce.Value), 65, "the error's Value")
			whole := strings.Join(lines, ", ")
			assert.Equal(t, whole[:min(len(whole), 65)], ce.Value, "the Value is the start of the joined lines")
			assert.Equal(t, (&ChainError{Hop: ce.Hop, Header: ce.Header, Value: whole, Err: ce.Err}).Error(), err.Error(),
				"the error text is what it was with the whole Value")
		})
	}
}

func TestOriginForwarded(t *testing.T) {
	fc := Config{TrustedProxies: private10, Header: "Forwarded"}
	fwdH := func(v ...string) http.Header { return http.Header{"Forwarded": v} }
	runOriginCases(t, []originCase{
		{name: "proto= and host= of the element that named the client (RFC 7239 §5.3, §5.4)", cfg: fwdAll, rcfg: &fc,
			h:    fwdH("for=198.51.100.7;proto=https;host=example.com, for=10.0.0.2;proto=http;host=inner.internal"),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "spoof: a client's own element at the left is never read", cfg: fwdAll, rcfg: &fc,
			h: fwdH("for=6.6.6.6;proto=http;host=evil.example", "for=198.51.100.7;proto=https;host=example.com"), want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "a quoted host with a port", cfg: fwdAll, rcfg: &fc, h: fwdH(`for=198.51.100.7;host="example.com:8443";proto=https`),
			want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "parameter names in any case", cfg: fwdAll, rcfg: &fc, h: fwdH(`For=198.51.100.7;PROTO=HTTPS;Host=Example.com`),
			want: Origin{Scheme: "https", Host: "example.com"}},
		{name: "a quoted-pair is refused, not unescaped", cfg: fwdAll, rcfg: &fc, h: fwdH(`for=198.51.100.7;proto=https;host="exa\mple.com"`),
			wantErr: ErrOriginMalformed},
		{name: "an element without proto=: ErrOriginMissing (never the next element's)", cfg: fwdAll, rcfg: &fc,
			h: fwdH("for=198.51.100.7;host=example.com, for=10.0.0.2;proto=https;host=inner"), wantErr: ErrOriginMissing},
		{name: "a declared Forwarded while the client came from X-Forwarded-For: ErrOriginMissing (no mixing of headers)", cfg: fwdAll,
			h: hdr("X-Forwarded-For", "198.51.100.7", "Forwarded", "for=198.51.100.7;proto=https;host=evil.example"), wantErr: ErrOriginMissing},
		{name: "proto= from Forwarded, the port by position from X-Forwarded-Port", cfg: OriginConfig{Proto: "Forwarded", Host: "Forwarded", Port: "X-Forwarded-Port"},
			rcfg: &fc, h: hdr("Forwarded", "for=198.51.100.7;proto=https;host=example.com, for=10.0.0.2", "X-Forwarded-Port", "8443, 80"),
			want: Origin{Scheme: "https", Host: "example.com", Port: 8443}},
		{name: "malformed: host= with a path", cfg: fwdAll, rcfg: &fc, h: fwdH(`for=198.51.100.7;proto=https;host="example.com/x"`), wantErr: ErrOriginMalformed},
	})
}

func TestOriginAllowedHosts(t *testing.T) {
	o := MustNewOriginReader(OriginConfig{AllowedHosts: []string{"Example.com", "*.example.net", "192.0.2.1", "2001:db8::1", "[2001:db8::2]"}})
	for host, want := range map[string]error{
		"example.com":           nil,
		"EXAMPLE.COM:8443":      nil,
		"a.example.net":         nil,
		"example.net":           ErrHostNotAllowed, // a wildcard is one label, as in a certificate
		"a.b.example.net":       ErrHostNotAllowed,
		"evilexample.net":       ErrHostNotAllowed,
		"192.0.2.1":             nil,
		"[2001:db8:0::1]":       nil, // compared in canonical form
		"[2001:db8::2]:443":     nil,
		"example.com.evil.test": ErrHostNotAllowed,
		"192.0.2.2":             ErrHostNotAllowed,
	} {
		_, err := o.Read(Result{Client: addr("203.0.113.9"), Source: SourceSocket}, nil, true, host)
		if want == nil {
			assert.NoError(t, err, host)
		} else {
			assert.ErrorIs(t, err, want, host)
		}
	}
}

func TestNewOriginReaderValidation(t *testing.T) {
	for name, cfg := range map[string]OriginConfig{
		"an invalid header name":                  {Proto: "X Forwarded Proto"},
		"Port from Forwarded (RFC 7239 has none)": {Port: "Forwarded"},
		"Prefix from Forwarded":                   {Prefix: "forwarded"},
		"X-Forwarded-For is not an origin header": {Host: "X-Forwarded-For"},
		"Host is the request's own":               {Host: "host"},
		"one header for two parts":                {Proto: "X-Forwarded-Proto", Port: "x-forwarded-proto"},
		"an allowed host with a port":             {AllowedHosts: []string{"example.com:443"}},
		"an allowed host with a path":             {AllowedHosts: []string{"example.com/"}},
		"a wildcard inside a name":                {AllowedHosts: []string{"a.*.example.com"}},
		"a wildcard over IPv4":                    {AllowedHosts: []string{"*.0.2.1"}},
		"a wildcard alone":                        {AllowedHosts: []string{"*"}},
		"an empty allowed host":                   {AllowedHosts: []string{""}},
	} {
		_, err := NewOriginReader(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	o, err := NewOriginReader(OriginConfig{Proto: "forwarded", Host: "FORWARDED"})
	require.NoError(t, err, "proto= and host= both from Forwarded")
	assert.Equal(t, OriginConfig{Proto: "forwarded", Host: "FORWARDED"}, o.Config())
	_, err = NewOriginReader(OriginConfig{})
	require.NoError(t, err, "the zero OriginConfig")
}

func TestOriginUnresolved(t *testing.T) {
	res, err := MustNew(xffCfg()).Resolve(proxyPeer, xff("garbage"))
	require.ErrorIs(t, err, ErrMalformed)
	_, err = MustNewOriginReader(xfAll).Read(res, xff("garbage"), true, "example.com")
	assert.ErrorIs(t, err, ErrOriginMissing, "no hop reported a client")
}

func TestOriginValue(t *testing.T) {
	o := Origin{Scheme: "https", Host: "example.com", Port: 8443, Prefix: "/app"}
	assert.True(t, o.IsValid())
	assert.True(t, o.Secure())
	assert.Equal(t, "example.com:8443", o.HostPort())
	assert.Equal(t, "https://example.com:8443", o.String())
	assert.False(t, Origin{}.IsValid())
	assert.Equal(t, "", Origin{}.String())
	assert.False(t, Origin{Scheme: "http", Host: "example.com"}.Secure())

	for s, want := range map[string]Origin{
		"https://example.com":       {Scheme: "https", Host: "example.com"},
		"https://EXAMPLE.com:443":   {Scheme: "https", Host: "example.com"},
		"http://192.0.2.1:8080":     {Scheme: "http", Host: "192.0.2.1", Port: 8080},
		"HTTPS://[2001:db8::1]:444": {Scheme: "https", Host: "[2001:db8::1]", Port: 444},
	} {
		got, err := ParseOrigin(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
		back, err := ParseOrigin(got.String())
		require.NoError(t, err)
		assert.Equal(t, got, back, "String round-trips %s", s)
	}
	for _, s := range []string{"null", "https://example.com/", "https://example.com/path", "https://user@example.com", "ftp://example.com",
		"https//example.com", "https://", "https://example.com:0", "https://example.com?x", "//example.com"} {
		_, err := ParseOrigin(s)
		assert.ErrorIs(t, err, ErrOriginMalformed, s)
	}
	hdrOrigin, _ := ParseOrigin("https://example.com:8443")
	assert.True(t, o.SameOrigin(hdrOrigin), "the prefix is not part of an origin")
	other, _ := ParseOrigin("http://example.com:8443")
	assert.False(t, o.SameOrigin(other), "another scheme")
	assert.False(t, Origin{}.SameOrigin(Origin{}), "the zero Origin is nobody's")

	ctx := NewOriginContext(context.Background(), o)
	got, ok := OriginFromContext(ctx)
	assert.True(t, ok)
	assert.Equal(t, o, got)
	_, ok = OriginFromContext(context.Background())
	assert.False(t, ok)
	assert.Zero(t, testing.AllocsPerRun(100, func() { OriginFromContext(ctx) }))
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { ctx = NewOriginContext(context.Background(), o) }), "NewOriginContext allocations")
}

// TestOriginAllocs: reading a proxied request's origin, lower-case host,
// does not allocate, nor does a direct request's.
func TestOriginAllocs(t *testing.T) {
	r := MustNew(xffCfg())
	o := MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port",
		Prefix: "X-Forwarded-Prefix", AllowedHosts: []string{"example.com", "*.example.net"}})
	h := hdr("X-Forwarded-For", "198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "a.example.net, inner",
		"X-Forwarded-Port", "8443, 80", "X-Forwarded-Prefix", "/app/")
	res, err := r.Resolve(proxyPeer, h)
	require.NoError(t, err)
	got, err := o.Read(res, h, false, "")
	require.NoError(t, err)
	require.Equal(t, Origin{Scheme: "https", Host: "a.example.net", Port: 8443, Prefix: "/app"}, got)
	assert.Zero(t, testing.AllocsPerRun(100, func() { o.Read(res, h, false, "") }), "proxied")

	fo := MustNewOriginReader(fwdAll)
	fh := fwd(`for=198.51.100.7;proto=https;host="example.com:8443", for=10.0.0.2`)
	fres, err := MustNew(fwdCfg()).Resolve(proxyPeer, fh)
	require.NoError(t, err)
	_, err = fo.Read(fres, fh, false, "")
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(100, func() { fo.Read(fres, fh, false, "") }), "Forwarded")

	dres, _ := r.Resolve(direct, nil)
	assert.Zero(t, testing.AllocsPerRun(100, func() { o.Read(dres, nil, true, "example.com") }), "direct")
	req := httptest.NewRequest("GET", "https://example.com/", nil)
	assert.Zero(t, testing.AllocsPerRun(100, func() { o.ReadRequest(req, dres) }), "ReadRequest")
}

// FuzzOrigin holds OriginReader.Read to the reference model refOrigin and to
// the invariants of an Origin: valid, canonical (its serialisation parses
// back to itself), and for a client no header reported, independent of
// every header.
func FuzzOrigin(f *testing.F) {
	f.Add("198.51.100.7, 10.0.0.2", "https, http", "example.com, inner", "8443, 80", "/app/", "", "backend", uint8(0))
	f.Add("198.51.100.7", "http", "evil.example", "", "//evil", "", "", uint8(1))
	f.Add("", "", "", "", "", `for=198.51.100.7;proto=https;host="Example.com:8443", for=10.0.0.2`, "", uint8(2))
	f.Add("198.51.100.7, 10.0.0.2, 10.0.0.3", "https, http", "[2001:DB8::1]:443", "443", "/a,/b", "", "x", uint8(3))
	f.Add("6.6.6.6", "HTTPS", "127.1", "0443", "/a/../b", `for="_x";host=a`, "Example.COM:80", uint8(4))
	f.Add("198.51.100.7", "https", "a.example.net", "", "/", "", "", uint8(5))
	for _, s := range []string{"example.com.", "xn--bcher-kva.example", "a.0x1f", "exa%2emple", "[fe80::1%25eth0]", "a:1:2", "[::ffff:1.2.3.4]"} {
		f.Add("198.51.100.7", "https", s, "", "", "", s, uint8(6))
	}
	resolvers := []Config{xffCfg(), fwdCfg(), {TrustedProxies: private10, Header: "X-Real-IP"}, {TrustedHops: 2, Header: "X-Forwarded-For"}}
	readers := []OriginConfig{xfAll, fwdAll, {}, {Proto: "Forwarded", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port"},
		{Proto: "X-Forwarded-Proto", AllowedHosts: []string{"example.com", "*.example.net", "[2001:db8::1]"}}}
	transports := []Transport{proxyPeer, direct, {Peer: ap("10.0.0.1:1"), Proxy: ap("10.0.0.9:2")}}
	f.Fuzz(func(t *testing.T, xffV, proto, host, port, prefix, fwdV, reqHost string, sel uint8) {
		rcfg := resolvers[int(sel)%len(resolvers)]
		ocfg := readers[int(sel/4)%len(readers)]
		tr := transports[int(sel/32)%len(transports)]
		tls := sel&0x80 != 0
		h := http.Header{}
		for name, v := range map[string]string{"X-Forwarded-For": xffV, "X-Real-Ip": xffV, "X-Forwarded-Proto": proto, "X-Forwarded-Host": host,
			"X-Forwarded-Port": port, "X-Forwarded-Prefix": prefix, "Forwarded": fwdV} {
			if v != "" {
				h[name] = strings.Split(v, "\n") // a newline in the input stands for a second line
			}
		}
		res, _ := MustNew(rcfg).Resolve(tr, h)
		got, err := MustNewOriginReader(ocfg).Read(res, h, tls, reqHost)
		want, werr := refOrigin(ocfg, res, h, tls, reqHost)
		require.Equal(t, originKind(werr), originKind(err), "error; result %+v, model %+v", got, want)
		require.Equal(t, want, got)
		if err != nil {
			var ce *ChainError
			require.ErrorAs(t, err, &ce)
			return
		}
		require.True(t, got.IsValid())
		back, err := ParseOrigin(got.String())
		require.NoError(t, err, "%q does not parse back", got.String())
		require.Equal(t, Origin{Scheme: got.Scheme, Host: got.Host, Port: got.Port}, back)
		if got.Prefix != "" {
			p, ok := parsePrefix(got.Prefix)
			require.True(t, ok && p == got.Prefix, "prefix %q is not canonical", got.Prefix)
		}
		if !res.Source.FromHeader() {
			alone, err := MustNewOriginReader(ocfg).Read(res, nil, tls, reqHost)
			require.NoError(t, err)
			require.Equal(t, alone, got, "a direct client's headers changed its origin")
		}
	})
}

// BenchmarkOriginRead reads the origin of a request behind two appending
// proxies, and of a direct one.
func BenchmarkOriginRead(b *testing.B) {
	r := MustNew(xffCfg())
	o := MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port", AllowedHosts: []string{"*.example.net"}})
	h := hdr("X-Forwarded-For", "198.51.100.7, 10.0.0.2", "X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "a.example.net, inner", "X-Forwarded-Port", "8443, 80")
	proxied, _ := r.Resolve(proxyPeer, h)
	own, _ := r.Resolve(direct, nil)
	for _, c := range []struct {
		name string
		res  Result
	}{{"proxied", proxied}, {"direct", own}} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := o.Read(c.res, h, true, "a.example.net"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				o.Read(c.res, h, true, "a.example.net")
			}
		})
	}
}
