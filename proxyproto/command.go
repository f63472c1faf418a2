package proxyproto

// Command is what a PROXY protocol header asks of the receiver.
type Command uint8

const (
	// CommandNone is the zero Command: the connection had no header, or its
	// header was not believed.
	CommandNone Command = iota

	// CommandProxy: the header carries the original connection's source and
	// destination (v1 TCP4/TCP6, v2 command 0x1).
	CommandProxy

	// CommandLocal: the upstream opened the connection itself, typically for a
	// health check (v2 command 0x0, or v1 "PROXY UNKNOWN"). The spec says the
	// receiver must use the real connection endpoints and discard the
	// protocol block (section 2.2), so a LOCAL header carries no addresses and
	// no TLVs here.
	CommandLocal
)

var commandNames = []string{"none", "proxy", "local"}

// String returns "none", "proxy" or "local".
func (c Command) String() string { return enumString(c, commandNames, "Command") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (c Command) MarshalText() ([]byte, error) { return enumMarshal(c, commandNames, "Command") }

// UnmarshalText implements [encoding.TextUnmarshaler] for "none", "proxy" and "local".
func (c *Command) UnmarshalText(text []byte) error {
	return enumUnmarshal(c, text, commandNames, "Command")
}
