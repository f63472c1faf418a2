package ingest_test

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// idle is Config.IdleAfter where these tests want connections to park.
const idle = 50 * time.Millisecond

func parking(c *ingest.Config) { c.IdleAfter = idle }

// transports runs f over plain TCP and over TLS.
func transports(t *testing.T, f func(t *testing.T, opts ...option)) {
	t.Run("tcp", func(t *testing.T) { f(t) })
	t.Run("tls", func(t *testing.T) { f(t, withTLS()) })
}

// serverGoroutines counts the goroutines running the ingest package's own
// code (the test's harness runs in ingest_test).
func serverGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/ingest.(*Client)") {
			count++
		}
	}
	return count
}

// goroutinesAtMost waits until no more than n goroutines run; it fails
// with their stacks. (Not require.Eventually: its own goroutines count.)
func goroutinesAtMost(t *testing.T, n int) {
	t.Helper()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			require.FailNow(t, "goroutines left", "%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		<-tk.C
	}
}

// The package's point: a connection that has read nothing for IdleAfter
// waits in the epoll set without a goroutine (Stats().Parked, and the
// goroutine count falls back to what it was before the client came);
// a PUBLISH gives it one again (Stats().Resumed), is handled and answered;
// and it parks again. Each readiness resumes it exactly once.
func TestParkAndResume(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		h := newRecorder()
		hs := serve(t, h, append(opts, withConfig(parking))...)
		before := runtime.NumGoroutine()
		rc, c := hs.dialConnected(t, 5, "park")
		hs.waitParked(t, 1)
		goroutinesAtMost(t, before)
		// Parked counts the connection before its goroutine has returned.
		require.Eventually(t, func() bool { return serverGoroutines() == 0 }, wait, tick, "a parked connection has no goroutine")
		assert.Equal(t, uint64(0), hs.srv.Stats().Resumed.Load())

		for i := uint64(1); i <= 3; i++ {
			rc.send(publishPkt(true, 1, uint16(i), "t/park", fmt.Sprint(i)))
			assert.Equal(t, mqttwire.AppendAck(nil, mqttwire.PUBACK, uint16(i), 0, "", true), rc.read().raw)
			p := h.nextPublish(t)
			assert.Same(t, c, p.client)
			assert.Equal(t, fmt.Sprint(i), p.payload)
			hs.waitParked(t, 1)
			assert.Equal(t, i, hs.srv.Stats().Resumed.Load(), "one PUBLISH, one resume")
		}
		require.Eventually(t, func() bool { return serverGoroutines() == 0 }, wait, tick)
		assert.Empty(t, h.disconnected)
	})
}

// A connection that keeps reading within IdleAfter never parks. The client
// sends for twice IdleAfter at a pace fifty times inside it, so that a
// stall of the test's goroutine on a loaded runner (up to about IdleAfter)
// is not taken for an idle client.
func TestActiveConnectionDoesNotPark(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withConfig(func(c *ingest.Config) { c.IdleAfter = time.Second }))
	rc, _ := hs.dialConnected(t, 4, "busy")
	tk := time.NewTicker(20 * time.Millisecond) // the client's pace, well inside IdleAfter
	defer tk.Stop()
	for i := range 100 {
		<-tk.C
		rc.send(publishPkt(false, 1, uint16(i+1), "t", "x"))
		assert.Equal(t, mqttwire.PUBACK, rc.read().typ)
		h.nextPublish(t)
	}
	assert.Equal(t, uint64(0), hs.srv.Stats().Resumed.Load(), "an active connection parked")
}

// A parked connection whose client goes away ends from the epoll set: the
// close (FIN) is readiness, Disconnected is called once with an error,
// Parked returns to 0 and no goroutine is left. A DISCONNECT sent while
// parked is Disconnected(nil).
func TestParkedClientCloses(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		h := newRecorder()
		hs := serve(t, h, append(opts, withConfig(parking))...)

		rc, c := hs.dialConnected(t, 4, "gone")
		hs.waitParked(t, 1)
		rc.tcp.Close()
		e := h.nextDisconnected(t)
		assert.Same(t, c, e.client)
		assert.Error(t, e.err)
		hs.waitParked(t, 0)
		assert.Equal(t, 1, h.endCount(c))

		rc, c = hs.dialConnected(t, 5, "bye")
		hs.waitParked(t, 1)
		rc.send([]byte{mqttwire.DISCONNECT << 4, 0})
		e = h.nextDisconnected(t)
		assert.Same(t, c, e.client)
		assert.NoError(t, e.err)
		hs.waitParked(t, 0)
		require.Eventually(t, func() bool { return serverGoroutines() == 0 }, wait, tick)
		assert.Equal(t, 1, h.endCount(c))
	})
}

// A packet that arrives in pieces across a park: the first half resumes the
// connection, which parks again holding it; the rest completes it and it is
// handled whole.
func TestParkPartialPacket(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		h := newRecorder()
		hs := serve(t, h, append(opts, withConfig(parking))...)
		rc, _ := hs.dialConnected(t, 5, "half")
		hs.waitParked(t, 1)
		payload := strings.Repeat("p", 300)
		pkt := publishPkt(true, 1, 5, "t/half", payload)
		rc.send(pkt[:len(pkt)/2])
		require.Eventually(t, func() bool {
			return hs.srv.Stats().Resumed.Load() == 1 && hs.srv.Stats().Parked.Load() == 1
		}, wait, tick)
		h.noPublish(t)
		rc.send(pkt[len(pkt)/2:])
		assert.Equal(t, mqttwire.AppendAck(nil, mqttwire.PUBACK, 5, 0, "", true), rc.read().raw)
		assert.Equal(t, payload, h.nextPublish(t).payload)
	})
}

// A TLS record split across a park: crypto/tls holds the first half (a read
// deadline is not fatal to it), the connection parks again, and the second
// half completes the record and the PUBLISH in it.
func TestParkTLSRecordSplit(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withTLS(), withConfig(parking))
	rc, _ := hs.dialConnected(t, 4, "record")
	hs.waitParked(t, 1)
	rec := rc.sealed(publishPkt(false, 1, 6, "t/tls", "split record"))
	require.Greater(t, len(rec), 10)
	rc.sendTCP(rec[:7]) // the record header and a little
	require.Eventually(t, func() bool {
		return hs.srv.Stats().Resumed.Load() == 1 && hs.srv.Stats().Parked.Load() == 1
	}, wait, tick)
	h.noPublish(t)
	rc.sendTCP(rec[7:])
	assert.Equal(t, []byte{mqttwire.PUBACK << 4, 2, 0, 6}, rc.read().raw)
	assert.Equal(t, "split record", h.nextPublish(t).payload)
}

// [MQTT-3.1.2-24] (MQTT 3.1.1; MQTT 5 §3.1.2.10 says the same): a client
// silent for one and a half times its Keep Alive
// is disconnected (MQTT 5: DISCONNECT 0x8D), whether its connection is
// read by a goroutine or parked; Disconnected hears 0x8D once.
func TestKeepAliveExpiry(t *testing.T) {
	for _, parked := range []bool{false, true} {
		versions(t, func(t *testing.T, v byte, v5 bool) {
			name := map[bool]string{false: "active", true: "parked"}[parked]
			t.Run(name, func(t *testing.T) {
				h := newRecorder()
				opts := []option{withParkable(func(int64) bool { return parked })}
				if parked {
					opts = append(opts, withConfig(parking))
				}
				hs := serve(t, h, opts...)
				rc := hs.dialRaw(t)
				pkt := connect4("ka", true, 1)
				if v5 {
					pkt = connect5(t, &paho5.Connect{ClientID: "ka", CleanStart: true, KeepAlive: 1})
				}
				start := time.Now()
				c, _ := rc.connect(h, pkt)
				if parked {
					hs.waitParked(t, 1)
				}
				if v5 {
					rc.expectDisconnect(mqttwire.KeepAliveTimeout)
				} else {
					assert.Empty(t, rc.expectClosed())
				}
				// Not before one and a half times the Keep Alive, less the
				// sweeper's 250 ms granularity.
				assert.GreaterOrEqual(t, time.Since(start), 1250*time.Millisecond)
				h.expectEnded(t, c, mqttwire.KeepAliveTimeout)
				hs.waitParked(t, 0)
				assert.Equal(t, 1, h.endCount(c))
			})
		})
	}
}

// [MQTT-3.1.2-24] the other way: a client that sends a PINGREQ within its
// Keep Alive stays connected well past one and a half times it, parked
// between pings or not.
func TestKeepAliveKeptByPings(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(map[bool]string{false: "active", true: "parked"}[parked], func(t *testing.T) {
			h := newRecorder()
			opts := []option{withParkable(func(int64) bool { return parked })}
			if parked {
				opts = append(opts, withConfig(parking))
			}
			hs := serve(t, h, opts...)
			rc := hs.dialRaw(t)
			rc.connect(h, connect4("pinger", true, 1))
			tk := time.NewTicker(600 * time.Millisecond) // the client's pace: within its Keep Alive
			defer tk.Stop()
			for range 5 { // 3 s: twice the 1.5 s limit
				<-tk.C
				rc.send([]byte{mqttwire.PINGREQ << 4, 0})
				assert.Equal(t, []byte{mqttwire.PINGRESP << 4, 0}, rc.read().raw)
			}
			assert.Empty(t, h.disconnected)
		})
	}
}

// [MQTT-3.1.2-24] (MQTT 5 [MQTT-3.1.2-22]): Keep Alive counts from the last
// control packet the server received, CONNECT included, not from when the
// connection was handed over: a CONNECT that comes later than one and a
// half times its Keep Alive (within the caller's deadline for it) is not
// taken for a silent client once its CONNACK is out.
func TestKeepAliveCountsFromConnect(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	time.Sleep(2 * time.Second) // the condition under test: 1.5 s of Keep Alive 1 pass before CONNECT
	c, _ := rc.connect(h, connect4("late", true, 1))
	_ = rc.conn.SetReadDeadline(time.Now().Add(700 * time.Millisecond)) // within the Keep Alive
	_, err := rc.r.ReadByte()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "the server said nothing within the Keep Alive, got %v", err)
	rc.send([]byte{mqttwire.PINGREQ << 4, 0})
	assert.Equal(t, []byte{mqttwire.PINGRESP << 4, 0}, rc.read().raw)
	assert.False(t, c.Closed())
	assert.Empty(t, h.disconnected)
}

// [MQTT-3.1.4-3] for a parked connection: the takeover disconnects it from
// the epoll set (MQTT 5: DISCONNECT 0x8E), once, and the new one parks in
// its place.
func TestSessionTakeoverParked(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		h := newRecorder()
		hs := serve(t, h, append(opts, withConfig(parking))...)
		old, oldC := hs.dialConnected(t, 5, "same")
		hs.waitParked(t, 1)
		_, curC := hs.dialConnected(t, 5, "same")
		old.expectDisconnect(mqttwire.SessionTakenOver)
		e := h.nextDisconnected(t)
		assert.Same(t, oldC, e.client)
		hs.waitParked(t, 1)
		assert.Equal(t, 1, h.endCount(oldC))
		assert.Equal(t, 0, h.endCount(curC))
	})
}

// Server.Close with parked and active clients of both versions: MQTT 5
// clients get DISCONNECT 0x8B (Server shutting down), every client's
// Disconnected is called once, every ServeConn has returned, Parked is 0
// and no goroutine of the server is left.
func TestServerCloseParkedAndActive(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		h := newRecorder()
		before := runtime.NumGoroutine()
		// Odd connections may park, even ones keep their goroutine.
		hs := serve(t, h, append(opts, withConfig(parking), withParkable(func(n int64) bool { return n%2 == 1 }))...)
		type conn struct {
			rc *rawConn
			c  *ingest.Client
			v  byte
		}
		var conns []conn
		for i := range 8 {
			v := byte(4 + i/4)
			rc, c := hs.dialConnected(t, v, fmt.Sprint("c", i))
			conns = append(conns, conn{rc, c, v})
		}
		hs.waitParked(t, 4)
		// Parked counts a connection before its goroutine has returned.
		require.Eventually(t, func() bool { return serverGoroutines() == 4 }, wait, tick, "goroutines of the four unparkable connections only")
		hs.close()
		for _, cn := range conns {
			if cn.v == 5 {
				cn.rc.expectDisconnect(mqttwire.ServerShuttingDown)
			} else {
				assert.Empty(t, cn.rc.expectClosed())
			}
			assert.Equal(t, 1, h.endCount(cn.c), "Disconnected for %s", cn.c.ID)
			assert.True(t, cn.c.Closed())
		}
		assert.Len(t, h.disconnected, len(conns))
		assert.Equal(t, hs.accepted.Load(), hs.returned.Load(), "every ServeConn returned")
		assert.Equal(t, int64(0), hs.srv.Stats().Parked.Load())
		// Close returns once each client has ended, before its goroutine has.
		require.Eventually(t, func() bool { return serverGoroutines() == 0 }, wait, tick, "goroutines of the server left")
		goroutinesAtMost(t, before)
	})
}

// After Close a new connection is not established.
func TestServeAfterClose(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	hs.srv.Close()
	rc := hs.dialRaw(t)
	rc.send(connect4("late", true, 0))
	assert.Empty(t, rc.expectClosed())
	assert.Empty(t, h.established)
}

// Server.Close racing readiness: parked clients of both versions send a
// PUBLISH while the server closes. Each client, resumed or not, hears
// Disconnected once, and nothing of the server is left running. Run with
// -race: Close, the poller and resumed goroutines touch the same clients.
func TestServerCloseRacesResume(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withConfig(parking))
	type conn struct {
		rc *rawConn
		c  *ingest.Client
	}
	conns := make([]conn, 16)
	for i := range conns {
		conns[i].rc, conns[i].c = hs.dialConnected(t, byte(4+i%2), fmt.Sprint("r", i))
	}
	hs.waitParked(t, int64(len(conns)))
	pkts := make([][]byte, len(conns))
	for i := range conns {
		pkts[i] = publishPkt(i%2 == 1, 0, 0, "t", "x")
	}
	start := make(chan struct{})
	var sent sync.WaitGroup
	for i, cn := range conns {
		sent.Add(1)
		go func() {
			defer sent.Done()
			<-start
			_, _ = cn.rc.conn.Write(pkts[i]) // the server may be gone already
		}()
	}
	close(start)
	hs.close()
	sent.Wait()
	for _, cn := range conns {
		cn.rc.expectClosed()
		assert.Equal(t, 1, h.endCount(cn.c), "Disconnected for %s", cn.c.ID)
	}
	assert.Equal(t, int64(0), hs.srv.Stats().Parked.Load())
	// Close returns once each client has ended, before its goroutine has.
	require.Eventually(t, func() bool { return serverGoroutines() == 0 }, wait, tick, "goroutines of the server left")
}
