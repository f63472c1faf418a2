package mqttwire

// Control packet types: the high nibble of a packet's first byte (MQTT 3.1.1 §2.2.1, MQTT 5 §2.1.2).
const (
	CONNECT     byte = 1
	CONNACK     byte = 2
	PUBLISH     byte = 3
	PUBACK      byte = 4
	PUBREC      byte = 5
	PUBREL      byte = 6
	PUBCOMP     byte = 7
	SUBSCRIBE   byte = 8
	SUBACK      byte = 9
	UNSUBSCRIBE byte = 10
	UNSUBACK    byte = 11
	PINGREQ     byte = 12
	PINGRESP    byte = 13
	DISCONNECT  byte = 14
	AUTH        byte = 15 // MQTT 5 only
)

// MQTT 5 reason codes the server uses (MQTT 5 §2.4).
const (
	Success                     byte = 0x00
	NoSubscriptionExisted       byte = 0x11
	UnspecifiedError            byte = 0x80
	MalformedPacket             byte = 0x81
	ProtocolError               byte = 0x82
	ImplementationSpecificError byte = 0x83
	UnsupportedProtocolVersion  byte = 0x84
	ClientIdentifierNotValid    byte = 0x85
	BadUserNameOrPassword       byte = 0x86
	NotAuthorized               byte = 0x87
	ServerUnavailable           byte = 0x88
	ServerBusy                  byte = 0x89
	ServerShuttingDown          byte = 0x8B
	BadAuthenticationMethod     byte = 0x8C
	KeepAliveTimeout            byte = 0x8D
	SessionTakenOver            byte = 0x8E
	TopicFilterInvalid          byte = 0x8F
	TopicNameInvalid            byte = 0x90
	PacketIdentifierInUse       byte = 0x91
	PacketIdentifierNotFound    byte = 0x92
	ReceiveMaximumExceeded      byte = 0x93
	TopicAliasInvalid           byte = 0x94
	PacketTooLarge              byte = 0x95
	QuotaExceeded               byte = 0x97
	AdministrativeAction        byte = 0x98
	PayloadFormatInvalid        byte = 0x99
	RetainNotSupported          byte = 0x9A
	QoSNotSupported             byte = 0x9B
)

// MQTT 3.1.1 CONNACK return codes (MQTT 3.1.1 §3.2.2.3); 0 is Connection Accepted.
const (
	ConnRefusedProtocolVersion       byte = 1
	ConnRefusedIdentifier            byte = 2
	ConnRefusedServerUnavailable     byte = 3
	ConnRefusedBadUserNameOrPassword byte = 4
	ConnRefusedNotAuthorized         byte = 5
)

// reasonName names the reason codes of this package, for error messages.
func reasonName(code byte) string {
	switch code {
	case Success:
		return "Success"
	case NoSubscriptionExisted:
		return "No subscription existed"
	case UnspecifiedError:
		return "Unspecified error"
	case MalformedPacket:
		return "Malformed Packet"
	case ProtocolError:
		return "Protocol Error"
	case ImplementationSpecificError:
		return "Implementation specific error"
	case UnsupportedProtocolVersion:
		return "Unsupported Protocol Version"
	case ClientIdentifierNotValid:
		return "Client Identifier not valid"
	case BadUserNameOrPassword:
		return "Bad User Name or Password"
	case NotAuthorized:
		return "Not authorized"
	case ServerUnavailable:
		return "Server unavailable"
	case ServerBusy:
		return "Server busy"
	case ServerShuttingDown:
		return "Server shutting down"
	case BadAuthenticationMethod:
		return "Bad authentication method"
	case KeepAliveTimeout:
		return "Keep Alive timeout"
	case SessionTakenOver:
		return "Session taken over"
	case TopicFilterInvalid:
		return "Topic Filter invalid"
	case TopicNameInvalid:
		return "Topic Name invalid"
	case PacketIdentifierInUse:
		return "Packet Identifier in use"
	case PacketIdentifierNotFound:
		return "Packet Identifier not found"
	case ReceiveMaximumExceeded:
		return "Receive Maximum exceeded"
	case TopicAliasInvalid:
		return "Topic Alias invalid"
	case PacketTooLarge:
		return "Packet too large"
	case QuotaExceeded:
		return "Quota exceeded"
	case AdministrativeAction:
		return "Administrative action"
	case PayloadFormatInvalid:
		return "Payload format invalid"
	case RetainNotSupported:
		return "Retain not supported"
	case QoSNotSupported:
		return "QoS not supported"
	}
	return "reason code"
}
