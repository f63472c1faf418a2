package gateway

import (
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// ackQueue writes one connection's QoS 1 acknowledgements itself, each once
// its reading is durable, in the order the PUBLISH packets arrived (MQTT
// 3.1.1 §4.6 and MQTT 5 §4.6: PUBACKs in the order of the PUBLISHes).
//
// mochi writes the PUBACK inside the connection's read loop once the
// OnPublish hook returns, so a hook that waits for the sink leaves at most one
// reading of each connection waiting for a commit, however many the device
// has in flight. The hook instead submits the reading, appends an entry here
// and returns packets.ErrRejectPacket, after which mochi sends nothing and
// reads the next packet; the sink's answer marks the entry, and the oldest
// entries that are answered are written, in order, in one write to the
// connection under the client's lock (which serialises writers as mochi's
// own Client.WritePacket does; mochi's byte and packet counters miss them).
// The sink answers on its committing goroutine, which must not wait for a
// slow client, so the writes run on a goroutine started when the oldest entry
// becomes writable and ending when none is: an idle connection has none.
//
// The queue also enforces the receive maximum itself (mochi counts only the
// acknowledgements it writes): it holds at most max entries, a MQTT 5 client
// that sends more is disconnected with "receive maximum exceeded" as mochi
// would, and a MQTT 3.1.1 client, which has no such limit, waits: mochi reads
// nothing more from it, and TCP pushes back.
type ackQueue struct {
	cl  *mqtt.Client
	max int

	mu       sync.Mutex
	cond     sync.Cond // signalled when entries leave the queue
	q        []*pendingAck
	flushing bool
	dead     bool // the connection is being dropped: write nothing more
	closing  bool // the gateway is shutting down: nobody waits for room
}

// pendingAck is one QoS 1 PUBLISH waiting for its answer.
type pendingAck struct {
	id    uint16
	ready bool
	send  bool         // write a PUBACK (MQTT 3.1.1 has no negative one)
	code  packets.Code // its reason code (MQTT 5)
}

func newAckQueue(cl *mqtt.Client, max int) *ackQueue {
	a := &ackQueue{cl: cl, max: max}
	a.cond.L = &a.mu
	return a
}

// add appends an entry for PUBLISH id, waiting for room first (MQTT 3.1.1),
// and returns it; it returns nil, nil when id is already waiting (a
// retransmission on the same connection: it gets the one PUBACK the first
// gets, never a second one that the client could take for a later PUBLISH
// reusing the id), and an error when a MQTT 5 client exceeds the receive
// maximum.
func (a *ackQueue) add(id uint16, v5 bool) (*pendingAck, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.q {
		if p.id == id {
			return nil, nil
		}
	}
	if len(a.q) >= a.max {
		if v5 {
			return nil, packets.ErrReceiveMaximum
		}
		for len(a.q) >= a.max && !a.dead && !a.closing {
			a.cond.Wait()
		}
	}
	p := &pendingAck{id: id}
	a.q = append(a.q, p)
	return p, nil
}

// answer marks p as answered: send says whether a PUBACK goes out for it
// (with code), and writes what is writable.
func (a *ackQueue) answer(p *pendingAck, send bool, code packets.Code) {
	a.mu.Lock()
	p.ready, p.send, p.code = true, send, code
	start := !a.flushing && len(a.q) > 0 && a.q[0].ready
	if start {
		a.flushing = true
	}
	a.mu.Unlock()
	if start {
		go a.flush()
	}
}

// drop stops every later acknowledgement: the connection is being closed
// because a reading could not be stored, and acknowledging a later one
// would break the order. Entries still waiting are answered by the sink and
// discarded.
func (a *ackQueue) drop() {
	a.mu.Lock()
	a.dead = true
	a.cond.Broadcast()
	a.mu.Unlock()
}

// release lets a read loop waiting for room go on, so that it notices its
// connection closing: at shutdown the store may answer only after mochi has
// stopped every client, and mochi waits for every read loop.
func (a *ackQueue) release() {
	a.mu.Lock()
	a.closing = true
	a.cond.Broadcast()
	a.mu.Unlock()
}

// flush writes the answered entries at the head of the queue, oldest first,
// until the head is one still waiting.
func (a *ackQueue) flush() {
	var out []*pendingAck
	var buf []byte
	for {
		a.mu.Lock()
		n := 0
		for n < len(a.q) && a.q[n].ready {
			n++
		}
		if n == 0 {
			a.flushing = false
			a.cond.Broadcast()
			a.mu.Unlock()
			return
		}
		out = append(out[:0], a.q[:n]...)
		clear(a.q[:n])
		a.q = a.q[n:]
		dead := a.dead
		a.cond.Broadcast()
		a.mu.Unlock()
		if dead {
			continue
		}
		var err error
		if buf, err = a.write(buf[:0], out); err != nil {
			a.drop() // the connection is gone; the device sends them again
		}
	}
}

// write writes the PUBACKs of out. Successful ones, four bytes each, go out
// together in one write (one TLS record instead of one per reading),
// under the client's lock as mochi's own writes; one with a failure reason
// code goes through Client.WritePacket, which encodes its reason string as
// the client allows.
func (a *ackQueue) write(buf []byte, out []*pendingAck) ([]byte, error) {
	for i, p := range out {
		if !p.send {
			continue
		}
		if p.code.Code < packets.ErrUnspecifiedError.Code {
			// MQTT 5 §3.4.2.1: a success without properties may omit the
			// reason code, which makes it the MQTT 3.1.1 packet.
			buf = append(buf, packets.Puback<<4, 2, byte(p.id>>8), byte(p.id))
			if i < len(out)-1 {
				continue
			}
		}
		if err := a.writeRaw(buf); err != nil {
			return buf, err
		}
		buf = buf[:0]
		if p.code.Code >= packets.ErrUnspecifiedError.Code {
			if err := a.cl.WritePacket(ackPacket(p)); err != nil {
				return buf, err
			}
		}
	}
	return buf, a.writeRaw(buf)
}

// writeRaw writes encoded packets to the client's connection.
func (a *ackQueue) writeRaw(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if a.cl.Closed() {
		return mqtt.ErrConnectionClosed
	}
	a.cl.Lock()
	defer a.cl.Unlock()
	_, err := a.cl.Net.Conn.Write(b)
	return err
}

// waitIdle returns once every entry has been answered and written (or
// dropped): for a QoS 2 PUBLISH, which mochi acknowledges itself and which
// must not overtake the acknowledgements before it.
func (a *ackQueue) waitIdle() {
	a.mu.Lock()
	for (len(a.q) > 0 || a.flushing) && !a.dead && !a.closing {
		a.cond.Wait()
	}
	a.mu.Unlock()
}

// ackPacket is p's PUBACK, without the PUBLISH's properties (mochi copies
// them into its own acknowledgements unless told not to; a device gains
// nothing from its user properties echoed).
func ackPacket(p *pendingAck) packets.Packet {
	return ackOf(packets.Puback, p.id, p.code)
}

// ackOf is the acknowledgement of type typ (PUBACK, PUBREC) of packet id
// with reason code, and its reason string when code is an error.
func ackOf(typ byte, id uint16, code packets.Code) packets.Packet {
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: typ},
		PacketID:    id,
		ReasonCode:  code.Code,
	}
	if code.Code >= packets.ErrUnspecifiedError.Code {
		pk.Properties.ReasonString = code.Reason
	}
	return pk
}
