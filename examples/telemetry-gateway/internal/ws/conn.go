package ws

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ErrTextMessage means the peer sent a text message: MQTT travels in binary
// messages only ([MQTT-6.0.0-1]), and the connection is to be closed.
var ErrTextMessage = errors.New("ws: text message: MQTT is sent in binary messages")

// conn is a net.Conn over a WebSocket: its reads are the payloads of binary
// messages, one after the other, whatever their boundaries (an MQTT packet
// may span messages, and a message may hold several packets); each Write is
// one binary message. One goroutine may read while another writes.
type conn struct {
	ws   *websocket.Conn
	r    io.Reader  // the message being read, or nil
	wmu  sync.Mutex // gorilla allows one writer at a time
	once sync.Once
}

// NewConn returns a net.Conn over an established WebSocket, either side's:
// the listener's upgraded connections, and a client's for tests and
// simulated devices.
func NewConn(ws *websocket.Conn) net.Conn { return &conn{ws: ws} }

// Read implements net.Conn.
func (c *conn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, ErrTextMessage
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 {
				continue // an empty message, or the end of one
			}
			err = nil
		}
		return n, err
	}
}

// Write implements net.Conn: p is sent as one binary message.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close implements net.Conn: it sends a close message (normal closure),
// waiting at most closeWait for the socket to take it, then closes the
// connection. (gorilla lets WriteControl run beside a Write.)
func (c *conn) Close() error {
	var err error
	c.once.Do(func() {
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(closeWait))
		err = c.ws.Close()
	})
	return err
}

// closeWait bounds the wait for the close message.
const closeWait = 100 * time.Millisecond

// LocalAddr implements net.Conn.
func (c *conn) LocalAddr() net.Addr { return c.ws.LocalAddr() }

// RemoteAddr implements net.Conn: the socket peer (the ingress).
func (c *conn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// SetDeadline implements net.Conn.
func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// SetReadDeadline implements net.Conn.
func (c *conn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn. gorilla keeps the write deadline in
// a field each write reads, not on the socket, so it is set under the
// writers' lock: a server sets deadlines from its read loop while another
// goroutine writes (the ingest server does).
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.SetWriteDeadline(t)
}

// NetConn returns the connection under the WebSocket, so that
// proxyproto.FactsFromConn reaches the PROXY layer.
func (c *conn) NetConn() net.Conn { return c.ws.NetConn() }
