package mqttwire

// ParsePubrel parses a PUBREL (MQTT 3.1.1 §3.6, MQTT 5 §3.6) from its fixed header flags and body.
// The flags must be 0b0010 [MQTT-3.6.1-1] and the body holds the packet identifier; in MQTT 5 it may
// add a reason code (code is 0 when absent, §3.6.2.1) and properties (Reason String and User
// Property). MalformedPacket: other flags, a truncated body, bytes after the identifier in MQTT 3.1.1,
// a property not valid in PUBREL. Packet identifier 0: MalformedPacket (3.1.1) or ProtocolError (5)
// [MQTT-2.3.1-1]. Which reason codes are acceptable (0x00, 0x92) is the caller's to check.
func ParsePubrel(flags byte, body []byte, v5 bool) (id uint16, code byte, err error) {
	id, code, e := parsePubrel(flags, body, v5)
	if e != nil {
		return 0, 0, e
	}
	return id, code, nil
}

func parsePubrel(flags byte, b []byte, v5 bool) (uint16, byte, *Error) {
	if flags != 0b0010 {
		return 0, 0, malformed("PUBREL: fixed header flags not 0010 [MQTT-3.6.1-1]")
	}
	id, b, ok := readU16(b)
	if !ok {
		return 0, 0, malformed("PUBREL: packet identifier truncated")
	}
	if id == 0 {
		return 0, 0, violation(v5, "PUBREL: packet identifier 0")
	}
	if !v5 {
		if len(b) != 0 {
			return 0, 0, malformed("PUBREL: bytes after the packet identifier")
		}
		return id, 0, nil
	}
	if len(b) == 0 {
		return id, Success, nil
	}
	code := b[0]
	if len(b) == 1 {
		return id, code, nil // no Property Length when the Remaining Length is 3 (§3.6.2.2)
	}
	if e := skipProps("PUBREL", b[1:], ackProps); e != nil {
		return 0, 0, e
	}
	return id, code, nil
}

// skipProps checks a property list that must end the packet and drops its values.
func skipProps(pkt string, b []byte, allowed uint64) *Error {
	p, rest, e := readProps(pkt, b)
	if e != nil {
		return e
	}
	for p.more() {
		if _, e := p.next(allowed); e != nil {
			return e
		}
	}
	if len(rest) != 0 {
		return malformed(pkt + ": bytes after the properties")
	}
	return nil
}

// ParseSubscribe parses a SUBSCRIBE (MQTT 3.1.1 §3.8, MQTT 5 §3.8) far enough to refuse it: the fixed
// header flags (0b0010, [MQTT-3.8.1-1]), a non-zero packet identifier, the MQTT 5 properties
// (Subscription Identifier, not 0, and User Property) and the topic filters, at least one
// [MQTT-3.8.3-3], each well-formed UTF-8 and non-empty [MQTT-4.7.3-1] and followed by subscription
// options whose reserved bits are zero (3.1.1 [MQTT-3-8.3-4]; 5 [MQTT-3.8.3-5]) and whose QoS is not 3.
// It returns how many filters there are. MQTT 5 Retain Handling 3, QoS 3 in MQTT 5 (§3.8.3.1), and
// the cases MQTT 3.1.1 calls a protocol violation (no filter [MQTT-3.8.3-3], packet identifier 0
// [MQTT-2.3.1-1]) are a ProtocolError in 5 and MalformedPacket in 3.1.1; the rest is MalformedPacket.
// The filters' wildcard syntax is not checked: the gateway refuses every subscription.
func ParseSubscribe(flags byte, body []byte, v5 bool) (id uint16, filters int, err error) {
	id, filters, e := parseSubscribe(flags, body, v5, true)
	if e != nil {
		return 0, 0, e
	}
	return id, filters, nil
}

// ParseUnsubscribe parses an UNSUBSCRIBE (MQTT 3.1.1 §3.10, MQTT 5 §3.10) the same way as
// [ParseSubscribe]: flags 0b0010 [MQTT-3.10.1-1], a non-zero packet identifier, MQTT 5 properties
// (User Property only) and at least one topic filter [MQTT-3.10.3-2], each well-formed UTF-8 and
// non-empty. It returns how many filters there are.
func ParseUnsubscribe(flags byte, body []byte, v5 bool) (id uint16, filters int, err error) {
	id, filters, e := parseSubscribe(flags, body, v5, false)
	if e != nil {
		return 0, 0, e
	}
	return id, filters, nil
}

func parseSubscribe(flags byte, b []byte, v5, sub bool) (uint16, int, *Error) {
	pkt, allowed := "UNSUBSCRIBE", uint64(unsubscribeProps)
	if sub {
		pkt, allowed = "SUBSCRIBE", subscribeProps
	}
	if flags != 0b0010 {
		return 0, 0, malformed(pkt + ": fixed header flags not 0010")
	}
	id, b, ok := readU16(b)
	if !ok {
		return 0, 0, malformed(pkt + ": packet identifier truncated")
	}
	if id == 0 {
		return 0, 0, violation(v5, pkt+": packet identifier 0")
	}
	if v5 {
		p, rest, e := readProps(pkt, b)
		if e != nil {
			return 0, 0, e
		}
		b = rest
		for p.more() {
			pr, e := p.next(allowed)
			if e != nil {
				return 0, 0, e
			}
			if pr.id == propSubscriptionID && pr.n == 0 {
				return 0, 0, protocolErr(pkt + ": subscription identifier 0")
			}
		}
	}
	n := 0
	for len(b) > 0 {
		f, rest, ok, bad := readString(b)
		switch {
		case !ok:
			return 0, 0, malformed(pkt + ": topic filter truncated")
		case bad:
			return 0, 0, malformed(pkt + ": topic filter not well-formed UTF-8")
		case len(f) == 0:
			return 0, 0, malformed(pkt + ": empty topic filter [MQTT-4.7.3-1]")
		}
		b = rest
		if sub {
			if len(b) == 0 {
				return 0, 0, malformed(pkt + ": subscription options missing")
			}
			o := b[0]
			b = b[1:]
			switch {
			case !v5 && o&0xfc != 0:
				return 0, 0, malformed(pkt + ": reserved bits of requested QoS set [MQTT-3-8.3-4]")
			case v5 && o&0xc0 != 0:
				return 0, 0, malformed(pkt + ": reserved bits of subscription options set [MQTT-3.8.3-5]")
			case o&0x03 == 3:
				return 0, 0, violation(v5, pkt+": QoS 3 (3.1.1 [MQTT-3-8.3-4], 5 §3.8.3.1)")
			case v5 && o>>4&0x03 == 3:
				return 0, 0, protocolErr(pkt + ": retain handling 3")
			}
		}
		n++
	}
	if n == 0 {
		return 0, 0, violation(v5, pkt+": no topic filter")
	}
	return id, n, nil
}

// ParseDisconnect parses a DISCONNECT body. MQTT 3.1.1 (§3.14): the body must be empty. MQTT 5
// (§3.14.2): a reason code (0, Normal disconnection, when absent) and properties, both optional; the
// properties allowed are Session Expiry Interval, Reason String, User Property and Server Reference.
// hasExpiry reports whether a Session Expiry Interval came; whether it may (not above 0 when the
// CONNECT's was 0, §3.14.2.2.2) is the caller's to check. Anything else is MalformedPacket, a duplicated
// property ProtocolError.
func ParseDisconnect(body []byte, v5 bool) (code byte, sessionExpiry uint32, hasExpiry bool, err error) {
	code, sessionExpiry, hasExpiry, e := parseDisconnect(body, v5)
	if e != nil {
		return 0, 0, false, e
	}
	return code, sessionExpiry, hasExpiry, nil
}

func parseDisconnect(b []byte, v5 bool) (byte, uint32, bool, *Error) {
	if !v5 {
		if len(b) != 0 {
			return 0, 0, false, malformed("DISCONNECT: MQTT 3.1.1 body not empty")
		}
		return 0, 0, false, nil
	}
	if len(b) == 0 {
		return Success, 0, false, nil
	}
	code := b[0]
	if len(b) == 1 {
		return code, 0, false, nil
	}
	p, rest, e := readProps("DISCONNECT", b[1:])
	if e != nil {
		return 0, 0, false, e
	}
	var expiry uint32
	var has bool
	for p.more() {
		pr, e := p.next(disconnectProps)
		if e != nil {
			return 0, 0, false, e
		}
		if pr.id == propSessionExpiry {
			expiry, has = pr.n, true
		}
	}
	if len(rest) != 0 {
		return 0, 0, false, malformed("DISCONNECT: bytes after the properties")
	}
	return code, expiry, has, nil
}
