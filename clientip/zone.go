package clientip

import (
	"net/netip"
	"strings"
)

// Zones in header entries.
//
// Go's httputil.ReverseProxy, and any proxy that takes the host part of
// net/http's RemoteAddr, writes the zone of a link-local IPv6 peer into
// X-Forwarded-For: "fe80::5%eth0". The walk accepts such an entry in
// X-Forwarded-For and in single-address headers (they share one entry
// syntax), under these rules:
//
//   - The zone follows the first "%" of a bare or bracketed IPv6 address
//     ("fe80::5%eth0", "[fe80::5%eth0]:8080").
//   - It is 1 to maxZoneLen bytes of RFC 6874's unreserved characters
//     (letters, digits, "-", ".", "_", "~"): an interface name (15 bytes on
//     Linux and the BSDs) or a decimal interface index. Anything else — an
//     empty zone, a space, a control byte, a second "%" — is ErrMalformed.
//   - The zone is read as it stands, never percent-decoded: "%25eth0" is the
//     zone "25eth0". RFC 6874 encodes "%" as "%25" only inside URIs, which a
//     header entry is not; since the zone is dropped, no reading of it could
//     change the address.
//   - Only a link-local unicast address (fe80::/10) may carry a zone: RFC
//     4007 §6 gives zones a meaning for non-global scopes, and a kernel
//     reports one only for a link-local peer. A zone on any other address,
//     IPv4-mapped ones included, is ErrMalformed.
//   - The zone is dropped: the trusted set is matched without it and a
//     client never carries one. Two hosts on different links may share a
//     link-local address, so trusting fe80::1 trusts it on every link, as it
//     does for a zoned socket peer.
//
// RFC 7239 Forwarded nodes take no zone: §6 defines nodename with RFC 3986's
// IPv6address, which has none, and RFC 6874 extends only the URI IP-literal.
// A zone in a Forwarded node, "%" or "%25", stays ErrMalformed.

// maxZoneLen bounds the zone of a header entry: IFNAMSIZ-1 on Linux and the
// BSDs, and longer than any decimal interface index.
const maxZoneLen = 15

// parseZonedEntry is parseListAddr for an entry whose IPv6 address did not
// parse: a link-local address with a zone, bare or bracketed with an
// optional port, or ErrMalformed. parseListAddr calls it only on that
// failure, so that an entry without a zone runs no code it did not run
// before (and the hot path's code keeps its size and layout). It does not
// allocate.
func parseZonedEntry(s string) (netip.Addr, Reason) {
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, ReasonMalformed
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, ReasonMalformed
		}
		s = s[1:end]
	}
	a, ok := parseZoned(s)
	if !ok {
		return netip.Addr{}, ReasonMalformed
	}
	return canonical(a)
}

// parseZoned parses s as a link-local IPv6 address followed by "%" and a
// zone, and returns the address without the zone. It does not allocate.
func parseZoned(s string) (netip.Addr, bool) {
	i := strings.IndexByte(s, '%')
	if i < 0 || !validZone(s[i+1:]) {
		return netip.Addr{}, false
	}
	a, ok := parseIPv6(s[:i])
	if !ok || a.Is4In6() || !a.IsLinkLocalUnicast() {
		return netip.Addr{}, false
	}
	return a, true
}

// validZone reports whether z is a zone a header entry may carry.
func validZone(z string) bool {
	if len(z) == 0 || len(z) > maxZoneLen {
		return false
	}
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}
