package gateway

import (
	"net/netip"
	"os"
)

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

type netipAP = netip.AddrPort

func mustAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
