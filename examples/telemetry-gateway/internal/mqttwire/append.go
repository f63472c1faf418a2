package mqttwire

// ConnackProps are the MQTT 5 CONNACK properties the server sends (MQTT 5 §3.2.2.3). Zero values are
// omitted, except MaximumQoS: its zero value sends Maximum QoS 0.
type ConnackProps struct {
	ReceiveMaximum     uint16 // 0: omitted (65,535 applies)
	MaxPacketSize      uint32 // 0: omitted (no limit)
	TopicAliasMax      uint16 // 0: omitted (the client may use no alias)
	MaximumQoS         byte   // 2 or more: omitted (2 is the default); 0 or 1: sent
	RetainUnavailable  bool   // sends Retain Available = 0
	NoWildcardSubs     bool   // sends Wildcard Subscription Available = 0
	NoSubscriptionIDs  bool   // sends Subscription Identifiers Available = 0
	NoSharedSubs       bool   // sends Shared Subscription Available = 0
	AssignedClientID   string // "": omitted
	SessionExpiry      uint32
	HasSessionExpiry   bool // sends SessionExpiry
	ServerKeepAlive    uint16
	HasServerKeepAlive bool   // sends ServerKeepAlive
	ReasonString       string // "": omitted
}

// The Append functions append one packet to dst and return the extended slice, like append: they
// allocate only when dst has no room. Strings longer than 65,535 bytes are cut to that length at a
// rune boundary.

// AppendConnack appends a CONNACK (MQTT 3.1.1 §3.2, MQTT 5 §3.2). MQTT 3.1.1 (v5 false): four bytes,
// code is the return code 0..5, props is ignored. MQTT 5: code is a reason code and props, which may
// be nil (no properties), the properties.
func AppendConnack(dst []byte, v5, sessionPresent bool, code byte, props *ConnackProps) []byte {
	var ack byte
	if sessionPresent {
		ack = 1
	}
	if !v5 {
		return append(dst, CONNACK<<4, 2, ack, code)
	}
	n := connackPropsLen(props)
	dst = append(dst, CONNACK<<4)
	dst = appendVBI(dst, 2+vbiLen(n)+n)
	dst = append(dst, ack, code)
	dst = appendVBI(dst, n)
	if props == nil {
		return dst
	}
	p := props
	if p.HasSessionExpiry {
		dst = appendU32(append(dst, propSessionExpiry), p.SessionExpiry)
	}
	if p.ReceiveMaximum != 0 {
		dst = appendU16(append(dst, propReceiveMaximum), p.ReceiveMaximum)
	}
	if p.MaximumQoS < 2 {
		dst = append(dst, propMaximumQoS, p.MaximumQoS)
	}
	if p.RetainUnavailable {
		dst = append(dst, propRetainAvailable, 0)
	}
	if p.MaxPacketSize != 0 {
		dst = appendU32(append(dst, propMaxPacketSize), p.MaxPacketSize)
	}
	if p.AssignedClientID != "" {
		dst = appendString(append(dst, propAssignedClientID), clipString(p.AssignedClientID))
	}
	if p.TopicAliasMax != 0 {
		dst = appendU16(append(dst, propTopicAliasMax), p.TopicAliasMax)
	}
	if p.ReasonString != "" {
		dst = appendString(append(dst, propReasonString), clipString(p.ReasonString))
	}
	if p.NoWildcardSubs {
		dst = append(dst, propWildcardSubAvail, 0)
	}
	if p.NoSubscriptionIDs {
		dst = append(dst, propSubIDAvail, 0)
	}
	if p.NoSharedSubs {
		dst = append(dst, propSharedSubAvail, 0)
	}
	if p.HasServerKeepAlive {
		dst = appendU16(append(dst, propServerKeepAlive), p.ServerKeepAlive)
	}
	return dst
}

// connackPropsLen is the length of the properties AppendConnack writes for p.
func connackPropsLen(p *ConnackProps) int {
	if p == nil {
		return 0
	}
	n := 0
	if p.HasSessionExpiry {
		n += 5
	}
	if p.ReceiveMaximum != 0 {
		n += 3
	}
	if p.MaximumQoS < 2 {
		n += 2
	}
	if p.RetainUnavailable {
		n += 2
	}
	if p.MaxPacketSize != 0 {
		n += 5
	}
	if p.AssignedClientID != "" {
		n += 3 + len(clipString(p.AssignedClientID))
	}
	if p.TopicAliasMax != 0 {
		n += 3
	}
	if p.ReasonString != "" {
		n += 3 + len(clipString(p.ReasonString))
	}
	if p.NoWildcardSubs {
		n += 2
	}
	if p.NoSubscriptionIDs {
		n += 2
	}
	if p.NoSharedSubs {
		n += 2
	}
	if p.HasServerKeepAlive {
		n += 3
	}
	return n
}

// AppendAck appends a PUBACK, PUBREC, PUBREL or PUBCOMP (typ) for packet identifier id (MQTT 3.1.1
// §3.4-§3.7, MQTT 5 §3.4-§3.7). MQTT 3.1.1: four bytes, code and reason ignored. MQTT 5: a success
// without reason string is the four-byte form (§3.4.2.1); otherwise the reason code and, when reason
// is not "", a Reason String property. PUBREL's fixed header flags are 0b0010 [MQTT-3.6.1-1]. A typ
// other than those four is written as given; the caller passes one of them.
func AppendAck(dst []byte, typ byte, id uint16, code byte, reason string, v5 bool) []byte {
	first := typ << 4
	if typ == PUBREL {
		first |= 0b0010
	}
	if !v5 || (code == Success && reason == "") {
		return appendU16(append(dst, first, 2), id)
	}
	return appendReason(appendU16(appendReasonHeader(dst, first, 2, code, reason), id), code, reason)
}

// appendReasonHeader appends the fixed header of a packet whose variable header is head bytes,
// then a reason code, then (when reason is not "") a Property Length and a Reason String property.
func appendReasonHeader(dst []byte, first byte, head int, code byte, reason string) []byte {
	rl := head + 1
	if reason != "" {
		p := 3 + len(clipString(reason))
		rl += vbiLen(p) + p
	}
	return appendVBI(append(dst, first), rl)
}

// appendReason appends the reason code and, when reason is not "", the properties with its Reason
// String, after the head appendReasonHeader counted.
func appendReason(dst []byte, code byte, reason string) []byte {
	dst = append(dst, code)
	if reason == "" {
		return dst // no Property Length: the Remaining Length says there is none (§3.4.2.2.1)
	}
	reason = clipString(reason)
	dst = appendVBI(dst, 3+len(reason))
	return appendString(append(dst, propReasonString), reason)
}

// AppendSuback appends a SUBACK for packet identifier id answering n filters, each with code (MQTT
// 3.1.1 §3.9: 0x80 is the only failure return code, the caller passes it; MQTT 5 §3.9, with no
// properties). n < 0 counts as 0.
func AppendSuback(dst []byte, id uint16, n int, code byte, v5 bool) []byte {
	return appendCodes(dst, SUBACK<<4, id, n, code, v5)
}

// AppendUnsuback appends an UNSUBACK for packet identifier id: MQTT 3.1.1 (§3.11) has no payload; MQTT
// 5 (§3.11) carries n reason codes, each code, and no properties. n < 0 counts as 0.
func AppendUnsuback(dst []byte, id uint16, n int, code byte, v5 bool) []byte {
	if !v5 {
		return appendU16(append(dst, UNSUBACK<<4, 2), id)
	}
	return appendCodes(dst, UNSUBACK<<4, id, n, code, v5)
}

// appendCodes appends a packet made of a packet identifier, an empty property list in MQTT 5, and n
// times code.
func appendCodes(dst []byte, first byte, id uint16, n int, code byte, v5 bool) []byte {
	head := 2
	if v5 {
		head = 3
	}
	n = max(0, min(n, maxVBI-head))
	dst = appendVBI(append(dst, first), head+n)
	dst = appendU16(dst, id)
	if v5 {
		dst = append(dst, 0)
	}
	for range n {
		dst = append(dst, code)
	}
	return dst
}

// AppendPingresp appends a PINGRESP (MQTT 3.1.1 §3.13, MQTT 5 §3.13).
func AppendPingresp(dst []byte) []byte { return append(dst, PINGRESP<<4, 0) }

// AppendDisconnect appends an MQTT 5 DISCONNECT (§3.14) with reason code and, when reason is not "", a
// Reason String property. The reason code is always written, Normal disconnection (0) included: the
// empty form §3.14.2.1 allows for it fails to decode in paho.golang v0.23.0's reader. MQTT 3.1.1 has no
// DISCONNECT from the server: close the connection instead.
func AppendDisconnect(dst []byte, code byte, reason string) []byte {
	return appendReason(appendReasonHeader(dst, DISCONNECT<<4, 0, code, reason), code, reason)
}
