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
)

// TestHeaderlessTrustedNodeIsFlagged pins the remedy the report's note on
// CaveatNoProxyHeader gives under Cluster: when the PROXY listener lets a
// trusted node connect without a header (proxyproto.HeaderlessAllow), the
// recipe's resolver flags the node as masqueraded instead of naming a client.
func TestHeaderlessTrustedNodeIsFlagged(t *testing.T) {
	cfg, err := trafficpolicy.Expect(trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, Path: trafficpolicy.PathLoadBalancer, LB: trafficpolicy.LBProxyProtocol, LocalEndpoint: true}).Config(topo.Network())
	if err != nil {
		t.Fatal(err)
	}
	r := clientip.MustNew(cfg)
	res, err := r.Resolve(clientip.Transport{Peer: netip.AddrPortFrom(topo.NodeAddr(3).V4, 40000)}, nil)
	if !errors.Is(err, clientip.ErrMasqueraded) || !res.Masqueraded {
		t.Errorf("Resolve(headerless from a trusted node) = %v, %v; want ErrMasqueraded", res, err)
	}
}

// Options the lab cannot run with are refused before anything is built
// (a negative -conns once crashed it after the namespaces were up).
func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().validate(); err != nil {
		t.Fatalf("default options: %v", err)
	}
	for _, mutate := range []func(*Options){
		func(o *Options) { o.Conns = -1 },
		func(o *Options) { o.Conns = 0 },
		func(o *Options) { o.SkewConns = -1 },
		func(o *Options) { o.SkewConns = maxConns + 1 },
		func(o *Options) { o.Timing.Rise = 0 },
		func(o *Options) { o.Timing.Interval = -time.Second },
		func(o *Options) { o.Timing.Timeout = 2 * o.Timing.Interval },
		func(o *Options) { o.Modes = nil },
		func(o *Options) { o.Modes = []kubeproxy.Mode{"ipvs"} },
	} {
		o := DefaultOptions()
		mutate(&o)
		rep, err := Run(context.Background(), o)
		if err == nil || rep == nil || rep.Err == nil {
			t.Errorf("Run(%+v) = %v; want an options error", o, err)
		}
	}
}
