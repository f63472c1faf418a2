package mqttwire

// Publish is a parsed PUBLISH packet (MQTT 3.1.1 §3.3, MQTT 5 §3.3). Topic and Payload alias the body
// given to [ParsePublish].
type Publish struct {
	QoS           byte
	Dup, Retain   bool
	Topic         []byte // empty when an MQTT 5 client sends only a topic alias
	PacketID      uint16 // QoS 1 and 2 only
	TopicAlias    uint16 // 0: none
	PayloadFormat byte   // MQTT 5 Payload Format Indicator (1: UTF-8), 0 when absent
	Payload       []byte
}

// PUBLISH fixed header flags (MQTT 3.1.1 §3.3.1, MQTT 5 §3.3.1).
const (
	pubRetain = 0x01
	pubQoS    = 0x06
	pubDup    = 0x08
)

// ParsePublish parses a PUBLISH from its fixed header flags and body, as [Split] returns them; v5
// selects MQTT 5 (properties after the packet identifier) over MQTT 3.1.1.
//
// MalformedPacket: QoS 3 [MQTT-3.3.1-4]; DUP with QoS 0 [MQTT-3.3.1-2]; a topic name that is not
// well-formed UTF-8 or holds U+0000 [MQTT-3.3.2-1]; a truncated body; a property identifier not valid
// in PUBLISH or a property value of the wrong type (MQTT 5 §2.2.2.2); packet identifier 0 at QoS 1 or
// 2 in MQTT 3.1.1 [MQTT-2.3.1-1]; an empty topic name in MQTT 3.1.1 [MQTT-4.7.3-1].
//
// TopicNameInvalid: a topic name with '+' or '#' [MQTT-3.3.2-2]. TopicAliasInvalid: Topic Alias 0
// (MQTT 5 §3.3.2.3.4).
//
// ProtocolError (MQTT 5): packet identifier 0 at QoS 1 or 2 [MQTT-2.2.1-3]; an empty topic name
// without a topic alias (§3.3.2.3.4); a property other than the User Property more than once; a
// Payload Format Indicator other than 0 or 1 (§3.3.2.3.2); a Response Topic with a wildcard
// [MQTT-3.3.2-14]; a Subscription Identifier, which only a server sends [MQTT-3.3.4-6].
//
// Whether a topic alias is within the Topic Alias Maximum the server announced, and whether a payload
// announced as UTF-8 is, is the caller's to check. ParsePublish does not allocate, except for the
// *Error it returns.
func ParsePublish(flags byte, body []byte, v5 bool) (Publish, error) {
	p, err := parsePublish(flags, body, v5)
	if err != nil {
		return Publish{}, err
	}
	return p, nil
}

func parsePublish(flags byte, b []byte, v5 bool) (Publish, *Error) {
	p := Publish{
		QoS:    flags & pubQoS >> 1,
		Dup:    flags&pubDup != 0,
		Retain: flags&pubRetain != 0,
	}
	if p.QoS == 3 {
		return p, malformed("PUBLISH: QoS 3 [MQTT-3.3.1-4]")
	}
	if p.Dup && p.QoS == 0 {
		return p, malformed("PUBLISH: DUP with QoS 0 [MQTT-3.3.1-2]")
	}
	topic, b, ok, bad := readString(b)
	switch {
	case !ok:
		return p, malformed("PUBLISH: topic name truncated")
	case bad:
		return p, malformed("PUBLISH: topic name not well-formed UTF-8 [MQTT-3.3.2-1]")
	case hasWildcard(topic):
		return p, &Error{Code: TopicNameInvalid, Msg: "PUBLISH: wildcard in topic name [MQTT-3.3.2-2]"}
	}
	p.Topic = topic
	if p.QoS > 0 {
		if p.PacketID, b, ok = readU16(b); !ok {
			return p, malformed("PUBLISH: packet identifier truncated")
		}
		if p.PacketID == 0 {
			return p, violation(v5, "PUBLISH: packet identifier 0 at QoS > 0")
		}
	}
	if v5 {
		pp, rest, e := readProps("PUBLISH", b)
		if e != nil {
			return p, e
		}
		b = rest
		for pp.more() {
			pr, e := pp.next(publishProps)
			if e != nil {
				return p, e
			}
			switch pr.id {
			case propPayloadFormat:
				if pr.n > 1 {
					return p, protocolErr("PUBLISH: payload format indicator not 0 or 1")
				}
				p.PayloadFormat = byte(pr.n)
			case propTopicAlias:
				if pr.n == 0 {
					return p, &Error{Code: TopicAliasInvalid, Msg: "PUBLISH: topic alias 0"}
				}
				p.TopicAlias = uint16(pr.n)
			case propResponseTopic:
				if hasWildcard(pr.s) {
					return p, protocolErr("PUBLISH: wildcard in response topic [MQTT-3.3.2-14]")
				}
			case propSubscriptionID:
				return p, protocolErr("PUBLISH: subscription identifier from a client [MQTT-3.3.4-6]")
			}
		}
	}
	if len(p.Topic) == 0 && p.TopicAlias == 0 {
		return p, violation(v5, "PUBLISH: empty topic name without topic alias")
	}
	p.Payload = b
	return p, nil
}
