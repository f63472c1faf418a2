package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/lb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoLossAcrossLoadBalancerRestart: 50 devices (half MQTT 3.1.1, half 5)
// publish 200 QoS 1 readings each through an in-process load balancer that
// restarts once mid-run, cutting every connection. Devices reconnect and send
// again whatever was not acknowledged. Every acknowledged reading must be in
// the sink exactly once; redeliveries of readings that were written but not
// acknowledged are recognised by their (device, seq) id and counted.
func TestNoLossAcrossLoadBalancerRestart(t *testing.T) {
	const (
		devices = 50
		each    = 200
		window  = 16 // readings in flight per device
	)
	if testing.Short() {
		t.Skip("-short")
	}
	var commitNanos, commits atomic.Int64
	e := start(t, func(c *Config) {
		c.Sink.OnCommit = func(_, _ int, d time.Duration, _ error) { commitNanos.Add(int64(d)); commits.Add(1) }
	})
	balancer, err := lb.Start(lb.Config{Listen: "127.0.0.1:0", Backend: e.g.MQTTAddr(), Source: lbAddr, Version: 2})
	require.NoError(t, err)
	defer balancer.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	var (
		ackedTotal  atomic.Int64
		connects    atomic.Int64
		failedPubs  atomic.Int64
		restartedAt atomic.Int64
		restartTime time.Duration
		restartOnce sync.Once
		restartDone = make(chan struct{})
	)
	acked := make([][]bool, devices)
	start := time.Now()
	var wg sync.WaitGroup
	for d := range devices {
		acked[d] = make([]bool, each)
		wg.Go(func() {
			id := fmt.Sprintf("dev%02d", d)
			cfg := device.Config{
				ID: id, Version: byte(4 + d%2), Addr: balancer.Addr(),
				Local:   netip.AddrFrom4([4]byte{127, 0, 1, byte(d + 1)}),
				TLS:     &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"},
				Timeout: 5 * time.Second,
			}
			var mu sync.Mutex
			for attempt := 0; ctx.Err() == nil; attempt++ {
				var todo []int
				mu.Lock()
				for seq, ok := range acked[d] {
					if !ok {
						todo = append(todo, seq)
					}
				}
				mu.Unlock()
				if len(todo) == 0 {
					return
				}
				c, err := device.Connect(ctx, cfg)
				if err != nil {
					select { // the load balancer is restarting: try again shortly
					case <-time.After(20 * time.Millisecond):
					case <-ctx.Done():
					}
					continue
				}
				connects.Add(1)
				sem := make(chan struct{}, window)
				var inflight sync.WaitGroup
				for _, seq := range todo {
					select {
					case <-c.Lost():
					case sem <- struct{}{}:
					}
					select {
					case <-c.Lost():
						continue // not sent; sent again after reconnecting
					default:
					}
					inflight.Go(func() {
						defer func() { <-sem }()
						if err := c.Publish(ctx, "telemetry/"+id, 1, device.Reading(id, uint64(seq), 20)); err != nil {
							failedPubs.Add(1)
							return
						}
						mu.Lock()
						acked[d][seq] = true
						mu.Unlock()
						if n := ackedTotal.Add(1); n == devices*each/2 {
							restartOnce.Do(func() {
								go func() {
									restartedAt.Store(n)
									restartTime = time.Since(start)
									assert.NoError(t, balancer.Restart(), "restart")
									close(restartDone)
								}()
							})
						}
					})
				}
				inflight.Wait()
				c.Close()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.NoError(t, ctx.Err(), "not done in time: %d of %d acknowledged", ackedTotal.Load(), devices*each)
	<-restartDone
	require.NoError(t, e.g.Shutdown(context.Background(), 0))

	sum := e.summary(t)
	st := e.g.Sink().Stats()
	missing := 0
	for d := range devices {
		for seq := range each {
			assert.True(t, acked[d][seq], "dev%02d/%d never acknowledged", d, seq)
			if sum.Count[fmt.Sprintf("dev%02d/%d", d, seq)] != 1 {
				missing++
			}
		}
	}
	t.Logf("%d devices x %d QoS 1 readings in %v (%.0f/s); load balancer restarted after %d acknowledgements (at %v)",
		devices, each, elapsed.Round(time.Millisecond), float64(devices*each)/elapsed.Seconds(), restartedAt.Load(), restartTime.Round(time.Millisecond))
	t.Logf("acknowledged %d; in the sink %d lines, %d distinct ids, %d duplicate lines; redelivered readings recognised by id at ingest: %d",
		ackedTotal.Load(), sum.Lines, sum.Unique, sum.Duplicates, st.Duplicates)
	t.Logf("connections %d (%d reconnects), publishes without acknowledgement (sent again) %d, fsync'ed batches %d (%.1f readings each)",
		connects.Load(), connects.Load()-devices, failedPubs.Load(), st.Batches, float64(st.Records)/float64(max(st.Batches, 1)))
	t.Logf("time in write+fsync: %v total, %v per batch", time.Duration(commitNanos.Load()).Round(time.Millisecond), time.Duration(commitNanos.Load()/max(commits.Load(), 1)))
	assert.Zero(t, missing, "ids in the sink not exactly once")
	assert.Equal(t, devices*each, sum.Unique)
	assert.Zero(t, sum.Duplicates)
	assert.Zero(t, sum.Invalid)
	assert.False(t, sum.Torn)
	assert.EqualValues(t, devices*each, ackedTotal.Load(), "acknowledged")
	assert.Greater(t, connects.Load(), int64(devices), "a device reconnected: the restart cut connections")
}
