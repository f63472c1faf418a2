package mqttwire

import "fmt"

// MQTT 5 property identifiers (MQTT 5 §2.2.2.2).
const (
	propPayloadFormat      = 0x01
	propMessageExpiry      = 0x02
	propContentType        = 0x03
	propResponseTopic      = 0x08
	propCorrelationData    = 0x09
	propSubscriptionID     = 0x0B
	propSessionExpiry      = 0x11
	propAssignedClientID   = 0x12
	propServerKeepAlive    = 0x13
	propAuthMethod         = 0x15
	propAuthData           = 0x16
	propRequestProblemInfo = 0x17
	propWillDelay          = 0x18
	propRequestRespInfo    = 0x19
	propResponseInfo       = 0x1A
	propServerReference    = 0x1C
	propReasonString       = 0x1F
	propReceiveMaximum     = 0x21
	propTopicAliasMax      = 0x22
	propTopicAlias         = 0x23
	propMaximumQoS         = 0x24
	propRetainAvailable    = 0x25
	propUserProperty       = 0x26
	propMaxPacketSize      = 0x27
	propWildcardSubAvail   = 0x28
	propSubIDAvail         = 0x29
	propSharedSubAvail     = 0x2A
)

// The data type of each property (MQTT 5 §2.2.2.2, table 2-4).
const (
	kindUnknown = iota
	kindByte
	kindU16
	kindU32
	kindVBI
	kindString
	kindBinary
	kindPair
)

func propKind(id int) int {
	switch id {
	case propPayloadFormat, propRequestProblemInfo, propRequestRespInfo, propMaximumQoS,
		propRetainAvailable, propWildcardSubAvail, propSubIDAvail, propSharedSubAvail:
		return kindByte
	case propServerKeepAlive, propReceiveMaximum, propTopicAliasMax, propTopicAlias:
		return kindU16
	case propMessageExpiry, propSessionExpiry, propWillDelay, propMaxPacketSize:
		return kindU32
	case propSubscriptionID:
		return kindVBI
	case propContentType, propResponseTopic, propAssignedClientID, propAuthMethod, propResponseInfo,
		propServerReference, propReasonString:
		return kindString
	case propCorrelationData, propAuthData:
		return kindBinary
	case propUserProperty:
		return kindPair
	}
	return kindUnknown
}

// prop is one property: id, and its value in n (byte, two-byte, four-byte and variable byte integers)
// or s (strings and binary data; a user property's name, its value is not kept).
type prop struct {
	id byte
	n  uint32
	s  []byte
}

// props walks an MQTT 5 property list. Use: p, rest, err := readProps(pkt, body); then
// for p.more() { pr, err := p.next(allowed) ... }.
type props struct {
	pkt  string // packet name for messages, e.g. "CONNECT"
	b    []byte
	seen uint64 // bit id: the property came already
}

// readProps takes the Property Length and the properties it covers off the front of b (MQTT 5
// §2.2.2.1). A length running past b is a Malformed Packet.
func readProps(pkt string, b []byte) (props, []byte, *Error) {
	n, rest, ok := readVBI(b)
	if !ok {
		return props{}, b, malformed(pkt + ": property length truncated or over 4 bytes")
	}
	if n > len(rest) {
		return props{}, b, malformed(pkt + ": property length beyond the packet")
	}
	return props{pkt: pkt, b: rest[:n:n]}, rest[n:], nil
}

func (p *props) more() bool { return len(p.b) > 0 }

// next takes the next property. An identifier that is not valid for the packet (not in allowed, a
// bit set of identifiers) or a value not of the right data type is a Malformed Packet (MQTT 5
// §2.2.2.2); a property other than the User Property that comes twice is a Protocol Error (each
// property's "It is a Protocol Error to include ... more than once"). String values are checked to be
// well-formed UTF-8 (MQTT 5 §1.5.4).
func (p *props) next(allowed uint64) (prop, *Error) {
	// The identifier is a Variable Byte Integer, but every identifier MQTT 5 defines is below 128: a
	// first byte with the continuation bit is either an unknown identifier or a non-minimal encoding
	// [MQTT-1.5.5-1], malformed both ways.
	if len(p.b) == 0 {
		return prop{}, malformed(p.pkt + ": property identifier missing")
	}
	id, rest, ok := int(p.b[0]), p.b[1:], true
	if id >= 0x80 {
		return prop{}, &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: property identifier 0x%02X is not one byte", p.pkt, id)}
	}
	if id >= 64 || allowed&(1<<id) == 0 {
		if propKind(id) == kindUnknown {
			return prop{}, &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: unknown property 0x%02X", p.pkt, id)}
		}
		return prop{}, &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: property 0x%02X not allowed", p.pkt, id)}
	}
	if id != propUserProperty {
		if p.seen&(1<<id) != 0 {
			return prop{}, &Error{Code: ProtocolError, Msg: fmt.Sprintf("%s: property 0x%02X more than once", p.pkt, id)}
		}
		p.seen |= 1 << id
	}
	pr := prop{id: byte(id)}
	switch propKind(id) {
	case kindByte:
		if len(rest) < 1 {
			ok = false
			break
		}
		pr.n, rest = uint32(rest[0]), rest[1:]
	case kindU16:
		var v uint16
		v, rest, ok = readU16(rest)
		pr.n = uint32(v)
	case kindU32:
		pr.n, rest, ok = readU32(rest)
	case kindVBI:
		var v int
		v, rest, ok = readVBI(rest)
		pr.n = uint32(v)
	case kindBinary:
		pr.s, rest, ok = readBinary(rest)
	case kindString, kindPair:
		var bad bool
		pr.s, rest, ok, bad = readString(rest)
		if ok && !bad && propKind(id) == kindPair {
			_, rest, ok, bad = readString(rest)
		}
		if bad {
			return prop{}, &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: property 0x%02X not well-formed UTF-8", p.pkt, id)}
		}
	}
	if !ok {
		return prop{}, &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: property 0x%02X truncated", p.pkt, id)}
	}
	p.b = rest
	return pr, nil
}

// The properties a client may send in each packet (MQTT 5 §2.2.2.2, table 2-4, and each packet's
// section), as bit sets for props.next.
const (
	connectProps = 1<<propSessionExpiry | 1<<propReceiveMaximum | 1<<propMaxPacketSize |
		1<<propTopicAliasMax | 1<<propRequestRespInfo | 1<<propRequestProblemInfo |
		1<<propUserProperty | 1<<propAuthMethod | 1<<propAuthData
	willProps = 1<<propWillDelay | 1<<propPayloadFormat | 1<<propMessageExpiry | 1<<propContentType |
		1<<propResponseTopic | 1<<propCorrelationData | 1<<propUserProperty
	publishProps = 1<<propPayloadFormat | 1<<propMessageExpiry | 1<<propTopicAlias |
		1<<propResponseTopic | 1<<propCorrelationData | 1<<propUserProperty |
		1<<propSubscriptionID | 1<<propContentType
	ackProps         = 1<<propReasonString | 1<<propUserProperty
	subscribeProps   = 1<<propSubscriptionID | 1<<propUserProperty
	unsubscribeProps = 1 << propUserProperty
	disconnectProps  = 1<<propSessionExpiry | 1<<propReasonString | 1<<propUserProperty |
		1<<propServerReference
)
