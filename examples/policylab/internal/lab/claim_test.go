package lab

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeaderlessTrustedNodeIsFlagged pins the remedy the report's note on
// CaveatNoProxyHeader gives under Cluster: when the PROXY listener lets a
// trusted node connect without a header (proxyproto.HeaderlessAllow), the
// recipe's resolver flags the node as masqueraded instead of naming a client.
func TestHeaderlessTrustedNodeIsFlagged(t *testing.T) {
	cfg, err := trafficpolicy.Expect(trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, Path: trafficpolicy.PathLoadBalancer, LB: trafficpolicy.LBProxyProtocol, LocalEndpoint: true}).Config(topo.Network())
	require.NoError(t, err)
	r := clientip.MustNew(cfg)
	res, err := r.Resolve(clientip.Transport{Peer: netip.AddrPortFrom(topo.NodeAddr(3).V4, 40000)}, nil)
	assert.ErrorIs(t, err, clientip.ErrMasqueraded, "Resolve(headerless from a trusted node) = %v", res)
	assert.True(t, res.Masqueraded, "Resolve(headerless from a trusted node) = %v", res)
}

// Options the lab cannot run with are refused before anything is built
// (a negative -conns once crashed it after the namespaces were up).
func TestOptionsValidate(t *testing.T) {
	require.NoError(t, DefaultOptions().Validate(), "default options")
	for _, mutate := range []func(*Options){
		func(o *Options) { o.Conns = -1 },
		func(o *Options) { o.Conns = 0 },
		func(o *Options) { o.SkewConns = -1 },
		func(o *Options) { o.SkewConns = maxConns + 1 },
		func(o *Options) { o.Timing.Rise = 0 },
		func(o *Options) { o.Timing.Interval = -time.Second },
		func(o *Options) { o.Timing.Timeout = 2 * o.Timing.Interval },
		func(o *Options) { o.Timing.Timeout = -time.Second },
		func(o *Options) { o.Modes = nil },
		func(o *Options) { o.Modes = []kubeproxy.Mode{"ipvs"} },
	} {
		o := DefaultOptions()
		mutate(&o)
		rep, err := Run(context.Background(), o)
		assert.Error(t, err, "Run(%+v): want an options error", o)
		if assert.NotNil(t, rep, "Run(%+v): want a report", o) {
			assert.Error(t, rep.Err, "Run(%+v): want an options error in the report", o)
		}
	}
}

// A run cut short says why, in its error and so in the report: an
// interrupted run blamed whatever the cancellation reached first (a
// committed report read "haproxy: exited before it was ready (signal:
// terminated)" for a run stopped by SIGTERM).
func TestInterruptedRunSaysSo(t *testing.T) {
	stopped := errors.New("SIGTERM in a test")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stopped)
	rep, err := Run(ctx, DefaultOptions())
	require.Error(t, err)
	assert.ErrorIs(t, err, stopped)
	assert.Contains(t, err.Error(), "stopped early (SIGTERM in a test)")
	assert.ErrorIs(t, rep.Err, stopped)
}
