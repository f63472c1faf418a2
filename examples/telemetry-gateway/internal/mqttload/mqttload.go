// Package mqttload is a minimal MQTT 3.1.1 and 5 client for load: CONNECT,
// pipelined PUBLISH packets and the acknowledgements that come back, over any
// net.Conn (TLS in the gateway's benchmark, tests and memory measurements).
// It costs the measuring side little CPU, so that a benchmark on a small
// machine measures the broker more than the client, and it is the same client
// for every broker compared.
//
// A Conn is not safe for concurrent use, except that one goroutine may write
// (Write) while another reads (ReadAck).
package mqttload

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Packet types (MQTT §2.1.2).
const (
	typeConnect  = 1
	typeConnack  = 2
	typePublish  = 3
	typePuback   = 4
	typePubrec   = 5
	typePingresp = 13
	typeDisc     = 14
)

// ErrRefused is a CONNACK with a failure code.
var ErrRefused = errors.New("mqttload: connection refused")

// ErrProtocol is a packet the client did not expect.
var ErrProtocol = errors.New("mqttload: unexpected packet")

// Conn is one MQTT connection.
type Conn struct {
	c       net.Conn
	br      *bufio.Reader
	version byte
}

// Handshake sends CONNECT (clean session) on c as client id with the given
// protocol version (4 for 3.1.1, 5) and keepalive in seconds, and reads the
// CONNACK. A refusal is ErrRefused with its code.
func Handshake(c net.Conn, id string, version byte, keepalive uint16) (*Conn, error) {
	var body []byte
	body = appendString(body, "MQTT")
	body = append(body, version, 0x02) // clean session / clean start
	body = binary.BigEndian.AppendUint16(body, keepalive)
	if version == 5 {
		body = append(body, 0) // no properties
	}
	body = appendString(body, id)
	pk := appendHeader(nil, typeConnect<<4, len(body))
	if _, err := c.Write(append(pk, body...)); err != nil {
		return nil, err
	}
	cn := &Conn{c: c, br: bufio.NewReaderSize(c, 4096), version: version}
	typ, rest, err := cn.read()
	if err != nil {
		return nil, err
	}
	if typ != typeConnack || len(rest) < 2 {
		return nil, fmt.Errorf("%w: type %d instead of CONNACK", ErrProtocol, typ)
	}
	if rest[1] != 0 {
		return nil, fmt.Errorf("%w: code 0x%02x", ErrRefused, rest[1])
	}
	return cn, nil
}

// AppendPublish appends a PUBLISH packet to b and returns it; id is ignored
// at QoS 0.
func (c *Conn) AppendPublish(b []byte, topic string, id uint16, qos byte, payload []byte) []byte {
	n := 2 + len(topic) + len(payload)
	if qos > 0 {
		n += 2
	}
	if c.version == 5 {
		n++ // no properties
	}
	b = appendHeader(b, typePublish<<4|qos<<1, n)
	b = appendString(b, topic)
	if qos > 0 {
		b = binary.BigEndian.AppendUint16(b, id)
	}
	if c.version == 5 {
		b = append(b, 0)
	}
	return append(b, payload...)
}

// Write writes packets built with AppendPublish.
func (c *Conn) Write(b []byte) error {
	_, err := c.c.Write(b)
	return err
}

// ReadAck returns the next PUBACK's (or PUBREC's) packet id and reason code
// (0 for MQTT 3.1.1 and for a MQTT 5 acknowledgement without one), skipping
// PINGRESP. A DISCONNECT from the server is ErrProtocol with its reason
// code.
func (c *Conn) ReadAck() (id uint16, code byte, err error) {
	for {
		typ, rest, err := c.read()
		if err != nil {
			return 0, 0, err
		}
		switch typ {
		case typePuback, typePubrec:
			if len(rest) < 2 {
				return 0, 0, fmt.Errorf("%w: short acknowledgement", ErrProtocol)
			}
			if len(rest) > 2 {
				code = rest[2]
			}
			return binary.BigEndian.Uint16(rest), code, nil
		case typePingresp:
			continue
		case typeDisc:
			if len(rest) > 0 {
				code = rest[0]
			}
			return 0, code, fmt.Errorf("%w: DISCONNECT 0x%02x", ErrProtocol, code)
		default:
			return 0, 0, fmt.Errorf("%w: type %d", ErrProtocol, typ)
		}
	}
}

// Close sends DISCONNECT and closes the connection.
func (c *Conn) Close() error {
	pk := []byte{typeDisc << 4, 0}
	_, _ = c.c.Write(pk)
	return c.c.Close()
}

// read reads one packet: its type and the bytes after the fixed header (a
// slice of the reader's buffer when it fits, valid until the next read).
func (c *Conn) read() (byte, []byte, error) {
	h, err := c.br.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, err := readVarint(c.br)
	if err != nil {
		return 0, nil, err
	}
	if n <= c.br.Size() {
		rest, err := c.br.Peek(n)
		if err != nil {
			return 0, nil, err
		}
		_, _ = c.br.Discard(n)
		return h >> 4, rest, nil
	}
	rest := make([]byte, n)
	_, err = io.ReadFull(c.br, rest)
	return h >> 4, rest, err
}

func readVarint(r io.ByteReader) (int, error) {
	n, shift := 0, 0
	for i := 0; i < 4; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		n |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			return n, nil
		}
		shift += 7
	}
	return 0, fmt.Errorf("%w: remaining length over four bytes", ErrProtocol)
}

func appendHeader(b []byte, first byte, n int) []byte {
	b = append(b, first)
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
