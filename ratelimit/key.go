package ratelimit

import (
	"net/netip"
	"strconv"

	"github.com/sourceip/sourceip/clientip"
)

// Key names a bucket: the client's rate-limit prefix from a
// [clientip.Keyer] (an IPv4 address, an IPv6 /64 by default, the IPv4
// address a 6to4, Teredo or NAT64 address carries), optionally
// narrowed by an identity. It is a comparable value, used as a map key
// without allocation.
type Key struct {
	// Prefix is the client's key from [clientip.Keyer.Key] (or the node's,
	// for a masqueraded client).
	Prefix netip.Prefix
	// Identity narrows the prefix's bucket: one bucket per (Prefix,
	// Identity). "" for none. It must be an identity the client cannot
	// choose freely (a verified API key, a client certificate): a client
	// that can mint identities can mint buckets, and so escapes its limit.
	Identity string
}

// KeyFor returns the key of client address a under keyer k, with no
// identity. It reports false for the invalid address and for an invalid
// Keyer. It does not allocate.
func KeyFor(k clientip.Keyer, a netip.Addr) (Key, bool) {
	p, ok := k.Key(a)
	return Key{Prefix: p}, ok
}

// String returns the key's text: the prefix ("198.51.100.7/32",
// "2001:db8:1:2::/64"), followed, when there is an identity, by a space and
// the identity quoted as by [strconv.Quote]. Distinct keys have distinct
// texts, so shared stores use it as the name of the bucket.
func (k Key) String() string {
	b, _ := k.AppendText(make([]byte, 0, 48+len(k.Identity)))
	return string(b)
}

// AppendText implements [encoding.TextAppender] with the form of
// [Key.String].
func (k Key) AppendText(b []byte) ([]byte, error) {
	b, _ = k.Prefix.AppendText(b)
	if k.Identity != "" {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, k.Identity)
	}
	return b, nil
}
