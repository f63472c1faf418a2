package mqttwire

import "fmt"

// Connect is a parsed CONNECT packet (MQTT 3.1.1 §3.1, MQTT 5 §3.1). Username, Password and
// WillPayload alias the body given to [ParseConnect]; the strings are copies.
type Connect struct {
	ProtocolName string // "MQTT" (levels 4, 5) or "MQIsdp" (level 3)
	Version      byte   // the protocol level: 3 (MQTT 3.1), 4 (MQTT 3.1.1) or 5
	CleanStart   bool   // Clean Session in MQTT 3.1.1
	KeepAlive    uint16 // seconds; 0: off
	ClientID     string // may be empty (MQTT 3.1.1 §3.1.3.1, MQTT 5 §3.1.3.1): the server decides

	Username    []byte // well-formed UTF-8
	HasUsername bool
	Password    []byte
	HasPassword bool

	Will        bool
	WillQoS     byte
	WillRetain  bool
	WillTopic   string
	WillPayload []byte

	// MQTT 5 properties (zero when absent).
	SessionExpiry       uint32 // seconds
	ReceiveMaximum      uint16 // 0: absent (65,535 applies)
	MaxPacketSize       uint32 // 0: absent (no limit)
	TopicAliasMax       uint16
	RequestProblemInfo  bool // true when absent (the default)
	RequestResponseInfo bool
	AuthMethod          string // non-empty: the client asks for enhanced authentication
}

// Connect flags (MQTT 3.1.1 §3.1.2.3, MQTT 5 §3.1.2.3).
const (
	flagReserved   = 0x01
	flagCleanStart = 0x02
	flagWill       = 0x04
	flagWillQoS    = 0x18
	flagWillRetain = 0x20
	flagPassword   = 0x40
	flagUsername   = 0x80
)

// ParseConnect parses a CONNECT body (the packet after its fixed header, as [Split] returns it).
//
// A protocol level other than 3, 4 or 5, or a protocol name that does not match its level ("MQIsdp"
// for 3, "MQTT" for 4 and 5), returns Connect{Version: level} and an *Error with Code
// UnsupportedProtocolVersion, so that the server can answer in the client's format (MQTT 3.1.1
// §3.1.2.2 [MQTT-3.1.2-2], MQTT 5 §3.1.2.2 [MQTT-3.1.2-2]).
//
// MalformedPacket: the reserved connect flag set [MQTT-3.1.2-3]; Will QoS or Will Retain without the
// Will Flag (3.1.1 [MQTT-3.1.2-13], [MQTT-3.1.2-15]; 5 [MQTT-3.1.2-11], [MQTT-3.1.2-13]); Will QoS 3
// (3.1.1 [MQTT-3.1.2-14], 5 [MQTT-3.1.2-12]); a password without a user name in MQTT 3.1 and 3.1.1
// [MQTT-3.1.2-22]; a string that is not well-formed
// UTF-8 or holds U+0000 (MQTT 5 §1.5.4, MQTT 3.1.1 §1.5.3); a truncated body or bytes after the
// payload; an MQTT 5 property identifier not valid in CONNECT or in the will properties (MQTT 5
// §2.2.2.2); an empty will topic [MQTT-4.7.3-1]. TopicNameInvalid: a will topic with '+' or '#'
// [MQTT-4.7.0-1] (MQTT 5 CONNACK 0x90: "The Will Topic Name is not malformed, but is not accepted").
//
// ProtocolError (MQTT 5): a property other than the User Property more than once; Receive Maximum 0
// (§3.1.2.11.3); Maximum Packet Size 0 (§3.1.2.11.4); Request Response or Problem Information other
// than 0 or 1 (§3.1.2.11.6, §3.1.2.11.7); Authentication Data without an Authentication Method
// (§3.1.2.11.10); a will Payload Format Indicator other than 0 or 1 (§3.1.3.2.3); a will Response
// Topic with a wildcard (§3.1.3.2.5). The will properties' values are checked and dropped.
//
// On any error after the protocol level is read the returned Connect holds at least Version and
// ProtocolName. ParseConnect allocates the strings it returns.
func ParseConnect(body []byte) (Connect, error) {
	c, err := parseConnect(body)
	if err != nil {
		return c, err
	}
	return c, nil
}

func parseConnect(b []byte) (Connect, *Error) {
	var c Connect
	name, b, ok := readBinary(b)
	if !ok || len(b) < 1 {
		return c, malformed("CONNECT: protocol name or level truncated")
	}
	level := b[0]
	b = b[1:]
	c.Version = level
	switch {
	case level == 3 && string(name) == "MQIsdp", (level == 4 || level == 5) && string(name) == "MQTT":
		c.ProtocolName = string(name)
	default:
		return Connect{Version: level}, &Error{Code: UnsupportedProtocolVersion,
			Msg: fmt.Sprintf("CONNECT: protocol %q level %d", clipForMsg(name), level)}
	}
	v5 := level == 5
	if len(b) < 3 {
		return c, malformed("CONNECT: connect flags or keep alive truncated")
	}
	flags := b[0]
	c.KeepAlive = uint16(b[1])<<8 | uint16(b[2])
	b = b[3:]
	if flags&flagReserved != 0 {
		return c, malformed("CONNECT: reserved connect flag set [MQTT-3.1.2-3]")
	}
	c.CleanStart = flags&flagCleanStart != 0
	c.Will = flags&flagWill != 0
	c.WillQoS = flags & flagWillQoS >> 3
	c.WillRetain = flags&flagWillRetain != 0
	c.HasUsername = flags&flagUsername != 0
	c.HasPassword = flags&flagPassword != 0
	switch {
	case c.WillQoS == 3:
		return c, malformed("CONNECT: will QoS 3 (3.1.1 [MQTT-3.1.2-14], 5 [MQTT-3.1.2-12])")
	case !c.Will && c.WillQoS != 0:
		return c, malformed("CONNECT: will QoS without will flag (3.1.1 [MQTT-3.1.2-13], 5 [MQTT-3.1.2-11])")
	case !c.Will && c.WillRetain:
		return c, malformed("CONNECT: will retain without will flag (3.1.1 [MQTT-3.1.2-15], 5 [MQTT-3.1.2-13])")
	case !v5 && c.HasPassword && !c.HasUsername:
		return c, malformed("CONNECT: password without user name (3.1.1 [MQTT-3.1.2-22])")
	}

	c.RequestProblemInfo = true
	if v5 {
		var p props
		var e *Error
		if p, b, e = readProps("CONNECT", b); e != nil {
			return c, e
		}
		if e = c.connectProps(&p); e != nil {
			return c, e
		}
	}

	id, b, ok, bad := readString(b)
	switch {
	case !ok:
		return c, malformed("CONNECT: client identifier truncated")
	case bad:
		return c, malformed("CONNECT: client identifier not well-formed UTF-8 [MQTT-3.1.3-4]")
	}
	c.ClientID = string(id)

	if c.Will {
		if v5 {
			p, rest, e := readProps("CONNECT will", b)
			if e != nil {
				return c, e
			}
			b = rest
			for p.more() {
				pr, e := p.next(willProps)
				if e != nil {
					return c, e
				}
				switch {
				case pr.id == propPayloadFormat && pr.n > 1:
					return c, protocolErr("CONNECT: will payload format indicator not 0 or 1")
				case pr.id == propResponseTopic && hasWildcard(pr.s):
					return c, protocolErr("CONNECT: wildcard in will response topic (MQTT 5 §3.1.3.2.5)")
				}
			}
		}
		topic, rest, ok, bad := readString(b)
		switch {
		case !ok:
			return c, malformed("CONNECT: will topic truncated")
		case bad:
			return c, malformed("CONNECT: will topic not well-formed UTF-8 (3.1.1 [MQTT-3.1.3-10], 5 [MQTT-3.1.3-11])")
		case len(topic) == 0:
			return c, malformed("CONNECT: empty will topic [MQTT-4.7.3-1]")
		case hasWildcard(topic):
			return c, &Error{Code: TopicNameInvalid, Msg: "CONNECT: wildcard in will topic [MQTT-4.7.0-1]"}
		}
		c.WillTopic = string(topic)
		if c.WillPayload, b, ok = readBinary(rest); !ok {
			return c, malformed("CONNECT: will payload truncated")
		}
	}
	if c.HasUsername {
		switch c.Username, b, ok, bad = readString(b); {
		case !ok:
			return c, malformed("CONNECT: user name truncated")
		case bad:
			return c, malformed("CONNECT: user name not well-formed UTF-8 (3.1.1 [MQTT-3.1.3-11], 5 [MQTT-3.1.3-12])")
		}
	}
	if c.HasPassword {
		if c.Password, b, ok = readBinary(b); !ok {
			return c, malformed("CONNECT: password truncated")
		}
	}
	if len(b) != 0 {
		return c, malformed("CONNECT: bytes after the payload")
	}
	return c, nil
}

// connectProps reads the CONNECT properties into c (MQTT 5 §3.1.2.11).
func (c *Connect) connectProps(p *props) *Error {
	hasAuthData := false
	for p.more() {
		pr, e := p.next(connectProps)
		if e != nil {
			return e
		}
		switch pr.id {
		case propSessionExpiry:
			c.SessionExpiry = pr.n
		case propReceiveMaximum:
			if pr.n == 0 {
				return protocolErr("CONNECT: receive maximum 0")
			}
			c.ReceiveMaximum = uint16(pr.n)
		case propMaxPacketSize:
			if pr.n == 0 {
				return protocolErr("CONNECT: maximum packet size 0")
			}
			c.MaxPacketSize = pr.n
		case propTopicAliasMax:
			c.TopicAliasMax = uint16(pr.n)
		case propRequestRespInfo:
			if pr.n > 1 {
				return protocolErr("CONNECT: request response information not 0 or 1")
			}
			c.RequestResponseInfo = pr.n == 1
		case propRequestProblemInfo:
			if pr.n > 1 {
				return protocolErr("CONNECT: request problem information not 0 or 1")
			}
			c.RequestProblemInfo = pr.n == 1
		case propAuthMethod:
			c.AuthMethod = string(pr.s)
		case propAuthData:
			hasAuthData = true
		}
	}
	if hasAuthData && p.seen&(1<<propAuthMethod) == 0 {
		return protocolErr("CONNECT: authentication data without authentication method")
	}
	return nil
}

// clipForMsg shortens a client-chosen value quoted in an error message.
func clipForMsg(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}
