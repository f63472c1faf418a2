package mqttwire

import "fmt"

// Split takes the first control packet off buf: its type (the high nibble of the first byte), its flags
// (the low nibble), its body (everything after the fixed header, aliasing buf) and the length n of the
// whole packet, fixed header included; the next packet starts at buf[n:].
//
// n == 0 and err == nil: buf does not hold the whole packet yet; read more and call Split again with
// the longer buffer.
//
// max is the largest whole packet accepted, fixed header included; max ≤ 0 accepts none. A packet
// announcing a larger length is refused with PacketTooLarge as soon as its Remaining Length is known,
// before its body arrives (MQTT 5 §3.1.2.11.4 applied to the server's own maximum). The codec refuses
// with MalformedPacket, as soon as the first byte or the length shows it: packet type 0 (reserved,
// MQTT 3.1.1 §2.2.1, MQTT 5 §2.1.2), the fixed header flags of a type other than PUBLISH not as that
// type fixes them (MQTT 3.1.1 §2.2.2 [MQTT-2.2.2-2], MQTT 5 §2.1.3 [MQTT-2.1.3-1]: 0b0010 for PUBREL,
// SUBSCRIBE and UNSUBSCRIBE, 0 for the others), and a Remaining Length of more than four bytes (MQTT
// 3.1.1 §2.2.3, MQTT 5 §1.5.5). Type 15 (AUTH) passes: it is reserved in MQTT 3.1.1, which the caller
// knows and Split does not. PUBLISH flags are checked by [ParsePublish].
//
// Split does not allocate, except for the *Error it returns. It never reads outside buf.
func Split(buf []byte, max int) (typ, flags byte, body []byte, n int, err error) {
	if len(buf) == 0 {
		return 0, 0, nil, 0, nil
	}
	typ, flags = buf[0]>>4, buf[0]&0x0f
	if e := checkFixedHeader(typ, flags); e != nil {
		return 0, 0, nil, 0, e
	}
	var rl, mul = 0, 1
	hdr := 0
	for i := 1; ; i++ {
		if i > 4 {
			return 0, 0, nil, 0, malformed("remaining length over 4 bytes")
		}
		if i >= len(buf) {
			return 0, 0, nil, 0, nil
		}
		rl += int(buf[i]&0x7f) * mul
		if buf[i]&0x80 == 0 {
			hdr = i + 1
			break
		}
		mul *= 128
	}
	total := hdr + rl
	if total > max {
		return 0, 0, nil, 0, &Error{Code: PacketTooLarge, Msg: fmt.Sprintf("packet of %d bytes, the maximum is %d", total, max)}
	}
	if len(buf) < total {
		return 0, 0, nil, 0, nil
	}
	return typ, flags, buf[hdr:total:total], total, nil
}

// checkFixedHeader refuses a reserved packet type and fixed header flags other than those a type
// fixes (MQTT 3.1.1 §2.2.2, MQTT 5 §2.1.3).
func checkFixedHeader(typ, flags byte) *Error {
	switch typ {
	case 0:
		return malformed("packet type 0 is reserved")
	case PUBLISH:
		return nil
	case PUBREL, SUBSCRIBE, UNSUBSCRIBE:
		if flags != 0b0010 {
			return &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: fixed header flags %04b, not 0010", typeName(typ), flags)}
		}
	default:
		if flags != 0 {
			return &Error{Code: MalformedPacket, Msg: fmt.Sprintf("%s: fixed header flags %04b, not 0000", typeName(typ), flags)}
		}
	}
	return nil
}

func typeName(typ byte) string {
	switch typ {
	case CONNECT:
		return "CONNECT"
	case CONNACK:
		return "CONNACK"
	case PUBLISH:
		return "PUBLISH"
	case PUBACK:
		return "PUBACK"
	case PUBREC:
		return "PUBREC"
	case PUBREL:
		return "PUBREL"
	case PUBCOMP:
		return "PUBCOMP"
	case SUBSCRIBE:
		return "SUBSCRIBE"
	case SUBACK:
		return "SUBACK"
	case UNSUBSCRIBE:
		return "UNSUBSCRIBE"
	case UNSUBACK:
		return "UNSUBACK"
	case PINGREQ:
		return "PINGREQ"
	case PINGRESP:
		return "PINGRESP"
	case DISCONNECT:
		return "DISCONNECT"
	case AUTH:
		return "AUTH"
	}
	return "reserved"
}
