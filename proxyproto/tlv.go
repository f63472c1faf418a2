package proxyproto

import (
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"

	pp "github.com/pires/go-proxyproto"
	"github.com/pires/go-proxyproto/tlvparse"
)

// TLVType is the type byte of a PROXY protocol v2 TLV (spec section 2.2).
type TLVType uint8

// TLV types this package knows by name. Others are carried and reachable
// with [TLVs.Lookup] and [TLVs.All].
const (
	TLVALPN      TLVType = 0x01 // PP2_TYPE_ALPN: the TLS ALPN protocol
	TLVAuthority TLVType = 0x02 // PP2_TYPE_AUTHORITY: host name (TLS SNI), UTF-8
	TLVCRC32C    TLVType = 0x03 // PP2_TYPE_CRC32C: CRC32c of the header
	TLVNoop      TLVType = 0x04 // PP2_TYPE_NOOP: padding
	TLVUniqueID  TLVType = 0x05 // PP2_TYPE_UNIQUE_ID: opaque connection id, at most 128 bytes
	TLVSSL       TLVType = 0x20 // PP2_TYPE_SSL: TLS facts, see [SSL]
	TLVNetNS     TLVType = 0x30 // PP2_TYPE_NETNS: network namespace name
	TLVGCP       TLVType = 0xE0 // Google Cloud Private Service Connect connection id
	TLVAWS       TLVType = 0xEA // AWS; subtype 0x01 is the VPC endpoint id
	TLVAzure     TLVType = 0xEE // Azure; subtype 0x01 is the Private Link id
)

var tlvNames = map[TLVType]string{
	TLVALPN: "alpn", TLVAuthority: "authority", TLVCRC32C: "crc32c", TLVNoop: "noop",
	TLVUniqueID: "unique_id", TLVSSL: "ssl", TLVNetNS: "netns",
	TLVGCP: "gcp", TLVAWS: "aws", TLVAzure: "azure",
}

// String returns the type's name, such as "authority", or "0xNN".
func (t TLVType) String() string {
	if n, ok := tlvNames[t]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", uint8(t))
}

// TLV is one type-length-value field.
type TLV struct {
	Type  TLVType
	Value string
}

// TLVs is the TLV vector of a v2 header, kept in its wire encoding. The zero
// value is the empty vector. It is a small immutable comparable value, safe
// for concurrent use.
//
// TLVs of a [Listener]'s connection are those of a PROXY header from a
// trusted upstream; a LOCAL header's TLVs are never kept. The accessors return
// the first field of their type and report whether it was present and well
// formed.
type TLVs struct {
	raw string
}

// NewTLVs encodes list, in order. A value longer than 65535 bytes is an error
// wrapping [ErrInvalidHeaderValue].
func NewTLVs(list ...TLV) (TLVs, error) {
	var b []byte
	for _, t := range list {
		if len(t.Value) > 0xffff {
			return TLVs{}, fmt.Errorf("%w: TLV %s is %d bytes long", ErrInvalidHeaderValue, t.Type, len(t.Value))
		}
		b = append(b, byte(t.Type), byte(len(t.Value)>>8), byte(len(t.Value)))
		b = append(b, t.Value...)
	}
	return TLVs{raw: string(b)}, nil
}

// Len returns the length of the encoded vector in bytes.
func (t TLVs) Len() int { return len(t.raw) }

// Bytes returns a copy of the wire encoding.
func (t TLVs) Bytes() []byte { return []byte(t.raw) }

// All returns an iterator over the fields in wire order. It stops at a
// malformed tail, which a parsed header never has. It does not allocate.
func (t TLVs) All() iter.Seq[TLV] {
	return func(yield func(TLV) bool) {
		s := t.raw
		for len(s) >= 3 {
			l := int(s[1])<<8 | int(s[2])
			if 3+l > len(s) {
				return
			}
			if !yield(TLV{Type: TLVType(s[0]), Value: s[3 : 3+l]}) {
				return
			}
			s = s[3+l:]
		}
	}
}

// Lookup returns the value of the first field of type typ.
func (t TLVs) Lookup(typ TLVType) (string, bool) {
	for f := range t.All() {
		if f.Type == typ {
			return f.Value, true
		}
	}
	return "", false
}

// String returns the field types in order, such as "authority,unique_id,crc32c".
func (t TLVs) String() string {
	var b strings.Builder
	for f := range t.All() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Type.String())
	}
	return b.String()
}

// ALPN returns the PP2_TYPE_ALPN value, the protocol the client negotiated
// with the upstream, such as "h2".
func (t TLVs) ALPN() (string, bool) { return t.Lookup(TLVALPN) }

// Authority returns the PP2_TYPE_AUTHORITY value: the host name the client
// asked for (TLS SNI or HTTP Host). A value that is not UTF-8, as the spec
// requires, is reported absent.
func (t TLVs) Authority() (string, bool) {
	v, ok := t.Lookup(TLVAuthority)
	if !ok || !utf8.ValidString(v) {
		return "", false
	}
	return v, true
}

// UniqueID returns the PP2_TYPE_UNIQUE_ID value, an opaque identifier of at
// most 128 bytes (longer ones are refused at parse time).
func (t TLVs) UniqueID() (string, bool) { return t.Lookup(TLVUniqueID) }

// NetNS returns the PP2_TYPE_NETNS value, the upstream's network namespace.
func (t TLVs) NetNS() (string, bool) { return t.Lookup(TLVNetNS) }

// CRC32C returns the checksum the header carried; on a parsed header it has
// been verified.
func (t TLVs) CRC32C() (uint32, bool) {
	v, ok := t.Lookup(TLVCRC32C)
	if !ok || len(v) != 4 {
		return 0, false
	}
	return uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3]), true
}

// of returns the fields of type typ in go-proxyproto's form, for tlvparse.
func (t TLVs) of(typ TLVType) []pp.TLV {
	var out []pp.TLV
	for f := range t.All() {
		if f.Type == typ {
			out = append(out, pp.TLV{Type: pp.PP2Type(f.Type), Value: []byte(f.Value)})
		}
	}
	return out
}

// AWSVPCEndpointID returns the VPC endpoint id an AWS Network Load Balancer
// reports for PrivateLink connections (type 0xEA, subtype 0x01), such as
// "vpce-08d2bf15fac5001c9". It allocates.
func (t TLVs) AWSVPCEndpointID() (string, bool) {
	id := tlvparse.FindAWSVPCEndpointID(t.of(TLVAWS))
	return id, id != ""
}

// AzurePrivateLinkID returns the Private Link (private endpoint) id an Azure
// load balancer reports (type 0xEE, subtype 0x01, little-endian). It
// allocates.
func (t TLVs) AzurePrivateLinkID() (uint32, bool) {
	return tlvparse.FindAzurePrivateEndpointLinkID(t.of(TLVAzure))
}

// GCPPSCConnectionID returns the Private Service Connect connection id Google
// Cloud reports (type 0xE0, 8 bytes big-endian). It allocates.
func (t TLVs) GCPPSCConnectionID() (uint64, bool) {
	return tlvparse.ExtractPSCConnectionID(t.of(TLVGCP))
}

// SSL returns the PP2_TYPE_SSL field, decoded. On a parsed header it has
// passed every rule listed on [SSL] (a header whose SSL TLV breaks one, or
// that carries two, is refused); in TLVs built with [NewTLVs] a malformed
// field is reported absent. The strings of the result share t's memory: it
// does not allocate.
func (t TLVs) SSL() (SSL, bool) {
	v, ok := t.Lookup(TLVSSL)
	if !ok {
		return SSL{}, false
	}
	s, err := parseSSL(v)
	return s, err == nil
}
