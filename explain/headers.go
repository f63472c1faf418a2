package explain

import (
	"net/http"
	"net/textproto"
)

// forwardingHeaders are the request headers that carry a client address in
// the deployments this package knows, in canonical form: the two list
// headers, then the single-address headers that edges and proxies set. A
// report lists each one a request carries, whether the configuration reads
// it or not, and the advisor counts which ones each peer sends.
var forwardingHeaders = [...]string{
	"X-Forwarded-For",
	"Forwarded",
	"X-Real-Ip",
	"True-Client-Ip",
	"Cf-Connecting-Ip",
	"Cf-Connecting-Ipv6",
	"Fastly-Client-Ip",
	"X-Azure-Clientip",
	"X-Azure-Socketip",
	"Cloudfront-Viewer-Address",
	"Fly-Client-Ip",
	"X-Client-Ip",
	"X-Cluster-Client-Ip",
	"X-Original-Forwarded-For",
	"X-Envoy-External-Address",
	"X-Appengine-User-Ip",
}

// headerIndex returns the position of the canonical name in
// forwardingHeaders, or -1.
func headerIndex(name string) int {
	for i, n := range forwardingHeaders {
		if n == name {
			return i
		}
	}
	return -1
}

// displayName returns the usual spelling of a canonical header name
// ("CF-Connecting-IP" for "Cf-Connecting-Ip"), for people.
func displayName(canonical string) string {
	switch canonical {
	case "X-Real-Ip":
		return "X-Real-IP"
	case "True-Client-Ip":
		return "True-Client-IP"
	case "Cf-Connecting-Ip":
		return "CF-Connecting-IP"
	case "Cf-Connecting-Ipv6":
		return "CF-Connecting-IPv6"
	case "Fastly-Client-Ip":
		return "Fastly-Client-IP"
	case "X-Azure-Clientip":
		return "X-Azure-ClientIP"
	case "X-Azure-Socketip":
		return "X-Azure-SocketIP"
	case "Cloudfront-Viewer-Address":
		return "CloudFront-Viewer-Address"
	case "Fly-Client-Ip":
		return "Fly-Client-IP"
	case "X-Client-Ip":
		return "X-Client-IP"
	case "X-Cluster-Client-Ip":
		return "X-Cluster-Client-IP"
	case "X-Appengine-User-Ip":
		return "X-AppEngine-User-IP"
	}
	return canonical
}

// canonicalHeader returns name in canonical form, "" for "".
func canonicalHeader(name string) string {
	if name == "" {
		return ""
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// presentHeaders returns, in forwardingHeaders order followed by the
// configured header when it is not among them, the forwarding headers h
// carries.
func presentHeaders(h http.Header, configured string) []string {
	var out []string
	for _, n := range forwardingHeaders {
		if len(h[n]) > 0 {
			out = append(out, n)
		}
	}
	if configured != "" && headerIndex(configured) < 0 && len(h[configured]) > 0 {
		out = append(out, configured)
	}
	return out
}
