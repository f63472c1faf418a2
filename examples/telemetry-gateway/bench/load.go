package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttload"
)

// client is the one load generator every target gets.
type client struct {
	tls     *tls.Config
	version byte
}

// source is the loopback address device i connects from: 127.1.0.1 on, 250
// devices per /24, so that no source runs out of ports. Behind the PROXY
// header (the client playing the load balancer, which the gateway trusts as
// 127.1.0.0/16) device i claims claim(i), a documentation address.
func source(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1, byte(i / 250), byte(i%250 + 1)})
}

func claim(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i%250 + 1)}), uint16(10000+i/250))
}

// runs numbers the runs of this process, so that every run's readings have
// ids of their own: a store that remembers ids (JetStream's duplicate
// window) would otherwise take a later run's readings for redeliveries.
var runs atomic.Int64

func deviceID(run int64, i int) string { return fmt.Sprintf("b%d-%05d", run, i) }

// connect opens n MQTT connections to p as the devices of a new run, at
// most 64 handshakes at a time, and returns them with the run's number.
func (c client) connect(ctx context.Context, t target, p *process, n int, keepalive uint16) ([]*mqttload.Conn, int64, error) {
	run := runs.Add(1)
	conns := make([]*mqttload.Conn, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cfg := device.Config{Addr: p.addr, Local: source(i), TLS: c.tls, Timeout: 30 * time.Second}
			if t.proxy {
				cfg.Proxy, cfg.Claim = 2, claim(i)
			}
			tc, err := device.Dial(ctx, cfg)
			if err == nil {
				_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
				conns[i], err = mqttload.Handshake(tc, deviceID(run, i), c.version, keepalive)
				_ = tc.SetDeadline(time.Time{})
				if err != nil {
					tc.Close()
				}
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("device %d: %w", i, err)
				}
				mu.Unlock()
			}
		})
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	if first != nil {
		closeAll(conns)
		return nil, 0, first
	}
	return conns, run, nil
}

func closeAll(conns []*mqttload.Conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

// throughput is what one publishing run measured.
type throughput struct {
	msgs     int
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      cpuTimes // the broker's CPU time meanwhile
}

func (r throughput) rate() float64 { return float64(r.msgs) / r.elapsed.Seconds() }

// cpuPerMsg is the broker's CPU time per reading, in microseconds.
func (r throughput) cpuPerMsg() float64 {
	return float64(r.cpu.total().Microseconds()) / float64(r.msgs)
}

// sysPerMsg is the part of cpuPerMsg spent in the kernel.
func (r throughput) sysPerMsg() float64 { return float64(r.cpu.sys.Microseconds()) / float64(r.msgs) }

// publish sends total QoS 1 readings over conns connections with inflight
// unacknowledged on each, and measures from the first PUBLISH to the last
// PUBACK; latency is from writing a PUBLISH to reading its PUBACK.
func (c client) publish(ctx context.Context, t target, p *process, conns, inflight, total int) (throughput, error) {
	cs, run, err := c.connect(ctx, t, p, conns, 600)
	if err != nil {
		return throughput{}, err
	}
	defer closeAll(cs)
	per := total / conns
	lats := make([][]time.Duration, conns)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	cpu0, cpuErr := p.cpuTime()
	start := time.Now()
	for i, cn := range cs {
		wg.Go(func() {
			if err := runConn(ctx, cn, deviceID(run, i), per, inflight, &lats[i]); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := p.cpuTime()
	if e := failed.Load(); e != nil {
		return throughput{}, *e
	}
	if err = errors.Join(cpuErr, err); err != nil {
		return throughput{}, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return throughput{msgs: per * conns, elapsed: elapsed, p50: all[len(all)/2], p99: all[len(all)*99/100], cpu: cpu1.sub(cpu0)}, nil
}

// idRing is how many packet ids a connection cycles through; it must exceed
// the readings in flight.
const idRing = 1024

// runConn publishes n readings on cn, keeping up to window unacknowledged,
// and appends each one's latency to lat.
func runConn(ctx context.Context, cn *mqttload.Conn, id string, n, window int, lat *[]time.Duration) error {
	if window >= idRing {
		return errors.New("in flight must be below 1024")
	}
	var sent [idRing + 1]int64
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	topic := "telemetry/" + id
	readErr := make(chan error, 1)
	go func() {
		*lat = make([]time.Duration, 0, n)
		for range n {
			pid, code, err := cn.ReadAck()
			if err == nil && code >= 0x80 {
				err = fmt.Errorf("PUBACK 0x%02x", code)
			}
			if err != nil {
				readErr <- err
				return
			}
			*lat = append(*lat, time.Duration(time.Now().UnixNano()-atomic.LoadInt64(&sent[pid])))
			tokens <- struct{}{}
		}
		readErr <- nil
	}()
	var buf, payload []byte
	for seq := 0; seq < n; {
		select {
		case <-tokens:
		case err := <-readErr:
			if err == nil {
				err = errors.New("acknowledgements ended early")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		k := 1
	more:
		for seq+k < n {
			select {
			case <-tokens:
				k++
			default:
				break more
			}
		}
		buf = buf[:0]
		now := time.Now().UnixNano()
		for range k {
			pid := uint16(seq%idRing + 1)
			atomic.StoreInt64(&sent[pid], now)
			payload = appendReading(payload[:0], id, seq)
			buf = cn.AppendPublish(buf, topic, pid, 1, payload)
			seq++
		}
		if err := cn.Write(buf); err != nil {
			return err
		}
	}
	select {
	case err := <-readErr:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appendReading appends a reading like the devices' to b.
func appendReading(b []byte, id string, seq int) []byte {
	b = append(b, `{"device":"`...)
	b = append(b, id...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	return append(b, `,"values":{"temp":21.5}}`...)
}
