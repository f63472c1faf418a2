package gateway

import "net/netip"

type netipAP = netip.AddrPort

func mustAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
