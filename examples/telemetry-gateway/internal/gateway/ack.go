package gateway

import (
	"errors"
	"sync"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// ackQueue writes one connection's QoS 1 acknowledgements itself, each once
// its reading is durable, in the order the PUBLISH packets arrived (MQTT
// 3.1.1 §4.6 and MQTT 5 §4.6: PUBACKs in the order of the PUBLISHes).
//
// A handler that waited for the sink before the next packet is read would
// leave at most one reading of each connection waiting for a commit, however
// many the device has in flight. The hook instead submits the reading,
// appends an entry here and returns, and the connection reads the next
// packet; the sink's answer marks the entry, and the oldest entries that are
// answered are written, in order, in one write to the connection
// (ingest.Client.Write serialises writers).
// The sink answers on its committing goroutine, which must not wait for a
// slow client, so the writes run on a goroutine started when the oldest entry
// becomes writable and ending when none is: an idle connection has none.
//
// The queue also enforces the receive maximum (MQTT 5 §3.3.4): a MQTT 5
// client whose entries and open QoS 2 exchanges (which the server holds)
// would exceed max is disconnected with "receive maximum exceeded"; the
// server counts the entries before a QoS 2 PUBLISH
// (ingest.Client.SetUnacknowledged). A MQTT 3.1.1 client, which has no such
// limit, waits while max entries do: nothing more is read from it, and TCP
// pushes back.
type ackQueue struct {
	cl  *ingest.Client
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
	send  bool // write a PUBACK (MQTT 3.1.1 has no negative one)
	code  code // its reason code (MQTT 5)
}

// errReceiveMaximum is an MQTT 5 client's PUBLISH beyond the receive maximum.
var errReceiveMaximum = errors.New("receive maximum exceeded")

func newAckQueue(cl *ingest.Client, max int) *ackQueue {
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
	if v5 && len(a.q)+a.cl.OpenQoS2() >= a.max {
		return nil, errReceiveMaximum
	}
	for len(a.q) >= a.max && !a.dead && !a.closing {
		a.cond.Wait()
	}
	p := &pendingAck{id: id}
	a.q = append(a.q, p)
	a.cl.SetUnacknowledged(len(a.q))
	return p, nil
}

// answer marks p as answered: send says whether a PUBACK goes out for it
// (with code), and writes what is writable.
func (a *ackQueue) answer(p *pendingAck, send bool, c code) {
	a.mu.Lock()
	p.ready, p.send, p.code = true, send, c
	start := !a.flushing && len(a.q) > 0 && a.q[0].ready
	// Every entry answered: nothing else of this connection is waiting in
	// the store's batch, so the acknowledgements go out now, on this
	// goroutine, when that cannot block (tryFlush); otherwise, or while
	// later entries wait, a goroutine of the connection's own writes them.
	all := start && a.q[len(a.q)-1].ready
	if start {
		a.flushing = true
	}
	a.mu.Unlock()
	if start && !(all && a.tryFlush()) {
		go a.flush()
	}
}

// tryFlush writes the answered entries at the head of the queue on the
// calling goroutine if the connection can take them without blocking
// (ingest.Client.TryWrite). It returns true when it is done and flushing is
// over, false when a flush goroutine is still needed (flushing stays set).
//
// The entries leave the queue under the same lock as their PUBACKs are
// written: a client that has read a PUBACK and sends the next PUBLISH at
// once must never find the acknowledged one still counted against its
// receive maximum.
func (a *ackQueue) tryFlush() bool {
	var scratch [256]byte
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for n < len(a.q) && a.q[n].ready {
		n++
	}
	var buf []byte
	if !a.dead {
		buf = a.appendAcks(scratch[:0], a.q[:n])
	}
	if len(buf) > len(scratch) { // many, or long reason strings: the flush goroutine writes them
		return false
	}
	ok, err := a.cl.TryWrite(buf) // never blocks: it may hold the lock
	if !ok {
		return false
	}
	if err != nil {
		a.dead = true // the connection is gone; the device sends them again
	}
	clear(a.q[:n])
	a.q = a.q[n:]
	a.cl.SetUnacknowledged(len(a.q))
	a.cond.Broadcast()
	if len(a.q) > 0 && a.q[0].ready {
		return false
	}
	a.flushing = false
	return true
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
// connection closing: at shutdown the store may answer only after the
// server has stopped every client, and the server waits for every reading
// goroutine.
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
		a.cl.SetUnacknowledged(len(a.q))
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

// write writes the PUBACKs of out together, in one write (one TLS record
// instead of one per reading).
func (a *ackQueue) write(buf []byte, out []*pendingAck) ([]byte, error) {
	buf = a.appendAcks(buf, out)
	return buf, a.cl.Write(buf)
}

// appendAcks appends the PUBACKs of ps that are to be sent.
func (a *ackQueue) appendAcks(buf []byte, ps []*pendingAck) []byte {
	for _, p := range ps {
		if p.send {
			buf = a.cl.AppendAck(buf, mqttwire.PUBACK, p.id, p.code.code, p.code.reason)
		}
	}
	return buf
}

// waitIdle returns once every entry has been answered and written (or
// dropped): for a QoS 2 PUBLISH, which the server acknowledges and which
// must not overtake the acknowledgements before it.
func (a *ackQueue) waitIdle() {
	a.mu.Lock()
	for (len(a.q) > 0 || a.flushing) && !a.dead && !a.closing {
		a.cond.Wait()
	}
	a.mu.Unlock()
}
