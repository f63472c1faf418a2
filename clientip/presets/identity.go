package presets

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// SharedSecret configures an edge-identity header for any platform: a
// header your edge adds to every request it forwards to the origin, holding
// a value only the edge and the service know — a CloudFront custom origin
// header, a Cloudflare or Fastly request-header rule, an Akamai Modify
// Outgoing Request Header, a Front Door rule set. It proves what the
// ranges cannot: that the request came through your account on the edge
// and not through another customer's, who connects from the same
// addresses.
//
// The zero value configures no secret.
type SharedSecret struct {
	// Header is the header's name, such as "X-Origin-Verify". It must be a
	// valid field name and must not be a forwarding header
	// ([clientip.IsForwardingHeader]) or the preset's client header.
	Header string

	// Values are the accepted values: one, or two while you rotate it (add
	// the new value here, then at the edge, then remove the old one). Each
	// must be 16 to 256 bytes of visible ASCII (no spaces); at most 8.
	Values []string
}

// Limits of the identity configuration.
const (
	minSecretLen = 16
	maxSecretLen = 256
	maxValues    = 8
)

// identity is a preset's edge-identity check.
type identity struct {
	fdids        []string // lower case
	secretHeader string   // canonical; "" for none
	secrets      [][sha256.Size]byte
}

const fdidHeader = "X-Azure-Fdid" // canonical form of X-Azure-FDID

func newIdentity(p Platform, frontDoorIDs []string, s SharedSecret) (identity, error) {
	bad := func(format string, a ...any) (identity, error) {
		return identity{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	var id identity
	switch {
	case p == AzureFrontDoor && len(frontDoorIDs) == 0:
		return bad("Azure Front Door needs FrontDoorIDs: every Front Door profile connects from the same ranges, and X-Azure-FDID is what tells yours apart")
	case p != AzureFrontDoor && len(frontDoorIDs) > 0:
		return bad("FrontDoorIDs apply only to Azure Front Door, not %s", p)
	case len(frontDoorIDs) > maxValues:
		return bad("%d FrontDoorIDs, at most %d", len(frontDoorIDs), maxValues)
	}
	for _, v := range frontDoorIDs {
		if !isGUID(v) {
			return bad("FrontDoorIDs: %q is not a GUID (the profile's Front Door ID, as the portal shows it)", truncate(v))
		}
		id.fdids = append(id.fdids, strings.ToLower(v))
	}

	if s.Header == "" && len(s.Values) == 0 {
		return id, nil
	}
	name := textproto.CanonicalMIMEHeaderKey(s.Header)
	switch {
	case !isToken(s.Header):
		return bad("SharedSecret.Header %q is not a valid field name", truncate(s.Header))
	case clientip.IsForwardingHeader(s.Header):
		return bad("SharedSecret.Header %q is a forwarding header, which proxies rewrite and clients may send", s.Header)
	case name == textproto.CanonicalMIMEHeaderKey(p.Header()) || name == fdidHeader:
		return bad("SharedSecret.Header %q is a header the edge already sets", s.Header)
	case len(s.Values) == 0:
		return bad("SharedSecret.Values is empty: no value would ever match")
	case len(s.Values) > maxValues:
		return bad("SharedSecret.Values has %d values, at most %d", len(s.Values), maxValues)
	}
	for i, v := range s.Values {
		if len(v) < minSecretLen || len(v) > maxSecretLen || !visibleASCII(v) {
			// Never quote the value: it is a secret.
			return bad("SharedSecret.Values[%d] must be %d to %d bytes of visible ASCII without spaces", i, minSecretLen, maxSecretLen)
		}
		id.secrets = append(id.secrets, sha256.Sum256([]byte(v)))
	}
	id.secretHeader = name
	return id, nil
}

// configured reports whether there is anything to check.
func (id *identity) configured() bool { return len(id.fdids) > 0 || id.secretHeader != "" }

// check checks h: the Front Door ID first, then the shared secret.
func (id *identity) check(h http.Header) error {
	if len(id.fdids) > 0 {
		vs := h[fdidHeader]
		switch {
		case len(vs) == 0:
			return fmt.Errorf("%w: X-Azure-FDID", ErrEdgeIdentityMissing)
		case len(vs) > 1 || !id.knownFDID(vs[0]):
			return fmt.Errorf("%w: X-Azure-FDID", ErrEdgeIdentityMismatch)
		}
	}
	if id.secretHeader != "" {
		vs := h[id.secretHeader]
		switch {
		case len(vs) == 0:
			return fmt.Errorf("%w: %s", ErrEdgeIdentityMissing, id.secretHeader)
		case len(vs) > 1 || !id.knownSecret(vs[0]):
			return fmt.Errorf("%w: %s", ErrEdgeIdentityMismatch, id.secretHeader)
		}
	}
	return nil
}

func (id *identity) knownFDID(v string) bool {
	for _, want := range id.fdids {
		if strings.EqualFold(v, want) {
			return true
		}
	}
	return false
}

// knownSecret compares v with every accepted value in constant time: v is
// hashed first, so neither the position of the first differing byte nor the
// length of a secret shows in the time taken, and every value is compared,
// so neither does which one matched. It does not allocate.
func (id *identity) knownSecret(v string) bool {
	if len(v) > maxSecretLen {
		return false
	}
	var buf [maxSecretLen]byte
	sum := sha256.Sum256(buf[:copy(buf[:], v)])
	ok := 0
	for i := range id.secrets {
		ok |= subtle.ConstantTimeCompare(sum[:], id.secrets[i][:])
	}
	return ok == 1
}

// isGUID reports whether s is a GUID in its usual form,
// 8-4-4-4-12 hexadecimal digits.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// isToken reports whether s is an RFC 9110 token, as a field name is.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
