package proxyproto

import "errors"

// Errors reported for refused connections (in [Rejection].Err), by
// [ParseHeader] and by the writer. They are wrapped with context; test for them
// with [errors.Is]. The specific header errors (ErrChecksum, ErrUniqueIDTooLong,
// ErrFamilyMismatch, ErrHeaderTooLong, ErrInvalidSSL) also match
// ErrInvalidHeader.
var (
	// ErrInvalidConfig means a [Config] field, or an option given to a
	// method, is out of range.
	ErrInvalidConfig = errors.New("proxyproto: invalid config")

	// ErrNoHeader means a connection did not start with a PROXY protocol
	// signature: from a trusted upstream under [HeaderlessRefuse], or input
	// to [ParseHeader] that is not a header.
	ErrNoHeader = errors.New("proxyproto: no PROXY protocol header")

	// ErrUntrustedHeader means a peer the listener does not trust sent a
	// PROXY protocol header, under [UntrustedClose].
	ErrUntrustedHeader = errors.New("proxyproto: PROXY protocol header from an untrusted peer")

	// ErrTimeout means the header (or, for a silent client, its first bytes)
	// did not arrive within Config.ReadHeaderTimeout.
	ErrTimeout = errors.New("proxyproto: header read timed out")

	// ErrIncomplete means the connection ended, or the input to
	// [ParseHeader] ran out, before the header was complete.
	ErrIncomplete = errors.New("proxyproto: incomplete PROXY protocol header")

	// ErrInvalidHeader means the header breaks the PROXY protocol
	// specification or one of the checks this package adds.
	ErrInvalidHeader = errors.New("proxyproto: invalid PROXY protocol header")

	// ErrChecksum means a v2 header's PP2_TYPE_CRC32C TLV does not match the
	// header (spec section 2.2.3), is not 4 bytes long, or appears twice,
	// whatever the command: LOCAL headers are checked too.
	ErrChecksum = errors.New("proxyproto: CRC32C mismatch")

	// ErrUniqueIDTooLong means a PP2_TYPE_UNIQUE_ID TLV is longer than the
	// 128 bytes spec section 2.2.5 allows.
	ErrUniqueIDTooLong = errors.New("proxyproto: UNIQUE_ID longer than 128 bytes")

	// ErrHeaderTooLong means a v2 header's length field asks for more than
	// the listener's limit: Config.MaxHeaderBytes for a trusted upstream,
	// [MaxHeaderLen] for any other peer.
	ErrHeaderTooLong = errors.New("proxyproto: header longer than the limit")

	// ErrInvalidSSL means a PP2_TYPE_SSL TLV breaks spec section 2.2.6 or one
	// of the rules listed on [SSL], or a header carries two.
	ErrInvalidSSL = errors.New("proxyproto: invalid SSL TLV")

	// ErrNoClientCert means an [SSL] carries no client certificate: no
	// PP2_SUBTYPE_SSL_CLIENT_CERT sub-TLV, or no certificate bit.
	ErrNoClientCert = errors.New("proxyproto: no client certificate in the SSL TLV")

	// ErrInvalidClientCert means the certificate in an [SSL] is not an X.509
	// certificate, or the CN sub-TLV is not one of its subject's common
	// names.
	ErrInvalidClientCert = errors.New("proxyproto: invalid client certificate in the SSL TLV")

	// ErrClientCertUntrusted means the certificate in an [SSL] does not
	// verify under the caller's [crypto/x509.VerifyOptions]; crypto/x509's
	// error is wrapped too.
	ErrClientCertUntrusted = errors.New("proxyproto: client certificate does not verify")

	// ErrFamilyMismatch means the header's address family or transport does
	// not fit its addresses or this connection: TCP4 with IPv6 addresses (or
	// the reverse), a datagram transport on a stream, or Unix-socket addresses,
	// which carry no IP to hand on.
	ErrFamilyMismatch = errors.New("proxyproto: address family does not match")

	// ErrInvalidHeaderValue means a [Header] given to the writer cannot be
	// encoded: wrong version or command, missing or mixed addresses, zones,
	// TLVs on a v1 header, or TLVs too long.
	ErrInvalidHeaderValue = errors.New("proxyproto: header cannot be encoded")
)
