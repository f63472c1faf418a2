package gateway

import (
	"net"
	"net/http"
	"strconv"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/explain"
)

// mountExplain serves GET /debug/clientip/conn on the admin mux when
// Config.ExplainAllow names who may see it: the explanation of one open
// MQTT connection, named by ?conn=<connection number> or ?client=<client
// id>, as the explain package renders it (JSON, or text for curl). Anyone
// else gets 404, as if nothing were mounted.
func (g *Gateway) mountExplain(mux *http.ServeMux) error {
	if g.cfg.ExplainAllow.Len() == 0 {
		return nil
	}
	h, err := explain.New(explain.Config{Trust: g.mqttTrust, AllowPeers: g.cfg.ExplainAllow})
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /debug/clientip/conn", func(w http.ResponseWriter, r *http.Request) {
		if h.Check(r) != nil {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		c, s, ok := g.hook.find(q.Get("conn"), q.Get("client"))
		if !ok {
			http.Error(w, "no open MQTT connection with that conn or client id", http.StatusNotFound)
			return
		}
		if s.conn.Transport != "" {
			// Its client was resolved from the upgrade request's headers,
			// which are gone, under another chain's trust.
			http.Error(w, "an MQTT-over-WebSocket connection: its client was resolved from the upgrade request, whose layers its log line shows", http.StatusConflict)
			return
		}
		h.ServeConn(w, r, c, "conn "+strconv.FormatUint(s.conn.Conn, 10)+" client "+s.conn.ClientID)
	})
	return nil
}

// find returns the network connection and the session of the open session
// whose connection number is conn or whose client id is client.
func (h *hook) find(conn, client string) (net.Conn, *session, bool) {
	num, err := strconv.ParseUint(conn, 10, 64)
	if conn != "" && err != nil {
		return nil, nil, false
	}
	var found net.Conn
	var fs *session
	h.sessions.Range(func(k, v any) bool {
		cl, s := k.(*ingest.Client), v.(*session)
		if conn != "" && s.conn.Conn == num || conn == "" && client != "" && s.conn.ClientID == client {
			found, fs = cl.Conn, s
			return false
		}
		return true
	})
	return found, fs, found != nil
}
