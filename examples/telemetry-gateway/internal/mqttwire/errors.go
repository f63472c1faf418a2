package mqttwire

import "fmt"

// Error is a packet the codec refuses. Code is the MQTT 5 reason code a server answers it with
// (MalformedPacket, ProtocolError, PacketTooLarge, TopicNameInvalid, TopicAliasInvalid,
// UnsupportedProtocolVersion, ...); an MQTT 3.1.1 server closes the connection instead, except for
// UnsupportedProtocolVersion, which it answers with CONNACK return code ConnRefusedProtocolVersion.
// Msg says what was wrong, e.g. "PUBLISH: QoS 3".
//
// Errors are built only on the refusal path; a packet the codec accepts costs no allocation.
type Error struct {
	Code byte
	Msg  string
}

// Error returns "mqttwire: Msg (0xCC Reason Name)".
func (e *Error) Error() string {
	return fmt.Sprintf("mqttwire: %s (0x%02X %s)", e.Msg, e.Code, reasonName(e.Code))
}

// Is reports whether target is an *Error with the same Code and either the same Msg or an empty one,
// so that errors.Is(err, &Error{Code: MalformedPacket}) matches every malformed packet.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Msg == "" || t.Msg == e.Msg)
}

func malformed(msg string) *Error { return &Error{Code: MalformedPacket, Msg: msg} }

func protocolErr(msg string) *Error { return &Error{Code: ProtocolError, Msg: msg} }

// violation is MQTT 3.1.1's "protocol violation" (the server closes the connection) and MQTT 5's
// Protocol Error: the codec reports it as MalformedPacket in 3.1.1, which has no reason codes, and as
// ProtocolError in 5.
func violation(v5 bool, msg string) *Error {
	if v5 {
		return protocolErr(msg)
	}
	return malformed(msg)
}
