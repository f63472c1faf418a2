// Package ingest is the telemetry gateway's MQTT server: MQTT 3.1.1 and 5
// for devices that publish. It is ingest only: every subscription is
// refused, nothing is retained or delivered, and no session outlives its
// connection (CONNACK's session present flag is always 0; the readings'
// own ids make a redelivery harmless).
//
// A connection has a goroutine only while it has something to read: once it
// has read nothing for Config.IdleAfter, its goroutine ends and the socket
// waits in an epoll set of the server's own (Linux; elsewhere, and for
// connections the listener says cannot be parked, the goroutine stays). An
// idle device then costs its TLS state and a small Client, not goroutine
// stacks and read buffers: that is what sizes a gateway that holds many
// devices which send a reading now and then.
//
// The Handler decides CONNECT, takes every PUBLISH and, for QoS 1, writes
// its acknowledgements itself (Client.Write), so that a reading is
// acknowledged once it is durable while the connection goes on reading.
package ingest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// Defaults for zero Config fields.
const (
	DefaultMaxPacketSize  = 64<<10 + 4096
	DefaultReceiveMaximum = 1024
	DefaultIdleAfter      = 2 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
)

// ErrClosed is returned by Client.Write once the connection is closed.
var ErrClosed = errors.New("ingest: connection closed")

// Handler is what the server asks about each connection. Its methods are
// called on the connection's reading goroutine, one at a time for a
// connection; Disconnected may be called on another goroutine (the one that
// closed a parked connection), once, after every other call for that client
// has returned.
type Handler interface {
	// Connect judges a CONNECT: 0 accepts it, an MQTT 5 reason code refuses
	// it (the server answers the CONNACK, with the MQTT 3.1.1 return code
	// for that code to an MQTT 3.1.1 client, and closes the connection).
	Connect(c *Client, pk *mqttwire.Connect) (code byte, reason string)
	// Established is called once the CONNACK accepting c has been written.
	Established(c *Client)
	// Publish takes a PUBLISH (its topic alias resolved: pk.Topic is the
	// topic). For QoS 1 the handler acknowledges it itself (Client.Write),
	// and the result is ignored; for QoS 2 the server writes the PUBREC with
	// the code (and reason) returned, or nothing when send is false; for
	// QoS 0 the result is ignored. pk's slices are valid only during the call.
	Publish(c *Client, pk *mqttwire.Publish) (code byte, reason string, send bool)
	// Disconnected is called once for each client that Established saw,
	// when its connection has ended; err says why (nil: the client sent
	// DISCONNECT).
	Disconnected(c *Client, err error)
}

// Config configures a Server.
type Config struct {
	Handler Handler // required
	// MaxPacketSize is the largest packet accepted (fixed header included),
	// announced to MQTT 5 clients; a larger one ends the connection.
	MaxPacketSize int
	// ReceiveMaximum is announced to MQTT 5 clients, and bounds the QoS 1
	// and QoS 2 PUBLISHes a client has sent without their acknowledgement
	// (MQTT 5 §3.3.4): the server counts its open QoS 2 exchanges and the
	// QoS 1 PUBLISHes the handler says it holds (Client.SetUnacknowledged)
	// before a QoS 2 one; the handler, which holds the QoS 1 ones, counts
	// them and Client.OpenQoS2 before a QoS 1 one. An MQTT 3.1.1 client,
	// which has no receive maximum, is held to it for QoS 2 exchanges alone.
	ReceiveMaximum uint16
	// TopicAliasMaximum is how many topic aliases an MQTT 5 client may set
	// (0: none).
	TopicAliasMaximum uint16
	// IdleAfter is how long a connection reads nothing before its goroutine
	// ends and it waits in the server's epoll set.
	IdleAfter time.Duration
	// WriteTimeout bounds each write to a client.
	WriteTimeout time.Duration
	// Logger gets the server's own lines (protocol errors at debug). Nil
	// discards them.
	Logger *slog.Logger
}

// Server serves MQTT connections handed to it by ServeConn. Create it with
// New.
type Server struct {
	cfg   Config
	log   *slog.Logger
	poll  *poller // nil where the platform has no epoll
	now   atomic.Int64
	seq   atomic.Uint64
	stop  chan struct{}
	wg    sync.WaitGroup // reading goroutines
	bg    sync.WaitGroup // the sweeper and the poller
	mu    sync.Mutex
	ids   map[string]*Client // established clients by client id
	all   map[*Client]struct{}
	shut  bool
	stats Stats
}

// Stats are the server's counters.
type Stats struct {
	Parked   atomic.Int64  // connections waiting in the epoll set now
	Resumed  atomic.Uint64 // times a parked connection got a goroutine again
	Refused  atomic.Uint64 // CONNECTs refused
	Protocol atomic.Uint64 // connections ended for a protocol error
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("ingest: Handler is required")
	}
	if cfg.MaxPacketSize <= 0 {
		cfg.MaxPacketSize = DefaultMaxPacketSize
	}
	if cfg.ReceiveMaximum == 0 {
		cfg.ReceiveMaximum = DefaultReceiveMaximum
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	s := &Server{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), ids: make(map[string]*Client), all: make(map[*Client]struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.now.Store(time.Now().UnixNano())
	var err error
	if s.poll, err = newPoller(s); err != nil {
		s.log.Warn("ingest: no epoll; idle connections keep their goroutine", "error", err)
		s.poll = nil
	}
	s.bg.Add(1)
	go s.sweep()
	if s.poll != nil {
		s.bg.Add(1)
		go s.poll.run()
	}
	return s, nil
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// ServeConn serves one connection, whose first packet must be CONNECT
// (the caller set the deadline for it). It returns once the connection
// is closed or parked: from then on the server owns conn and closes it.
// listener names where conn came from (Client.Listener); parkable says
// whether conn may wait in the epoll set while idle: every layer between
// conn and its TCP socket must survive a read deadline and report through
// NetConn (crypto/tls, the PROXY and middleware layers do).
// The returned error says why a connection that never got established
// ended (nil once it was).
func (s *Server) ServeConn(conn net.Conn, listener string, parkable bool) error {
	c := &Client{srv: s, Conn: conn, Listener: listener, fd: -1}
	if err := c.connect(); err != nil {
		conn.Close()
		return err
	}
	if parkable && s.poll != nil {
		c.fd = socketFD(conn)
	}
	c.serve()
	return nil
}

// register makes c one of the server's clients, in the place of a client
// with the same id, which is disconnected ([MQTT-3.1.4-3]: the new
// connection takes the client id over). false: the server is closing.
func (s *Server) register(c *Client) bool {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return false
	}
	s.all[c] = struct{}{}
	old := s.ids[c.ID]
	s.ids[c.ID] = c
	s.wg.Add(1)
	s.mu.Unlock()
	if old != nil {
		// Not on this goroutine: a client that does not read may hold the
		// DISCONNECT's write for up to WriteTimeout, and the new connection
		// waits for its CONNACK meanwhile.
		go old.Disconnect(mqttwire.SessionTakenOver, "another connection took the client id")
	}
	return true
}

// Close disconnects every client (MQTT 5 clients get "server shutting
// down"), waits for their goroutines and stops the server's own.
func (s *Server) Close() {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return
	}
	s.shut = true
	all := make([]*Client, 0, len(s.all))
	for c := range s.all {
		all = append(all, c)
	}
	s.mu.Unlock()
	// Each on a goroutine of its own: a client that does not read may hold
	// its DISCONNECT's write for up to WriteTimeout, and not the others'.
	for _, c := range all {
		go c.Disconnect(mqttwire.ServerShuttingDown, "")
	}
	s.wg.Wait()
	close(s.stop)
	s.bg.Wait()
	if s.poll != nil {
		s.poll.close()
	}
}

// Clients calls f for every established client until it returns false.
func (s *Server) Clients(f func(*Client) bool) {
	s.mu.Lock()
	cs := make([]*Client, 0, len(s.ids))
	for _, c := range s.ids {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		if !f(c) {
			return
		}
	}
}

func (s *Server) forget(c *Client) {
	s.mu.Lock()
	delete(s.all, c)
	if c.ID != "" && s.ids[c.ID] == c {
		delete(s.ids, c.ID)
	}
	s.mu.Unlock()
}

// sweep keeps the server's coarse clock and ends connections whose keep
// alive has run out (one and a half times the interval without a packet:
// MQTT 3.1.1 [MQTT-3.1.2-24], MQTT 5 [MQTT-3.1.2-22]).
func (s *Server) sweep() {
	defer s.bg.Done()
	// Read deadlines are set from this clock: it must move well within
	// IdleAfter, or a deadline set from it lies in the past, and a resumed
	// connection parks at once, resumes at once, and so on.
	t := time.NewTicker(min(250*time.Millisecond, max(s.cfg.IdleAfter/4, time.Millisecond)))
	defer t.Stop()
	var expired []*Client
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.now.Store(now.UnixNano())
			expired = expired[:0]
			s.mu.Lock()
			for c := range s.all {
				if c.expired(now.UnixNano()) {
					expired = append(expired, c)
				}
			}
			s.mu.Unlock()
			for _, c := range expired {
				if !c.expiring.CompareAndSwap(false, true) {
					continue // its DISCONNECT is being written
				}
				s.log.Debug("ingest: keep alive expired", "client_id", c.ID, "keep_alive", c.keepAlive, "partial_packet", c.partial.Load())
				// Not on this goroutine: a write may wait up to WriteTimeout,
				// and the clock it keeps must not stop meanwhile.
				go c.Disconnect(mqttwire.KeepAliveTimeout, "")
			}
		}
	}
}

// PartialPacketTimeout bounds how long a packet that has begun may take to
// arrive whole from a client without keep alive (keep alive 0); with keep
// alive, one and a half times its interval does.
const PartialPacketTimeout = 30 * time.Second

// expired says whether c's keep alive has run out at now: no whole packet
// for one and a half times the interval (MQTT 3.1.1 [MQTT-3.1.2-24], MQTT 5
// [MQTT-3.1.2-22]; the bytes of a packet still arriving do not count, so a
// client cannot hold a connection and its buffer by trickling one), or,
// without keep alive, a packet begun PartialPacketTimeout ago and still not
// whole.
func (c *Client) expired(now int64) bool {
	since := now - c.lastRead.Load()
	if ka := c.keepAlive; ka > 0 {
		return since > int64(ka)*int64(time.Second)*3/2
	}
	return c.partial.Load() && since > int64(PartialPacketTimeout)
}

// connection states
const (
	stateReading = iota // a goroutine reads the connection
	stateParked         // it waits in the epoll set
	stateClosed
)

// Client is one MQTT connection. Its exported fields are set before the
// handler first sees it and never change.
type Client struct {
	ID       string
	Version  byte     // 4 (3.1.1) or 5
	Conn     net.Conn // what the listener handed over
	Listener string
	// Value is the handler's own: set it in Connect or Established.
	Value any

	srv         *Server
	keepAlive   uint16
	problems    bool   // the client wants reason strings (MQTT 5 Request Problem Information)
	noExpiry    bool   // its CONNECT had no Session Expiry Interval above 0 (MQTT 5)
	maxOut      uint32 // the client's Maximum Packet Size (0: none)
	aliasMax    uint16
	aliases     [][]byte
	aliasBytes  int                 // the topics held for aliases, at most maxAliasBytes
	qos2        map[uint16]struct{} // PUBRECs written, PUBRELs awaited
	unacked     atomic.Int32        // QoS 1 PUBLISHes the handler holds unacknowledged
	ended       atomic.Bool         // state is stateClosed (set under mu; read without it)
	lastRead    atomic.Int64        // when the last whole packet came (coarse clock)
	partial     atomic.Bool         // the buffer holds the start of a packet
	expiring    atomic.Bool         // the sweeper is disconnecting it
	deadlineAt  int64               // when the read deadline was last moved (coarse clock)
	wdeadlineAt int64               // when the write deadline was last moved (wmu)
	fd          int                 // the socket, when the connection may be parked; -1 otherwise
	registered  bool                // fd is in the epoll set (armed or not)
	noPark      bool                // the epoll set refused it: it keeps its goroutine (reader only)
	said        bool                // a DISCONNECT was written: nothing more goes out (wmu)
	acked       bool                // the CONNACK accepting it was written (wmu)
	buf         []byte
	start, end  int

	mu    sync.Mutex // state
	state int
	wmu   sync.Mutex // writes
	done  sync.Once
	est   bool // Established was called
	err   error
}

// V5 says whether the client speaks MQTT 5.
func (c *Client) V5() bool { return c.Version == 5 }

// SetUnacknowledged tells the server how many QoS 1 PUBLISHes of c the
// handler holds without having written their PUBACK, so that a QoS 2
// PUBLISH beyond the receive maximum counts them (Config.ReceiveMaximum).
// Any goroutine may call it.
func (c *Client) SetUnacknowledged(n int) { c.unacked.Store(int32(n)) }

// OpenQoS2 returns how many QoS 2 exchanges of c are open: PUBREC written,
// PUBREL not yet received. Call it from Handler.Publish only (the
// connection's reading goroutine changes them).
func (c *Client) OpenQoS2() int { return len(c.qos2) }

func (c *Client) touch() { c.lastRead.Store(c.srv.now.Load()) }

// Write writes encoded packets to the client, one writer at a time.
func (c *Client) Write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.said || c.closed() {
		return ErrClosed
	}
	c.writeDeadline()
	_, err := c.Conn.Write(b)
	return err
}

// writeDeadline moves the write deadline WriteTimeout ahead when it was set
// more than a quarter of that ago (the server's coarse clock), so that a
// client sending readings fast does not pay for a timer update per write.
func (c *Client) writeDeadline() {
	t := c.srv.cfg.WriteTimeout
	if now := c.srv.now.Load(); now-c.wdeadlineAt > int64(t)/4 {
		c.wdeadlineAt = now
		_ = c.Conn.SetWriteDeadline(time.Unix(0, now).Add(t))
	}
}

// TryWrite writes b now if that cannot block: no other write is under way
// and the socket has nothing queued that its peer has not acknowledged, so
// a few hundred bytes fit its send buffer. ok false: nothing was written
// (a connection that cannot be parked, one whose peer is slow to read, or
// a platform without SIOCOUTQ); write with Write from a goroutine that may
// wait. It lets a goroutine that serves many connections, like the one
// answering a group commit, write their acknowledgements without letting
// one that does not read stall the others.
func (c *Client) TryWrite(b []byte) (ok bool, err error) {
	if c.fd < 0 || len(b) > 512 || !c.wmu.TryLock() {
		return false, nil
	}
	defer c.wmu.Unlock()
	if c.said || c.closed() {
		return true, ErrClosed
	}
	if q, err := sendQueued(c.fd); err != nil || q > 0 {
		return false, nil
	}
	if len(b) == 0 {
		return true, nil
	}
	c.writeDeadline()
	_, err = c.Conn.Write(b)
	return true, err
}

// AppendAck appends the acknowledgement typ (PUBACK, PUBREC, PUBCOMP) of
// packet id with code, and its reason string when the client wants reason
// strings and its maximum packet size has room.
func (c *Client) AppendAck(dst []byte, typ byte, id uint16, code byte, reason string) []byte {
	return mqttwire.AppendAck(dst, typ, id, code, c.reasonFor(reason, 5), c.V5())
}

func (c *Client) reasonFor(reason string, base int) string {
	if reason == "" || !c.V5() || !c.problems {
		return ""
	}
	if c.maxOut > 0 && uint32(base+len(reason)+8) > c.maxOut {
		return ""
	}
	return reason
}

// Closed says whether the connection has been closed.
func (c *Client) Closed() bool { return c.closed() }

func (c *Client) closed() bool { return c.ended.Load() }

// Disconnect ends the connection: an MQTT 5 client first gets a DISCONNECT
// with code (and reason, when it wants reason strings). It may be called
// from any goroutine, any number of times.
func (c *Client) Disconnect(code byte, reason string) {
	if c.V5() && code != 0 {
		var b [64]byte
		// Written and marked under the write lock: a writer waiting for it
		// must not follow the DISCONNECT before Close ([MQTT-3.14.4-1]).
		// Not before the CONNACK ([MQTT-3.2.0-1]): a takeover or Close may
		// come between register and its write.
		c.wmu.Lock()
		if c.acked && !c.said && !c.closed() {
			c.writeDeadline()
			_, _ = c.Conn.Write(mqttwire.AppendDisconnect(b[:0], code, c.reasonFor(reason, 4)))
			c.said = true
		}
		c.wmu.Unlock()
	}
	c.Close(disconnectError(code, reason))
}

// Close ends the connection without a word to the client; err is what
// Disconnected reports.
func (c *Client) Close(err error) {
	c.mu.Lock()
	if c.state == stateClosed {
		c.mu.Unlock()
		return
	}
	parked := c.state == stateParked
	c.state = stateClosed
	if c.err == nil {
		c.err = err
	}
	c.ended.Store(true) // after err: whoever sees it closed reads err
	if parked {
		c.srv.poll.remove(c)
	}
	c.mu.Unlock()
	c.Conn.Close()
	if parked { // no goroutine will see the close: end it here
		c.finish()
	}
}

// finish ends the client once: the handler hears of it and the server
// forgets it.
func (c *Client) finish() {
	c.done.Do(func() {
		c.srv.forget(c)
		if c.est {
			c.srv.cfg.Handler.Disconnected(c, c.err)
		}
		c.buf = nil
		c.srv.wg.Done()
	})
}

// DisconnectError is why the server ended a connection with a reason code.
type DisconnectError struct {
	Code   byte
	Reason string
}

func (e *DisconnectError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("disconnected with reason code 0x%02x: %s", e.Code, e.Reason)
	}
	return fmt.Sprintf("disconnected with reason code 0x%02x", e.Code)
}

func disconnectError(code byte, reason string) error {
	if code == 0 {
		return nil
	}
	return &DisconnectError{Code: code, Reason: reason}
}

// Read buffers: a connection holds one only while it reads. It starts with
// a small one, which holds a CONNECT and a device's readings, and moves to a
// large one once a read fills the small one: a gateway that has just taken
// thousands of connections, most of which go idle, has allocated thousands
// of small buffers, not of large ones (the pools keep what they hold until
// two collections later).
const (
	smallBuffer = 512
	largeBuffer = 4096
)

var (
	smallPool = sync.Pool{New: func() any { b := make([]byte, smallBuffer); return &b }}
	largePool = sync.Pool{New: func() any { b := make([]byte, largeBuffer); return &b }}
)

// getBuffer returns a buffer of size smallBuffer or largeBuffer.
func getBuffer(size int) []byte {
	if size == smallBuffer {
		return *smallPool.Get().(*[]byte)
	}
	return *largePool.Get().(*[]byte)
}

// putBuffer returns b to its pool, when it came from one.
func putBuffer(b []byte) {
	switch cap(b) {
	case smallBuffer:
		b = b[:smallBuffer]
		smallPool.Put(&b)
	case largeBuffer:
		b = b[:largeBuffer]
		largePool.Put(&b)
	}
}

// maxAliasBytes bounds the topics one connection keeps for its topic
// aliases: TopicAliasMaximum topics of up to a packet each would let a
// connection hold a megabyte; one that sets more is disconnected with
// "quota exceeded".
const maxAliasBytes = 4096

// connect reads CONNECT and answers it.
func (c *Client) connect() error {
	c.buf = getBuffer(smallBuffer)
	var body []byte
	var flags byte
	for {
		typ, fl, b, n, err := mqttwire.Split(c.buf[c.start:c.end], c.srv.cfg.MaxPacketSize)
		if err != nil {
			c.release()
			return fmt.Errorf("CONNECT: %w", err)
		}
		if n > 0 {
			if typ != mqttwire.CONNECT {
				c.release()
				return fmt.Errorf("first packet is type %d, not CONNECT [MQTT-3.1.0-1]", typ)
			}
			body, flags, c.start = b, fl, c.start+n
			break
		}
		if err := c.fill(); err != nil {
			c.release()
			return err
		}
	}
	_ = flags
	c.touch() // Keep Alive counts from the CONNECT (3.1.1 [MQTT-3.1.2-24], 5 [MQTT-3.1.2-22]), not from the handover
	pk, perr := mqttwire.ParseConnect(body)
	c.Version = pk.Version
	if perr != nil {
		var we *mqttwire.Error
		if errors.As(perr, &we) && we.Code == mqttwire.UnsupportedProtocolVersion {
			// MQTT 3.1.1 §3.1.2.2 / MQTT 5 §3.1.2.2: answer in the client's format.
			v5 := pk.Version == 5
			var b [8]byte
			code := mqttwire.UnsupportedProtocolVersion
			if !v5 {
				code = mqttwire.ConnRefusedProtocolVersion
			}
			c.writeRaw(mqttwire.AppendConnack(b[:0], v5, false, code, nil))
		}
		c.release()
		return fmt.Errorf("CONNECT: %w", perr)
	}
	if pk.Version < 4 {
		// MQTT 3.1 (protocol level 3): the gateway speaks 3.1.1 and 5 only
		// (MQTT 3.1.1 §3.1.2.2: return code 1, unacceptable protocol level).
		var b [8]byte
		c.writeRaw(mqttwire.AppendConnack(b[:0], false, false, mqttwire.ConnRefusedProtocolVersion, nil))
		c.release()
		return fmt.Errorf("CONNECT: MQTT 3.1 (protocol level %d) is not served", pk.Version)
	}
	c.keepAlive, c.problems, c.maxOut = pk.KeepAlive, pk.RequestProblemInfo, pk.MaxPacketSize
	c.noExpiry = pk.SessionExpiry == 0
	c.aliasMax = c.srv.cfg.TopicAliasMaximum
	code, reason := byte(0), ""
	props := &mqttwire.ConnackProps{
		ReceiveMaximum: c.srv.cfg.ReceiveMaximum, MaxPacketSize: uint32(c.srv.cfg.MaxPacketSize), TopicAliasMax: c.aliasMax,
		MaximumQoS: 2, RetainUnavailable: true, NoWildcardSubs: true, NoSubscriptionIDs: true, NoSharedSubs: true,
	}
	if pk.Version == 5 && pk.SessionExpiry > 0 {
		props.HasSessionExpiry = true // no session outlives its connection
	}
	c.ID = pk.ClientID
	switch {
	case pk.AuthMethod != "":
		code = mqttwire.BadAuthenticationMethod // MQTT 5 §4.12: no enhanced authentication here
	case pk.Will && pk.WillRetain && pk.Version == 5:
		code = mqttwire.RetainNotSupported // [MQTT-3.2.2-13] (the CONNACK says Retain Available 0)
	case c.ID == "" && !pk.CleanStart && pk.Version < 5:
		code = mqttwire.ClientIdentifierNotValid // [MQTT-3.1.3-8]
	case c.ID == "":
		c.ID = "auto-" + strconv.FormatUint(c.srv.seq.Add(1), 36) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
		props.AssignedClientID = c.ID // [MQTT-3.2.2-16]
	}
	if code == 0 {
		code, reason = c.srv.cfg.Handler.Connect(c, &pk)
	}
	var out [128]byte
	if code != 0 {
		c.srv.stats.Refused.Add(1)
		if c.V5() {
			props = &mqttwire.ConnackProps{MaximumQoS: 2, ReasonString: c.reasonFor(reason, 8)}
		} else {
			code = connRefused311(code)
		}
		c.writeRaw(mqttwire.AppendConnack(out[:0], c.V5(), false, code, props))
		c.release()
		return &DisconnectError{Code: code, Reason: reason}
	}
	ack := mqttwire.AppendConnack(out[:0], c.V5(), false, 0, props)
	if c.maxOut > 0 && len(ack) > int(c.maxOut) {
		// MQTT 5 [MQTT-3.1.2-24]: nothing larger than the client's Maximum Packet
		// Size goes to it, and a connection without CONNACK is no session.
		c.release()
		return fmt.Errorf("the CONNACK (%d bytes) exceeds the client's Maximum Packet Size %d", len(ack), c.maxOut)
	}
	if !c.srv.register(c) {
		c.release()
		return ErrClosed
	}
	if err := c.writeConnack(ack); err != nil {
		err = fmt.Errorf("CONNACK: %w", err)
		c.Close(err)
		c.finish()
		return err
	}
	// The read deadline the caller set for CONNECT goes; the write deadline
	// stays: writeDeadline set it for the CONNACK and moves it only a
	// quarter of WriteTimeout later.
	_ = c.Conn.SetReadDeadline(time.Time{})
	c.est = true
	c.srv.cfg.Handler.Established(c)
	return nil
}

// connRefused311 is the MQTT 3.1.1 CONNACK return code for an MQTT 5
// reason code.
func connRefused311(code byte) byte {
	switch code {
	case mqttwire.UnsupportedProtocolVersion:
		return mqttwire.ConnRefusedProtocolVersion
	case mqttwire.ClientIdentifierNotValid:
		return mqttwire.ConnRefusedIdentifier
	case mqttwire.BadUserNameOrPassword:
		return mqttwire.ConnRefusedBadUserNameOrPassword
	case mqttwire.NotAuthorized:
		return mqttwire.ConnRefusedNotAuthorized
	}
	return mqttwire.ConnRefusedServerUnavailable
}

// writeConnack writes the CONNACK accepting c, unless c was ended since
// it was registered.
func (c *Client) writeConnack(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed() {
		return ErrClosed
	}
	c.writeDeadline()
	_, err := c.Conn.Write(b)
	c.acked = err == nil
	return err
}

func (c *Client) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writeDeadline()
	_, err := c.Conn.Write(b)
	return err
}

// release returns the read buffer to the pool when it holds no partial
// packet.
func (c *Client) release() {
	if c.buf == nil {
		return
	}
	if c.start == c.end {
		putBuffer(c.buf)
		c.buf, c.start, c.end = nil, 0, 0
	}
}

// fill reads more into the buffer, making room first: the partial packet
// moves to the front, and a buffer too small for the packet announced grows
// toward its size, at most doubling each time it is full.
func (c *Client) fill() error {
	if c.buf == nil {
		c.buf = getBuffer(smallBuffer)
	}
	if c.start > 0 {
		c.end = copy(c.buf, c.buf[c.start:c.end])
		c.start = 0
	}
	if c.end == len(c.buf) {
		// One packet, larger than the buffer (handle took every whole one).
		// The buffer at most doubles, up to the packet's length: a client
		// holds memory here for the bytes it has sent, not for the length
		// its fixed header announces (a header announcing 64 KiB behind
		// 512 bytes sent would otherwise hold 64 KiB, 130 times what it
		// cost, until its keep alive ran out).
		need := 2 * len(c.buf)
		if n := packetLen(c.buf[:c.end]); n > 0 {
			need = min(need, n)
		}
		need = min(need, c.srv.cfg.MaxPacketSize)
		if need <= len(c.buf) {
			return &mqttwire.Error{Code: mqttwire.PacketTooLarge, Msg: "packet larger than the maximum packet size"}
		}
		var nb []byte
		if need <= largeBuffer {
			nb = getBuffer(largeBuffer)
		} else {
			nb = make([]byte, need)
		}
		copy(nb, c.buf[:c.end])
		putBuffer(c.buf)
		c.buf = nb
	}
	n, err := c.Conn.Read(c.buf[c.end:])
	c.end += n
	if n > 0 {
		return nil // handle what came first; the error comes back
	}
	return err
}

// packetLen returns the whole length of the packet at the front of b, or 0
// when its fixed header is incomplete.
func packetLen(b []byte) int {
	n, mul := 0, 1
	for i := 1; i < len(b) && i <= 4; i++ {
		n += int(b[i]&0x7f) * mul
		if b[i]&0x80 == 0 {
			return 1 + i + n
		}
		mul <<= 7
	}
	return 0
}

// serve reads and handles packets until the connection ends or idles.
func (c *Client) serve() {
	idle := c.srv.cfg.IdleAfter
	for {
		if !c.handle() {
			c.finish()
			return
		}
		if c.parkable() {
			if now := c.srv.now.Load(); now-c.deadlineAt > int64(idle)/4 {
				c.deadlineAt = now
				_ = c.Conn.SetReadDeadline(time.Now().Add(idle)) // not from the coarse clock: never in the past
			}
		}
		err := c.fill()
		if err == nil {
			continue
		}
		if c.parkable() && errors.Is(err, os.ErrDeadlineExceeded) && c.park() {
			return
		}
		if c.closed() {
			c.finish()
			return
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("connection closed by the client without DISCONNECT")
		}
		c.fail(err)
		c.finish()
		return
	}
}

// parkable says whether the connection may wait in the epoll set.
func (c *Client) parkable() bool { return c.fd >= 0 && !c.noPark }

// park hands the idle connection to the epoll set; false when it is closed
// (or cannot be registered: it then keeps reading).
func (c *Client) park() bool {
	c.release()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateReading {
		return false
	}
	c.deadlineAt = 0
	if err := c.srv.poll.add(c); err != nil {
		c.srv.log.Debug("ingest: cannot park", "client_id", c.ID, "error", err)
		c.noPark = true // fd stays: TryWrite reads it on other goroutines
		_ = c.Conn.SetReadDeadline(time.Time{})
		return false
	}
	c.state = stateParked
	return true
}

// resume gives a parked connection that has something to read its
// goroutine again.
func (c *Client) resume() {
	c.mu.Lock()
	if c.state != stateParked {
		c.mu.Unlock()
		return
	}
	c.state = stateReading
	c.mu.Unlock()
	c.srv.stats.Resumed.Add(1)
	go c.serve()
}

// fail ends the connection for err: a packet the codec or the server
// refused (*mqttwire.Error) gets an MQTT 5 client a DISCONNECT with its
// reason code; anything else closes it without a word.
func (c *Client) fail(err error) {
	var we *mqttwire.Error
	if !errors.As(err, &we) {
		c.Close(err)
		return
	}
	c.srv.stats.Protocol.Add(1)
	c.srv.log.Debug("ingest: protocol error", "client_id", c.ID, "code", we.Code, "error", we.Msg)
	c.Disconnect(we.Code, we.Msg)
}

// handle handles every whole packet in the buffer; false when the
// connection is to end.
func (c *Client) handle() bool {
	for c.start < c.end {
		typ, flags, body, n, err := mqttwire.Split(c.buf[c.start:c.end], c.srv.cfg.MaxPacketSize)
		if err != nil {
			c.fail(err)
			return false
		}
		if n == 0 {
			if !c.partial.Load() {
				c.partial.Store(true)
			}
			return true
		}
		c.start += n
		c.touch()
		if err := c.packet(typ, flags, body); err != nil {
			c.fail(err)
			return false
		}
		if typ == mqttwire.DISCONNECT {
			return false // [MQTT-3.14.4-1]: nothing after it is the client's
		}
	}
	if c.partial.Load() {
		c.partial.Store(false)
	}
	return !c.closed()
}

// pubPool holds the PUBLISH a connection hands its Handler, which is valid
// only during the call.
var pubPool = sync.Pool{New: func() any { return new(mqttwire.Publish) }}

// packet handles one packet.
func (c *Client) packet(typ, flags byte, body []byte) error {
	v5 := c.V5()
	switch typ {
	case mqttwire.PUBLISH:
		return c.publish(flags, body)
	case mqttwire.PUBREL:
		id, _, err := mqttwire.ParsePubrel(flags, body, v5)
		if err != nil {
			return err
		}
		code := byte(0)
		if _, ok := c.qos2[id]; ok {
			delete(c.qos2, id)
		} else {
			code = mqttwire.PacketIdentifierNotFound // MQTT 5 §4.3.3
		}
		var out [8]byte // here, not for every packet: Write makes it escape
		return c.Write(mqttwire.AppendAck(out[:0], mqttwire.PUBCOMP, id, code, "", v5))
	case mqttwire.PINGREQ:
		if len(body) != 0 { // MQTT 3.1.1 §3.12, MQTT 5 §3.12: no variable header, no payload
			return &mqttwire.Error{Code: mqttwire.MalformedPacket, Msg: "PINGREQ with a Remaining Length of " + strconv.Itoa(len(body))}
		}
		var out [2]byte
		return c.Write(mqttwire.AppendPingresp(out[:0]))
	case mqttwire.SUBSCRIBE:
		// Ingest only: nobody may subscribe (the sink is the consumer).
		id, n, err := mqttwire.ParseSubscribe(flags, body, v5)
		if err != nil {
			return err
		}
		code := byte(0x80) // MQTT 3.1.1 §3.9.3: failure
		if v5 {
			code = mqttwire.NotAuthorized
		}
		return c.Write(mqttwire.AppendSuback(make([]byte, 0, 8+n), id, n, code, v5))
	case mqttwire.UNSUBSCRIBE:
		id, n, err := mqttwire.ParseUnsubscribe(flags, body, v5)
		if err != nil {
			return err
		}
		return c.Write(mqttwire.AppendUnsuback(make([]byte, 0, 8+n), id, n, mqttwire.NoSubscriptionExisted, v5))
	case mqttwire.DISCONNECT:
		_, expiry, _, err := mqttwire.ParseDisconnect(body, v5)
		if err != nil {
			return err
		}
		if expiry > 0 && c.noExpiry {
			// MQTT 5 §3.14.2.2.2: not a valid DISCONNECT; the server answers it
			// with DISCONNECT 0x82.
			return &mqttwire.Error{Code: mqttwire.ProtocolError, Msg: "DISCONNECT: session expiry interval above 0 after none in CONNECT (MQTT 5 §3.14.2.2.2)"}
		}
		c.Close(nil) // Disconnected hears nil: the client said goodbye
		return nil
	case mqttwire.PUBACK, mqttwire.PUBREC, mqttwire.PUBCOMP:
		return nil // the server sends no PUBLISH: nothing waits for these
	case mqttwire.CONNECT:
		return &mqttwire.Error{Code: mqttwire.ProtocolError, Msg: "a second CONNECT [MQTT-3.1.0-2]"}
	case mqttwire.AUTH:
		return &mqttwire.Error{Code: mqttwire.ProtocolError, Msg: "AUTH without enhanced authentication"}
	}
	return &mqttwire.Error{Code: mqttwire.ProtocolError, Msg: "packet type " + strconv.Itoa(int(typ)) + " from a client"}
}

func (c *Client) publish(flags byte, body []byte) error {
	v5 := c.V5()
	pk := pubPool.Get().(*mqttwire.Publish) // the Handler interface makes it escape
	defer pubPool.Put(pk)
	var err error
	if *pk, err = mqttwire.ParsePublish(flags, body, v5); err != nil {
		return err
	}
	if v5 {
		if pk.Retain {
			return &mqttwire.Error{Code: mqttwire.RetainNotSupported, Msg: "retained PUBLISH (the CONNACK said Retain Available 0)"}
		}
		if a := pk.TopicAlias; a > 0 {
			if a > c.aliasMax {
				return &mqttwire.Error{Code: mqttwire.TopicAliasInvalid, Msg: "topic alias above the maximum [MQTT-3.3.2-9]"}
			}
			if c.aliases == nil {
				c.aliases = make([][]byte, int(c.aliasMax)+1) // int: 65,535+1 wraps in uint16
			}
			switch {
			case len(pk.Topic) > 0:
				if c.aliasBytes+len(pk.Topic)-len(c.aliases[a]) > maxAliasBytes {
					return &mqttwire.Error{Code: mqttwire.QuotaExceeded, Msg: "topic aliases hold more than " + strconv.Itoa(maxAliasBytes) + " bytes"}
				}
				c.aliasBytes += len(pk.Topic) - len(c.aliases[a])
				c.aliases[a] = append(c.aliases[a][:0], pk.Topic...)
			case len(c.aliases[a]) == 0:
				return &mqttwire.Error{Code: mqttwire.ProtocolError, Msg: "topic alias not set on this connection"}
			default:
				pk.Topic = c.aliases[a]
			}
		}
	}
	if pk.QoS == 2 {
		if _, ok := c.qos2[pk.PacketID]; ok {
			// MQTT 5 [MQTT-4.3.3-10]: a PUBLISH again before PUBREL gets its PUBREC
			// again and is not handled twice.
			var out [8]byte
			return c.Write(mqttwire.AppendAck(out[:0], mqttwire.PUBREC, pk.PacketID, 0, "", v5))
		}
		open := len(c.qos2)
		if v5 {
			open += int(c.unacked.Load())
		}
		if open >= int(c.srv.cfg.ReceiveMaximum) {
			// MQTT 5 §3.3.4: QoS 1 and QoS 2 together; an MQTT 3.1.1 client,
			// which has no receive maximum, is held to it for QoS 2 alone:
			// each exchange is state kept here.
			return &mqttwire.Error{Code: mqttwire.ReceiveMaximumExceeded, Msg: "more unacknowledged QoS 1 and 2 PUBLISHes than the receive maximum"}
		}
	}
	code, reason, send := c.srv.cfg.Handler.Publish(c, pk)
	if c.closed() {
		// The handler ended the connection: nothing after this packet is
		// handled (fail keeps the handler's reason).
		return ErrClosed
	}
	if pk.QoS != 2 || !send {
		return nil
	}
	if code < 0x80 {
		if c.qos2 == nil {
			c.qos2 = make(map[uint16]struct{})
		}
		c.qos2[pk.PacketID] = struct{}{}
	}
	var out [128]byte
	return c.Write(c.AppendAck(out[:0], mqttwire.PUBREC, pk.PacketID, code, reason))
}
