package gateway

import (
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// masqWarner writes the loud warning about masqueraded clients: once per
// node address per interval, with how many connections or requests it kept
// quiet about meanwhile.
type masqWarner struct {
	every time.Duration
	log   *slog.Logger
	mu    sync.Mutex
	seen  map[netip.Addr]*masqState
}

type masqState struct {
	last       time.Time
	suppressed int
}

func (m *masqWarner) warn(node netip.Addr, protocol string) {
	now := time.Now()
	m.mu.Lock()
	st := m.seen[node]
	if st == nil {
		if len(m.seen) >= 4096 {
			clear(m.seen)
		}
		st = &masqState{}
		m.seen[node] = st
	}
	if !st.last.IsZero() && now.Sub(st.last) < m.every {
		st.suppressed++
		m.mu.Unlock()
		return
	}
	suppressed := st.suppressed
	st.last, st.suppressed = now, 0
	m.mu.Unlock()
	m.log.Warn("CLIENTS ARE MASQUERADED: the resolved address is a node that stands in for its clients; the real client address is lost",
		"node", node.String(), "protocol", protocol, "suppressed_since_last_warning", suppressed,
		"effect", "allowlist refuses these clients; rate limits apply per device identity under this node",
		"fix", "set externalTrafficPolicy: Local on the Service, or have the load balancer send PROXY protocol and list it in -proxy-trusted")
}
