package main

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// TestHeaderlessTrustedNodeIsFlagged pins the remedy the report's note on
// CaveatNoProxyHeader gives under Cluster: when the PROXY listener lets a
// trusted node connect without a header (proxyproto.HeaderlessAllow), the
// recipe's resolver flags the node as masqueraded instead of naming a client.
func TestHeaderlessTrustedNodeIsFlagged(t *testing.T) {
	cfg, err := trafficpolicy.Expect(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol)).Config(labNetwork())
	if err != nil {
		t.Fatal(err)
	}
	r := clientip.MustNew(cfg)
	res, err := r.Resolve(clientip.Transport{Peer: netip.AddrPortFrom(nodeAddr(3).v4, 40000)}, nil)
	if !errors.Is(err, clientip.ErrMasqueraded) || !res.Masqueraded {
		t.Errorf("Resolve(headerless from a trusted node) = %v, %v; want ErrMasqueraded", res, err)
	}
}
